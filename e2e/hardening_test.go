package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server/servertest"
)

// Hardening at the process level: protected mode, TLS from the
// configuration, secrets kept out of the log, and max_clients fitted to
// the open-file limit.

// loopbackAddr is addr (as leaf logged it) with the host replaced by
// 127.0.0.1, for a server listening on every interface.
func loopbackAddr(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// TestProtectedMode: without a password, leaf refuses to listen beyond
// loopback and says which keys to change; with a password, or with
// protected_mode off, it serves there.
func TestProtectedMode(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		t.Run("refused on "+addr, func(t *testing.T) {
			code, stderr := runLeafToExit(t, t.TempDir(), "LEAF_SERVER_ADDR="+addr)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero\n%s", stderr)
			}
			for _, want := range []string{"server.addr", "server.password", "protected_mode", strconv.Quote(addr)} {
				if !strings.Contains(stderr, want) {
					t.Errorf("the message lacks %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "msg=serving") {
				t.Errorf("it served before refusing:\n%s", stderr)
			}
		})
	}
	for _, tc := range []struct {
		name     string
		env      []string
		password string
	}{
		{"with a password", []string{"LEAF_SERVER_PASSWORD=s3cret"}, "s3cret"},
		{"with protected_mode off", []string{"LEAF_SERVER_PROTECTED_MODE=false"}, ""},
	} {
		t.Run("serves "+tc.name, func(t *testing.T) {
			p := startLeaf(t, t.TempDir(), append([]string{"LEAF_SERVER_ADDR=0.0.0.0:0"}, tc.env...)...)
			c := redis.NewClient(redistest.Options(&redis.Options{Addr: loopbackAddr(t, p.Addr), Password: tc.password, PoolSize: 1, MaxRetries: -1}))
			t.Cleanup(func() { c.Close() })
			if got := redistest.Incr(t, c, "open"); got != 1 {
				t.Fatalf("INCR = %d, want 1", got)
			}
			p.Stop(syscall.SIGTERM)
		})
	}
}

// TestTLSProcess: server.tls_cert and server.tls_key make leaf speak TLS,
// to redis-cli --tls and to go-redis; an unreadable certificate stops the
// start with a message naming the keys.
func TestTLSProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := servertest.SelfSignedCert(t, dir)
	p := startLeaf(t, dir, "LEAF_SERVER_TLS_CERT="+cert, "LEAF_SERVER_TLS_KEY="+key)
	if !strings.Contains(p.Log(), "tls=true") {
		t.Errorf("the serving line does not say TLS:\n%s", p.Log())
	}
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, PoolSize: 1, MaxRetries: -1, TLSConfig: &tls.Config{InsecureSkipVerify: true}}))
	t.Cleanup(func() { c.Close() })
	if got := redistest.Incr(t, c, "tls"); got != 1 {
		t.Fatalf("INCR over TLS = %d, want 1", got)
	}
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		_, port, _ := net.SplitHostPort(p.Addr)
		out, err := exec.Command(cli, "--tls", "--insecure", "-h", "127.0.0.1", "-p", port, "INCR", "tls").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "2" {
			t.Errorf("redis-cli --tls --insecure INCR tls: %q, %v; want 2", out, err)
		}
	} else {
		t.Log("redis-cli not found: only go-redis checked") // server's TestTLS requires it under CI
	}
	// A plain client fails cleanly; the server goes on.
	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
	io.WriteString(nc, "PING\r\n")
	if got, _ := io.ReadAll(nc); strings.Contains(string(got), "PONG") {
		t.Errorf("a plain client got %q", got)
	}
	nc.Close()
	if got := redistest.Incr(t, c, "tls"); got < 2 {
		t.Fatalf("INCR over TLS after a plain client = %d", got)
	}
	p.Stop(syscall.SIGTERM)

	code, stderr := runLeafToExit(t, dir, "LEAF_SERVER_TLS_CERT="+dir+"/nosuch.pem", "LEAF_SERVER_TLS_KEY="+key)
	if code == 0 || !strings.Contains(stderr, "server.tls_cert") || !strings.Contains(stderr, "nosuch.pem") {
		t.Fatalf("a missing certificate: exit %d\n%s", code, stderr)
	}
}

// TestSecretsNotLogged: at debug level, after wrong and right AUTH for
// both users and a clean stop, the log holds neither password nor the
// wrong guess, though it records the failures.
func TestSecretsNotLogged(t *testing.T) {
	t.Parallel()
	const pass, admin, guess = "pw-Hq42-secret", "adm-Lr88-secret", "guess-Tn16-wrong"
	p := startLeaf(t, t.TempDir(), "LEAF_SERVER_PASSWORD="+pass, "LEAF_SERVER_ADMIN_PASSWORD="+admin)
	ctx := context.Background()
	c := p.client(t)
	for _, args := range [][]any{{"AUTH", guess}, {"AUTH", "admin", guess}, {"HELLO", "3", "AUTH", "default", guess}} {
		if err := c.Do(ctx, args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
			t.Fatalf("%v: %v, want WRONGPASS", args, err)
		}
	}
	for _, args := range [][]any{{"AUTH", pass}, {"INCR", "s"}, {"AUTH", "admin", admin}, {"LEAF.STEP", "s", "10"}} {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	info, err := c.Info(ctx, "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "\r\nacl_access_denied_auth:3\r\n") {
		t.Errorf("INFO does not count 3 failed attempts:\n%s", info)
	}
	p.Stop(syscall.SIGTERM)
	log := p.Log()
	if !strings.Contains(log, "authentication failed") {
		t.Fatalf("the debug log lacks the failed attempts:\n%s", log)
	}
	for _, secret := range []string{pass, admin, guess} {
		if strings.Contains(log, secret) || strings.Contains(info, secret) {
			t.Errorf("%q appears in the log or INFO:\n%s\n%s", secret, log, info)
		}
	}
}

// TestMaxClientsFitsFileLimit: under an open-file limit of 300 (soft and
// hard), leaf lowers max_clients to what fits, says so, and refuses the
// connections beyond with Redis's error rather than failing to accept.
func TestMaxClientsFitsFileLimit(t *testing.T) {
	t.Parallel()
	const limit, reserved = 300, 32 + 16 // main.go's reserve with store.max_open_conns 16
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to lower the limit with")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max < limit {
		t.Skipf("open-file hard limit %d: cannot set %d (%v)", lim.Max, limit, err)
	}
	cmd := leafCmd(t.TempDir())
	cmd.Args = []string{sh, "-c", "ulimit -n " + strconv.Itoa(limit) + " && exec " + leafBin}
	cmd.Path = sh
	p := startCmd(t, cmd)
	if !strings.Contains(p.Log(), "server.max_clients lowered") || !strings.Contains(p.Log(), "lowered_to="+strconv.Itoa(limit-reserved)) {
		t.Fatalf("no warning about max_clients:\n%s", p.Log())
	}
	buf := make([]byte, 64)
	for i := range limit - reserved {
		nc, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
		io.WriteString(nc, "PING\r\n")
		if n, err := io.ReadAtLeast(nc, buf, 7); err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("connection %d: %q, %v", i+1, buf[:n], err)
		}
	}
	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if got, _ := io.ReadAll(nc); string(got) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("connection %d: %q", limit-reserved+1, got)
	}
	p.Stop(syscall.SIGTERM)
}
