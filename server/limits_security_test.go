package server_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// TestAuthFailuresCloseTheConnection: 200 wrong AUTHs pipelined get ten
// WRONGPASS replies, then the connection closes (Redis answers all 200:
// leaf stops a guesser at pipeline speed); the failures are counted in
// INFO and logged at warn with the address, ten a minute.
func TestAuthFailuresCloseTheConnection(t *testing.T) {
	var buf logbuf.Buffer
	in := servertest.Start(t, servertest.Options{Server: server.Options{
		Password: "pw", MaxAuthFailures: 10,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}})
	c := rawresp.Dial(t, in.Addr)
	c.Send(strings.Repeat(rawresp.Cmd("AUTH", "guess"), 200))
	c.Expect(strings.Repeat("-WRONGPASS invalid username-password pair or user is disabled.\r\n", 10))
	c.ExpectClosed()

	ok := newClient(t, in.Addr, 2, "pw")
	info, err := ok.Info(context.Background(), "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\r\nacl_access_denied_auth:10\r\n", "\r\nauth_failure_disconnects:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", strings.TrimSpace(want))
		}
	}
	log := buf.String()
	if n := strings.Count(log, `level=WARN msg="authentication failed"`); n != 10 || !strings.Contains(log, "addr=127.0.0.1:") ||
		!strings.Contains(log, `msg="closing a connection after too many refused passwords"`) || strings.Contains(log, "guess") {
		t.Errorf("%d warn lines of failures; the log:\n%s", n, log)
	}

	// Redis itself answers every one: the difference is leaf's.
	redis := rawresp.Dial(t, redistest.Start(t))
	redis.Send(rawresp.Cmd("CONFIG", "SET", "requirepass", "pw"))
	redis.Expect("+OK\r\n")
	redis.Send(strings.Repeat(rawresp.Cmd("AUTH", "guess"), 20) + rawresp.Cmd("AUTH", "pw"))
	redis.Expect(strings.Repeat("-WRONGPASS invalid username-password pair or user is disabled.\r\n", 20) + "+OK\r\n")
}

// TestAuthTimeout: with a password, a connection that has not
// authenticated within server.auth_timeout is closed, and counted; one
// that authenticated stays.
func TestAuthTimeout(t *testing.T) {
	in := servertest.Start(t, servertest.Options{Server: server.Options{Password: "pw", Conn: resp.Options{AuthTimeout: time.Second}}})
	ok := newClient(t, in.Addr, 3, "pw")
	redistest.Incr(t, ok, "a")
	stranger := rawresp.Dial(t, in.Addr)
	stranger.ExpectClosed()
	redistest.Incr(t, ok, "a")
	info, err := ok.Info(context.Background(), "leaf").Result()
	if err != nil || !strings.Contains(info, "\r\nauth_timeouts:1\r\n") {
		t.Fatalf("INFO leaf: %v\n%s", err, info)
	}
}

// TestClientListIsAdmins: with an admin password, CLIENT LIST shows every
// connection's address and name to the admin only; a client's own CLIENT
// INFO stays open.
func TestClientListIsAdmins(t *testing.T) {
	in := servertest.Start(t, servertest.Options{Server: server.Options{Password: "pw", AdminPassword: "adm"}})
	user := newClient(t, in.Addr, 2, "pw")
	wantErr(t, user, "NOPERM User default has no permissions to run the 'client|list' command (administrative: AUTH admin <password> first)", "CLIENT", "LIST")
	if err := user.Do(context.Background(), "CLIENT", "INFO").Err(); err != nil {
		t.Fatalf("CLIENT INFO: %v", err)
	}
	admin := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, Username: "admin", Password: "adm", PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { admin.Close() })
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil || strings.Count(list, "\n") != 2 {
		t.Fatalf("the admin's CLIENT LIST: %v\n%s", err, list)
	}
}

// TestClientAttrsCapped: a client name, lib-name or lib-ver holds at most
// 256 bytes (Redis takes any length; CLIENT LIST shows them all).
func TestClientAttrsCapped(t *testing.T) {
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	ok := strings.Repeat("n", 256)
	long := ok + "n"
	if err := c.Do(context.Background(), "CLIENT", "SETNAME", ok).Err(); err != nil {
		t.Fatalf("a 256-byte name: %v", err)
	}
	wantErr(t, c, "ERR Client names are limited to 256 bytes", "CLIENT", "SETNAME", long)
	wantErr(t, c, "ERR lib-name is limited to 256 bytes", "CLIENT", "SETINFO", "lib-name", long)
	wantErr(t, c, "ERR LIB-VER is limited to 256 bytes", "CLIENT", "SETINFO", "LIB-VER", long)
	wantErr(t, c, "ERR Client names are limited to 256 bytes", "HELLO", "2", "SETNAME", long)
	if name, err := c.ClientGetName(context.Background()).Result(); err != nil || name != ok {
		t.Fatalf("the name after the refusals: %d bytes, %v", len(name), err)
	}
}

// TestCreatePolicy: segment.auto_create admin lets only the admin user's
// INCR create a tag; segment.create_rate bounds a connection's creations a
// second (on the server's clock), known tags go on; INFO counts both.
func TestCreatePolicy(t *testing.T) {
	t.Run("admin", func(t *testing.T) {
		in := servertest.Start(t, servertest.Options{Server: server.Options{AdminPassword: "adm", CreatePolicy: "admin"}})
		c := newClient(t, in.Addr, 2, "")
		wantErr(t, c, "ERR tag 'fresh' does not exist and was not created: only the admin user creates tags "+
			"(segment.auto_create: admin): AUTH admin <password>, or LEAF.CREATE", "INCR", "fresh")
		if err := c.Do(context.Background(), "AUTH", "admin", "adm").Err(); err != nil {
			t.Fatal(err)
		}
		if got := redistest.Incr(t, c, "fresh"); got != 1 {
			t.Fatalf("the admin's INCR: %d", got)
		}
		other := newClient(t, in.Addr, 2, "")
		if got := redistest.Incr(t, other, "fresh"); got != 2 {
			t.Fatalf("a known tag for everyone: %d", got)
		}
	})
	t.Run("rate", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		in := servertest.Start(t, servertest.Options{Server: server.Options{CreateRate: 2, Now: clock}})
		c := newClient(t, in.Addr, 2, "")
		redistest.Incr(t, c, "r1")
		redistest.Incr(t, c, "r2")
		wantErr(t, c, "ERR tag 'r3' does not exist and was not created: this connection created 2 tags a second already (segment.create_rate)", "INCR", "r3")
		if got := redistest.Incr(t, c, "r1"); got != 2 {
			t.Fatalf("a known tag past the rate: %d", got)
		}
		if got := redistest.Incr(t, newClient(t, in.Addr, 2, ""), "r3"); got != 1 {
			t.Fatalf("another connection: %d", got)
		}
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		if got := redistest.Incr(t, c, "r4"); got != 1 {
			t.Fatalf("a second later: %d", got)
		}
		info, _ := c.Info(context.Background(), "leaf").Result()
		for _, want := range []string{"\r\ntags_created:4\r\n", "\r\ntag_creates_refused:1\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO leaf lacks %q:\n%s", strings.TrimSpace(want), info)
			}
		}
	})
	t.Run("max_tags", func(t *testing.T) {
		so := segment.DefaultOptions()
		so.MaxTags = 2
		in := servertest.Start(t, servertest.Options{Segment: &so})
		c := newClient(t, in.Addr, 2, "")
		redistest.Incr(t, c, "a")
		redistest.Incr(t, c, "b")
		wantErr(t, c, "ERR tag 'c' does not exist and was not created: too many tags (segment.max_tags): this server holds 2, the limit is 2", "INCR", "c")
		wantErr(t, c, "ERR tag 'c' does not exist and was not created: too many tags (segment.max_tags): this server holds 2, the limit is 2", "LEAF.CREATE", "c")
		if got := redistest.Incr(t, c, "a"); got != 2 {
			t.Fatalf("a known tag at the limit: %d", got)
		}
	})
}

// TestClientCertificates: with a client CA, a client without a
// certificate cannot connect; one whose certificate says CN=admin is the
// admin user without AUTH; CN=someone else must AUTH as usual.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := servertest.NewCA(t, dir)
	srvCert, srvKey := ca.Issue(t, dir, "server", "leaf", true)
	conf, _, err := server.NewTLS(server.TLSOptions{Cert: srvCert, Key: srvKey, ClientCA: ca.Cert})
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, servertest.Options{Server: server.Options{
		Password: "pw", AdminPassword: "adm", Conn: resp.Options{TLS: conf}, CertLogin: true}})
	client := func(t *testing.T, cn string) *redis.Client {
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cn != "" {
			cert, key := ca.Issue(t, dir, cn, cn, false)
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		c := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, TLSConfig: tc, PoolSize: 1, MaxRetries: -1}))
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	if err := client(t, "").Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	admin := client(t, "admin")
	if err := admin.Do(ctx, "LEAF.CREATE", "made-by-cert").Err(); err != nil {
		t.Fatalf("CN=admin, LEAF.CREATE without AUTH: %v", err)
	}
	wantErr(t, client(t, "bob"), "NOAUTH Authentication required.", "INCR", "made-by-cert")
	user := client(t, "default")
	if got := redistest.Incr(t, user, "made-by-cert"); got != 1 {
		t.Fatalf("CN=default: %d", got)
	}
	wantErr(t, user, "NOPERM User default has no permissions to run the 'leaf.step' command (administrative: AUTH admin <password> first)", "LEAF.STEP", "made-by-cert", "5")
}

// TestCertificateReload: a renewed certificate is served to the next
// handshake once its files change (or on Reload), with no restart; a
// broken one keeps the old in service.
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca := servertest.NewCA(t, dir)
	cert, key := ca.Issue(t, dir, "server", "first", true)
	conf, certs, err := server.NewTLS(server.TLSOptions{Cert: cert, Key: key, CheckEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, servertest.Options{Server: server.Options{Conn: resp.Options{TLS: conf}}})
	served := func() string {
		t.Helper()
		tc, err := tls.Dial("tcp", in.Addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}
	ca.Issue(t, dir, "server", "second", true) // the same files, renewed
	if got := served(); got != "second" || certs.Reloads() != 1 {
		t.Fatalf("after the files changed: %q, %d reloads", got, certs.Reloads())
	}
	if err := writeFile(key, "not a key"); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "second" {
		t.Fatalf("a broken key: served %q, want the one in use", got)
	}
	ca.Issue(t, dir, "server", "third", true)
	if err := certs.Reload(); err != nil || served() != "third" {
		t.Fatalf("Reload: %v", err)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
