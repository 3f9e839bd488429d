package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStatusPage: the page as served, one row per tag, refreshing itself
// and sized for phones.
func TestStatusPage(t *testing.T) {
	e := start(t, setup{})
	c := e.client(t)
	incr(t, c, "order")
	incr(t, c, "user<&>") // escaped, not markup
	r := get(t, e.URL+"/")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		`<meta http-equiv="refresh" content="5">`,
		`<tr class="tag" data-tag="order">`,
		`<tr class="tag" data-tag="user&lt;&amp;&gt;">`,
		`id="store">ok<`,
		`ready: ok`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(r.body)
	}
}

// chromium finds a Chromium binary; without one the test skips, or fails
// under CI=true (scripts/test.sh installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (CI=true): install Debian's chromium package")
	}
	t.Skip("chromium not found: install Debian's chromium package to run this test")
	return ""
}

// dumpDOM loads url in headless Chromium with a fresh profile and returns
// the DOM after the page loaded.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	bin := chromium(t)
	// A bound on a hung browser, not a timing assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(),
		"--window-size=390,844", // a phone
		"--dump-dom", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

// TestStatusPageChromium renders the page in a real browser and finds every
// tag's row in the DOM it built.
func TestStatusPageChromium(t *testing.T) {
	e := start(t, setup{})
	c := e.client(t)
	tags := []string{"order", "user", "payment"}
	for _, tag := range tags {
		incr(t, c, tag)
	}
	dom := dumpDOM(t, e.URL+"/")
	rows := regexp.MustCompile(`<tr class="tag" data-tag="([^"]*)">`).FindAllStringSubmatch(dom, -1)
	var got []string
	for _, m := range rows {
		got = append(got, m[1])
	}
	want := []string{"order", "payment", "user"} // sorted by name
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tag rows in the DOM: %v, want %v\n%s", got, want, dom)
	}
	for _, s := range []string{`<td data-label="runway IDs">`, `(current)`, `ready: ok`} {
		if !strings.Contains(dom, s) {
			t.Errorf("DOM lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(dom)
	}
}

// TestPProf: the profiler when asked for, on the handler's own mux.
func TestPProf(t *testing.T) {
	e := start(t, setup{pprof: true})
	for _, tc := range []struct{ path, want string }{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/cmdline", ""},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{"/debug/pprof/heap?debug=1", "heap profile"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, e.URL+tc.path)
			if r.status != http.StatusOK || !strings.Contains(r.body, tc.want) {
				t.Fatalf("%d, want 200 and %q in\n%.500s", r.status, tc.want, r.body)
			}
		})
	}
}
