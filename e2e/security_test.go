package e2e

// The security findings, tried again against the binary the way an
// attacker on the network would, with real HTTP and Redis clients: the
// HTTP side behind the password, protected mode on http.addr, pprof's
// command line, HTTPS with client certificates and certificate reload,
// AUTH guessing, strangers holding connections, CLIENT LIST and names,
// tags without end, /cache's size and HTTP connections against the file
// budget.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server/servertest"
)

// startLeafArgs is startLeaf with flags after the binary's name.
func startLeafArgs(t *testing.T, dir string, args []string, env ...string) *proc {
	t.Helper()
	cmd := leafCmd(dir, env...)
	cmd.Args = append(cmd.Args, args...)
	return startCmd(t, cmd)
}

// httpDo sends one request with a client that keeps no connection, and
// answers status and body.
func httpDo(t *testing.T, client *http.Client, method, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// authed is a go-redis client that logs in as user.
func authed(t *testing.T, p *proc, user, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, Username: user, Password: password, PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { c.Close() })
	return c
}

// infoValue is one field of INFO's text.
func infoValue(t *testing.T, c *redis.Client, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:(.*)\r$`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("INFO has no %s", field)
	}
	return m[1]
}

// TestHTTPBehindThePassword (findings 1 and 2): with a password, a scan
// of the HTTP side without it, every path and method, gets no ID, no tag
// name and creates no tag; with it, everything works; pprof's command
// line hides the admin password given as a flag; the warnings come once.
func TestHTTPBehindThePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const pass, admin = "pw-Bf62-http", "adm-Wc18-http"
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startLeafArgs(t, dir, []string{"--server.admin_password=" + admin},
		"LEAF_SERVER_PASSWORD_FILE=pw", "LEAF_HTTP_ADDR=0.0.0.0:0", "LEAF_HTTP_PPROF=true")
	base := "http://" + loopbackAddr(t, strings.TrimPrefix(p.httpBase(t), "http://"))
	c := authed(t, p, "default", pass)
	redistest.Incr(t, c, "secret-tag")
	for _, warning := range []string{"http.pprof is on", "http.addr listens beyond loopback without TLS", "a password given as a flag"} {
		if n := strings.Count(p.Log(), warning); n != 1 {
			t.Errorf("%d warnings %q, want 1", n, warning)
		}
	}
	created := infoValue(t, c, "tags_created")

	paths := []string{"/", "/cache", "/metrics", "/healthz", "/readyz", "/api/segment/get/secret-tag", "/api/segment/get/new-tag",
		"/api/snowflake/get/x", "/decodeSnowflakeId?snowflakeId=1", "/debug/pprof/", "/debug/pprof/cmdline",
		"/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"}
	for _, path := range paths {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"} {
			code, body := httpDo(t, nil, m, base+path)
			open := (path == "/healthz" || path == "/readyz") && (m == "GET" || m == "HEAD")
			if code < 300 && !open {
				t.Errorf("%s %s = %d without the password", m, path, code)
			}
			if strings.Contains(body, "secret-tag") || strings.Contains(body, "new-tag") || strings.Contains(body, pass) {
				t.Errorf("%s %s shows a tag or the password: %q", m, path, body)
			}
		}
	}
	if got := infoValue(t, c, "tags_created"); got != created {
		t.Errorf("tags_created went from %s to %s during the scan", created, got)
	}

	auth := []string{"Authorization", "Bearer " + pass}
	if code, body := httpDo(t, nil, "GET", base+"/api/segment/get/secret-tag", auth...); code != 200 || body != "2" {
		t.Errorf("the API with the password = %d %q, want 200 \"2\"", code, body)
	}
	if code, body := httpDo(t, nil, "GET", base+"/api/segment/get/new-tag", auth...); code != 500 || !strings.Contains(body, "Result{id=-2") {
		t.Errorf("the API on a new tag (http.auto_create off) = %d %q", code, body)
	}
	code, body := httpDo(t, nil, "GET", base+"/debug/pprof/cmdline", "Authorization", "Basic "+basicAuth("admin", admin))
	if code != 200 || strings.Contains(body, admin) || !strings.Contains(body, "--server.admin_password=REDACTED") {
		t.Errorf("/debug/pprof/cmdline = %d %q", code, body)
	}
	p.Stop(syscall.SIGTERM)
	if strings.Contains(p.Log(), pass) || strings.Contains(p.Log(), admin) {
		t.Errorf("a password is in the log:\n%s", p.Log())
	}
}

func basicAuth(user, pass string) string {
	req, _ := http.NewRequest("GET", "http://x/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// TestHTTPProtectedMode (finding 1): http.addr beyond loopback without a
// password stops the start, as server.addr does; pprof beyond loopback
// needs a password even with protected mode off.
func TestHTTPProtectedMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"http.addr", []string{"LEAF_HTTP_ADDR=0.0.0.0:0"}, []string{"http.addr", `"0.0.0.0:0" listens beyond loopback`, "server.password"}},
		{"pprof", []string{"LEAF_HTTP_ADDR=0.0.0.0:0", "LEAF_SERVER_PROTECTED_MODE=false", "LEAF_HTTP_PPROF=true"}, []string{"http.pprof"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runLeafToExit(t, t.TempDir(), tc.env...)
			if code == 0 || strings.Contains(stderr, "serving") {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("the message lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestHTTPSAndClientCertificates (finding 9): HTTPS on http.addr with the
// Redis port's certificate; with a client CA, no certificate no service,
// CN=admin is the admin user on both ports; SIGHUP serves a renewed
// certificate on both.
func TestHTTPSAndClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := servertest.NewCA(t, dir)
	cert, key := ca.Issue(t, dir, "server", "first", true)
	p := startLeaf(t, dir, "LEAF_SERVER_PASSWORD=pw", "LEAF_SERVER_ADMIN_PASSWORD=adm",
		"LEAF_SERVER_TLS_CERT="+cert, "LEAF_SERVER_TLS_KEY="+key, "LEAF_SERVER_TLS_CLIENT_CA="+ca.Cert,
		"LEAF_HTTP_ADDR=127.0.0.1:0", "LEAF_HTTP_TLS=true")
	hostport := strings.TrimPrefix(p.httpBase(t), "http://")
	clientTLS := func(cn string) *tls.Config {
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cn != "" {
			c, k := ca.Issue(t, dir, "client-"+cn, cn, false)
			pair, err := tls.LoadX509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		return tc
	}
	web := func(cn string) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(cn), DisableKeepAlives: true}}
	}
	if _, err := web("").Get("https://" + hostport + "/healthz"); err == nil {
		t.Fatal("HTTPS without a client certificate was served")
	}
	if code, body := httpDo(t, web("admin"), "GET", "https://"+hostport+"/cache"); code != 200 {
		t.Fatalf("HTTPS as CN=admin: %d %q", code, body)
	}
	if code, _ := httpDo(t, web("eve"), "GET", "https://"+hostport+"/cache"); code != 401 {
		t.Fatalf("HTTPS as CN=eve without a password: %d, want 401", code)
	}
	rc := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, TLSConfig: clientTLS("admin"), PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { rc.Close() })
	if err := rc.Do(context.Background(), "LEAF.CREATE", "by-cert").Err(); err != nil {
		t.Fatalf("Redis over TLS as CN=admin, LEAF.CREATE: %v", err)
	}

	served := func(addr string) string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, clientTLS("default"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	ca.Issue(t, dir, "server", "renewed", true)
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.Log(), "TLS certificate reloaded"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP:\n%s", p.Log())
		}
	}
	for _, addr := range []string{p.Addr, hostport} {
		if got := served(addr); got != "renewed" {
			t.Errorf("%s serves %q after SIGHUP, want the renewed certificate", addr, got)
		}
	}
	p.Stop(syscall.SIGTERM)
}

// TestRedisPortLimits (findings 3, 6, 7, 8, 10): guessing AUTH at pipeline
// speed stops at server.max_auth_failures; strangers are cut off after
// server.auth_timeout so they cannot hold max_clients; CLIENT LIST is the
// admin's and names are capped; segment.max_tags and segment.auto_create
// admin hold; admin commands open beyond loopback are warned of.
func TestRedisPortLimits(t *testing.T) {
	t.Parallel()
	p := startLeaf(t, t.TempDir(), "LEAF_SERVER_PASSWORD=pw", "LEAF_SERVER_ADMIN_PASSWORD=adm",
		"LEAF_SEGMENT_MAX_TAGS=3", "LEAF_SEGMENT_AUTO_CREATE=admin")
	ctx := context.Background()

	t.Run("AUTH guessing", func(t *testing.T) {
		c := rawresp.Dial(t, p.Addr)
		go c.NC.Write([]byte(strings.Repeat(rawresp.Cmd("AUTH", "guess"), 200_000)))
		// The connection closes with guesses unread, so the kernel may
		// reset it before the replies arrive: count what came, and what
		// the server says it refused.
		got, _ := io.ReadAll(c.R)
		const wrong = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
		if n := strings.Count(string(got), wrong); n > 10 || len(got) != n*len(wrong) {
			t.Fatalf("%d bytes of replies, %d WRONGPASS; want at most 10 and nothing else", len(got), n)
		}
		admin := authed(t, p, "admin", "adm")
		if got := infoValue(t, admin, "acl_access_denied_auth"); got != "10" {
			t.Errorf("acl_access_denied_auth = %s, want 10: the server ran more guesses", got)
		}
		if got := infoValue(t, admin, "auth_failure_disconnects"); got != "1" {
			t.Errorf("auth_failure_disconnects = %s, want 1", got)
		}
		if n := strings.Count(p.Log(), `level=WARN msg="authentication failed"`); n != 10 {
			t.Errorf("%d warn lines of refused passwords, want 10", n)
		}
	})

	t.Run("strangers cut off", func(t *testing.T) {
		// Its own server: a short auth_timeout, which a client on a busy
		// machine still meets (go-redis authenticates on connect).
		p := startLeaf(t, t.TempDir(), "LEAF_SERVER_PASSWORD=pw", "LEAF_SERVER_ADMIN_PASSWORD=adm",
			"LEAF_SERVER_MAX_CLIENTS=6", "LEAF_SERVER_AUTH_TIMEOUT=2s")
		var socks []net.Conn
		for range 6 {
			nc, err := net.Dial("tcp", p.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			socks = append(socks, nc)
		}
		for _, nc := range socks {
			nc.SetDeadline(time.Now().Add(time.Minute)) // a safety net
			if b, _ := io.ReadAll(nc); len(b) != 0 && !strings.Contains(string(b), "max number of clients") {
				t.Fatalf("a stranger read %q", b)
			}
		}
		c := authed(t, p, "admin", "adm")
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("a client after the strangers: %v", err)
		}
		if n, _ := strconv.Atoi(infoValue(t, c, "auth_timeouts")); n != 6 {
			t.Errorf("auth_timeouts = %d, want 6", n)
		}
		p.Stop(syscall.SIGTERM)
	})

	t.Run("CLIENT", func(t *testing.T) {
		c := authed(t, p, "default", "pw")
		if err := c.Do(ctx, "CLIENT", "LIST").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("CLIENT LIST as default: %v", err)
		}
		if err := c.Do(ctx, "CLIENT", "SETNAME", strings.Repeat("x", 64<<10-100)).Err(); err == nil {
			t.Error("a 64 KB client name was taken")
		}
		if err := authed(t, p, "admin", "adm").Do(ctx, "CLIENT", "LIST").Err(); err != nil {
			t.Errorf("CLIENT LIST as admin: %v", err)
		}
	})

	t.Run("tags", func(t *testing.T) {
		user := authed(t, p, "default", "pw")
		if err := user.Incr(ctx, "t0").Err(); err == nil || !strings.Contains(err.Error(), "only the admin user creates tags") {
			t.Errorf("INCR of a new tag as default: %v", err)
		}
		admin := authed(t, p, "admin", "adm")
		for i := range 3 {
			redistest.Incr(t, admin, fmt.Sprintf("t%d", i))
		}
		if err := admin.Incr(ctx, "t3").Err(); err == nil || !strings.Contains(err.Error(), "segment.max_tags") {
			t.Errorf("the fourth tag: %v", err)
		}
		if got := redistest.Incr(t, user, "t0"); got != 2 {
			t.Errorf("INCR of a known tag as default = %d", got)
		}
	})
	p.Stop(syscall.SIGTERM)
}

// TestAdminOpenWarning (finding 10): no admin password on an address
// beyond loopback is warned of at start, once.
func TestAdminOpenWarning(t *testing.T) {
	t.Parallel()
	p := startLeaf(t, t.TempDir(), "LEAF_SERVER_ADDR=0.0.0.0:0", "LEAF_SERVER_PASSWORD=pw")
	if n := strings.Count(p.Log(), "server.admin_password is empty: every client that may run commands may also run LEAF.CREATE"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, p.Log())
	}
	p.Stop(syscall.SIGTERM)
}

// TestCachePagedProcess (finding 4): /cache answers a page, whatever the
// tag count.
func TestCachePagedProcess(t *testing.T) {
	t.Parallel()
	// A load_timeout a busy machine's SQLite cannot run out.
	p := startLeaf(t, t.TempDir(), "LEAF_HTTP_ADDR=127.0.0.1:0", "LEAF_SEGMENT_CREATE_RATE=0", "LEAF_SEGMENT_LOAD_TIMEOUT=2m")
	c := patientClient(t, p)
	for chunk := range 11 {
		pipe := c.Pipeline()
		for i := range 100 {
			pipe.Incr(context.Background(), fmt.Sprintf("tag%05d", chunk*100+i))
		}
		if _, err := pipe.Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(p.httpBase(t) + "/cache")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(body), `"key":`); n != 1000 || resp.Header.Get("X-Total-Count") != "1100" ||
		resp.Header.Get("Link") != `</cache?page=2>; rel="next"` {
		t.Fatalf("/cache: %d tags, headers %v", n, resp.Header)
	}
	p.Stop(syscall.SIGTERM)
}

// TestHTTPConnsInFileBudget (finding 5): under an open-file limit of 300,
// http.max_conns counts in the budget max_clients is fitted to, and 200
// idle HTTP connections cannot take the Redis port's descriptors: every
// Redis client max_clients allows is served.
func TestHTTPConnsInFileBudget(t *testing.T) {
	t.Parallel()
	const limit, maxConns = 300, 40
	const clients = limit - 32 - 16 - maxConns // main.go's reserve with store.max_open_conns 16
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to lower the limit with")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max < limit {
		t.Skipf("open-file hard limit %d: cannot set %d (%v)", lim.Max, limit, err)
	}
	cmd := leafCmd(t.TempDir(), "LEAF_HTTP_ADDR=127.0.0.1:0", "LEAF_HTTP_MAX_CONNS="+strconv.Itoa(maxConns))
	cmd.Args = []string{sh, "-c", "ulimit -n " + strconv.Itoa(limit) + " && exec " + leafBin}
	cmd.Path = sh
	p := startCmd(t, cmd)
	if !strings.Contains(p.Log(), "lowered_to="+strconv.Itoa(clients)) {
		t.Fatalf("max_clients not lowered to %d:\n%s", clients, p.Log())
	}
	hostport := strings.TrimPrefix(p.httpBase(t), "http://")
	for range 200 { // idle keep-alive connections, as a neighbour would hold them
		nc, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
	}
	buf := make([]byte, 7)
	for i := range clients {
		nc, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(time.Minute)) // a safety net
		io.WriteString(nc, "PING\r\n")
		if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("Redis connection %d with 200 HTTP connections open: %q, %v", i+1, buf, err)
		}
	}
	if strings.Contains(p.Log(), "too many open files") {
		t.Fatalf("accept failed:\n%s", p.Log())
	}
	p.Stop(syscall.SIGTERM)
}
