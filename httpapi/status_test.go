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

	"github.com/leaf-id/leaf/internal/redistest"
)

// TestStatusPage: the page as served, one row per tag, refreshing itself
// and sized for phones.
func TestStatusPage(t *testing.T) {
	e := start(t, setup{})
	c := e.client(t)
	redistest.Incr(t, c, "order")
	redistest.Incr(t, c, "user<&>") // escaped, not markup
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

// TestStatusPagePages: many tags are shown a page at a time, filtered by
// ?q=, with links that keep the filter; totals count every tag.
func TestStatusPagePages(t *testing.T) {
	e := start(t, setup{pageSz: 2})
	c := e.client(t)
	for _, tag := range []string{"a1", "a2", "a3", "b1", "b&2"} {
		redistest.Incr(t, c, tag)
	}
	rowRE := regexp.MustCompile(`<tr class="tag" data-tag="([^"]*)">`)
	linkRE := regexp.MustCompile(`id="(prev|next)" href="([^"]*)"`)
	for _, tc := range []struct {
		query   string
		rows    string // data-tag values, in order
		showing string
		prev    string // href, "" when absent
		next    string
	}{
		{"", "a1,a2", "tags 1&ndash;2 of 5", "", "?page=2"},
		{"?page=2", "a3,b&amp;2", "tags 3&ndash;4 of 5", "?page=1", "?page=3"},
		{"?page=3", "b1", "tags 5&ndash;5 of 5", "?page=2", ""},
		{"?page=99", "b1", "tags 5&ndash;5 of 5", "?page=2", ""}, // past the end: the last page
		{"?page=x", "a1,a2", "tags 1&ndash;2 of 5", "", "?page=2"},
		{"?q=a", "a1,a2", "tags 1&ndash;2 of 3 matching &ldquo;a&rdquo;", "", "?page=2&amp;q=a"},
		{"?q=a&page=2", "a3", "tags 3&ndash;3 of 3 matching &ldquo;a&rdquo;", "?page=1&amp;q=a", ""},
		{"?q=%262", "b&amp;2", "tags 1&ndash;1 of 1 matching &ldquo;&amp;2&rdquo;", "", ""},
		{"?q=zz", "", "no tags matching &ldquo;zz&rdquo;", "", ""},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := get(t, e.URL+"/"+tc.query)
			if r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			var rows []string
			for _, m := range rowRE.FindAllStringSubmatch(r.body, -1) {
				rows = append(rows, m[1])
			}
			links := map[string]string{}
			for _, m := range linkRE.FindAllStringSubmatch(r.body, -1) {
				links[m[1]] = m[2]
			}
			if got := strings.Join(rows, ","); got != tc.rows {
				t.Errorf("rows %q, want %q", got, tc.rows)
			}
			if !strings.Contains(r.body, `<span id="showing">`+tc.showing+`</span>`) {
				t.Errorf("page lacks showing %q", tc.showing)
			}
			if links["prev"] != tc.prev || links["next"] != tc.next {
				t.Errorf("links prev %q next %q, want %q %q", links["prev"], links["next"], tc.prev, tc.next)
			}
			if !strings.Contains(r.body, `<b id="tagcount">5</b>`) {
				t.Errorf("page does not count all 5 tags")
			}
			if t.Failed() {
				t.Log(r.body)
			}
		})
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
		redistest.Incr(t, c, tag)
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
