package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/httpapi"
	"github.com/leaf-id/leaf/internal/redistest"
)

const (
	testPass  = "pw-Kx31-default"
	testAdmin = "pw-Qm77-admin"
)

// withPasswords sets both passwords, and the API's creation of tags.
func withPasswords(o *httpapi.Options) {
	o.Password, o.AdminPassword = testPass, testAdmin
}

// TestHTTPAuth: with a password, every endpoint but /healthz and /readyz
// wants it, as HTTP Basic with user default or admin, or as a Bearer
// token; a refusal is 401 with a Basic challenge and closes the
// connection, so each guess costs a new one.
func TestHTTPAuth(t *testing.T) {
	e := start(t, setup{pprof: true, http: withPasswords})
	redistest.Incr(t, e.client(t), "order")
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"basic default", []string{"Authorization", basic("default", testPass)}, http.StatusOK},
		{"basic admin", []string{"Authorization", basic("admin", testAdmin)}, http.StatusOK},
		{"basic default with the admin password", []string{"Authorization", basic("default", testAdmin)}, http.StatusUnauthorized},
		{"basic wrong password", []string{"Authorization", basic("default", "guess")}, http.StatusUnauthorized},
		{"basic unknown user", []string{"Authorization", basic("root", testPass)}, http.StatusUnauthorized},
		{"bearer", []string{"Authorization", "Bearer " + testPass}, http.StatusOK},
		{"bearer admin", []string{"Authorization", "bearer " + testAdmin}, http.StatusOK},
		{"bearer wrong", []string{"Authorization", "Bearer guess"}, http.StatusUnauthorized},
		{"other scheme", []string{"Authorization", "Digest x"}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/", "/cache", "/metrics", "/api/segment/get/order", "/debug/pprof/", "/decodeSnowflakeId?snowflakeId=1"} {
				r := get(t, e.URL+path, tc.header...)
				if r.status != tc.want {
					t.Fatalf("GET %s = %d %q, want %d", path, r.status, r.body, tc.want)
				}
				if tc.want == http.StatusUnauthorized {
					if r.header.Get("WWW-Authenticate") != `Basic realm="leaf", charset="UTF-8"` || !r.close {
						t.Fatalf("GET %s: 401 without the challenge or Connection: close: %v", path, r.header)
					}
				}
			}
		})
	}
	t.Run("health is open", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			if r := get(t, e.URL+path); r.status != http.StatusOK || strings.TrimSpace(r.body) != "ok" {
				t.Errorf("GET %s = %d %q", path, r.status, r.body)
			}
		}
	})
	refused := metrics(t, e.URL, "Authorization", "Bearer "+testPass)["leaf_http_auth_failures_total"]
	if refused != 6*6 {
		t.Errorf("leaf_http_auth_failures_total = %v, want 36", refused)
	}
}

// TestMetricsOpen: http.metrics_auth off leaves /metrics, and only it, open.
func TestMetricsOpen(t *testing.T) {
	e := start(t, setup{http: func(o *httpapi.Options) { withPasswords(o); o.MetricsOpen = true }})
	if r := get(t, e.URL+"/metrics"); r.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	if r := get(t, e.URL+"/"); r.status != http.StatusUnauthorized {
		t.Fatalf("GET / = %d, want 401", r.status)
	}
}

// TestNoUnauthenticatedPath: with a password set, a scan of every
// endpoint with every method and no credentials gets no ID, no tag name
// and creates no tag; only /healthz and /readyz answer 200.
func TestNoUnauthenticatedPath(t *testing.T) {
	e := start(t, setup{pprof: true, cluster: true, http: withPasswords})
	redistest.Incr(t, e.client(t), "secret-tag-name")
	paths := []string{"/", "/?q=secret", "/cache", "/cache?page=1", "/metrics", "/healthz", "/readyz",
		"/api/segment/get/secret-tag-name", "/api/segment/get/new-tag", "/api/snowflake/get/x",
		"/decodeSnowflakeId?snowflakeId=1", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol",
		"/debug/pprof/goroutine?debug=2", "/debug/pprof/heap", "/nosuch", "//api/segment/get/new-tag",
		"/api/segment/get/../../cache", "/%61pi/segment/get/new-tag"}
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"}
	for _, path := range paths {
		for _, m := range methods {
			r := do(t, m, e.URL+path)
			open := (path == "/healthz" || path == "/readyz") && (m == "GET" || m == "HEAD")
			if r.status < 300 && !open {
				t.Errorf("%s %s = %d without a password", m, path, r.status)
			}
			if strings.Contains(r.body, "secret-tag-name") || strings.Contains(r.body, "new-tag") {
				t.Errorf("%s %s shows a tag name: %q", m, path, r.body)
			}
		}
	}
	if _, err := e.Store.Tag(context.Background(), "new-tag"); err == nil {
		t.Error("a request without the password created a tag")
	}
}

// TestMethods: GET and HEAD only where nothing changes; the API takes GET
// and POST (Leaf's callers), never HEAD, which would spend an ID.
func TestMethods(t *testing.T) {
	e := start(t, setup{pprof: true})
	redistest.Incr(t, e.client(t), "m")
	for _, tc := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{"POST", "/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/cache", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/metrics", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"OPTIONS", "/readyz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"HEAD", "/api/segment/get/m", http.StatusMethodNotAllowed, "GET, POST"},
		{"PUT", "/api/segment/get/m", http.StatusMethodNotAllowed, "GET, POST"},
		{"POST", "/debug/pprof/cmdline", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"HEAD", "/", http.StatusOK, ""},
		{"HEAD", "/healthz", http.StatusOK, ""},
		{"POST", "/api/segment/get/m", http.StatusOK, ""},
		{"POST", "/debug/pprof/symbol", http.StatusOK, ""},
	} {
		r := do(t, tc.method, e.URL+tc.path)
		if r.status != tc.want || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d, Allow %q; want %d, %q", tc.method, tc.path, r.status, r.header.Get("Allow"), tc.want, tc.allow)
		}
	}
	if got := redistest.Incr(t, e.client(t), "m"); got != 3 {
		t.Errorf("INCR after one POST to the API = %d, want 3 (HEAD and PUT spent nothing)", got)
	}
}

// TestAllowedHosts: a Host header off the list answers 421 (DNS
// rebinding), but for the probes; a listed host matches with any port.
func TestAllowedHosts(t *testing.T) {
	e := start(t, setup{http: func(o *httpapi.Options) { o.AllowedHosts = []string{"ids.example", "127.0.0.1"} }})
	for _, tc := range []struct {
		host, path string
		want       int
	}{
		{"evil.example", "/", http.StatusMisdirectedRequest},
		{"evil.example:80", "/api/segment/get/x", http.StatusMisdirectedRequest},
		{"ids.example.evil", "/cache", http.StatusMisdirectedRequest},
		{"evil.example", "/healthz", http.StatusOK},
		{"ids.example:8080", "/", http.StatusOK},
		{"IDS.EXAMPLE", "/metrics", http.StatusOK},
		{"", "/", http.StatusOK}, // the URL's 127.0.0.1:port
	} {
		req, err := http.NewRequest("GET", e.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q %s = %d, want %d", tc.host, tc.path, resp.StatusCode, tc.want)
		}
	}
}

// TestCrossSite: a browser's request to the API from another site is
// refused, even with credentials it remembers; a program's is served.
func TestCrossSite(t *testing.T) {
	e := start(t, setup{http: withPasswords})
	auth := basic("default", testPass)
	redistest.Incr(t, e.client(t), "x")
	for _, tc := range []struct {
		method string
		header []string
		want   int
	}{
		{"GET", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"GET", []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"POST", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"GET", []string{"Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{"POST", nil, http.StatusOK},
	} {
		r := do(t, tc.method, e.URL+"/api/segment/get/x", append([]string{"Authorization", auth}, tc.header...)...)
		if r.status != tc.want {
			t.Errorf("%s %v = %d %q, want %d", tc.method, tc.header, r.status, r.body, tc.want)
		}
	}
}

// TestAPICreates: Leaf's API creates no tag by default (Leaf's -2); with
// AutoCreate, only as CreatePolicy and CreateRate allow, per client.
func TestAPICreates(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		e := start(t, setup{http: func(o *httpapi.Options) { o.AutoCreate = false }})
		r := get(t, e.URL+"/api/segment/get/fresh")
		if r.status != http.StatusInternalServerError || !strings.Contains(r.body, "Result{id=-2") ||
			!strings.Contains(r.header.Get("X-Leaf-Error"), "may not create") {
			t.Fatalf("unknown tag: %d %q %q", r.status, r.body, r.header.Get("X-Leaf-Error"))
		}
		if _, err := e.Store.Tag(context.Background(), "fresh"); err == nil {
			t.Fatal("the API created the tag")
		}
		redistest.Incr(t, e.client(t), "fresh")
		if got := leafID(t, e.URL, "fresh"); got != 2 {
			t.Fatalf("a tag with a row: %d, want 2", got)
		}
	})
	t.Run("admin only", func(t *testing.T) {
		e := start(t, setup{http: func(o *httpapi.Options) { withPasswords(o); o.CreatePolicy = "admin" }})
		if r := get(t, e.URL+"/api/segment/get/a1", "Authorization", basic("default", testPass)); !strings.Contains(r.body, "Result{id=-2") {
			t.Fatalf("the default user created a tag: %d %q", r.status, r.body)
		}
		if r := get(t, e.URL+"/api/segment/get/a1", "Authorization", basic("admin", testAdmin)); r.status != http.StatusOK || r.body != "1" {
			t.Fatalf("the admin user: %d %q", r.status, r.body)
		}
	})
	t.Run("rate", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		e := start(t, setup{http: func(o *httpapi.Options) { o.CreateRate = 2; o.Now = clock }})
		for i, want := range []int{200, 200, 500} {
			r := get(t, e.URL+"/api/segment/get/r"+string(rune('a'+i)))
			if r.status != want {
				t.Fatalf("creation %d: %d %q, want %d", i+1, r.status, r.body, want)
			}
			if want == 500 && !strings.Contains(r.header.Get("X-Leaf-Error"), "segment.create_rate") {
				t.Fatalf("refusal does not name segment.create_rate: %q", r.header.Get("X-Leaf-Error"))
			}
		}
		if got := leafID(t, e.URL, "ra"); got != 2 {
			t.Fatalf("a known tag past the rate: %d", got)
		}
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		if got := leafID(t, e.URL, "rc"); got != 1 {
			t.Fatalf("a second later: %d", got)
		}
	})
}

// TestCachePages: /cache shows a page of tags, sorted, with headers and
// links to the others; ?q= filters.
func TestCachePages(t *testing.T) {
	e := start(t, setup{http: func(o *httpapi.Options) { o.CachePageSize = 4 }})
	c := e.client(t)
	for _, tag := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "u1"} {
		redistest.Incr(t, c, tag)
	}
	for _, tc := range []struct {
		query, keys, total, link string
	}{
		{"", "t1,t2,t3,t4", "10", `</cache?page=2>; rel="next"`},
		{"?page=2", "t5,t6,t7,t8", "10", `</cache?page=3>; rel="next", </cache?page=1>; rel="prev"`},
		{"?page=3", "t9,u1", "10", `</cache?page=2>; rel="prev"`},
		{"?page=99", "t9,u1", "10", `</cache?page=2>; rel="prev"`},
		{"?q=u", "u1", "1", ""},
	} {
		r := get(t, e.URL+"/cache"+tc.query)
		var byKey map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.body), &byKey); err != nil {
			t.Fatalf("%s: %v in %q", tc.query, err, r.body)
		}
		var keys []string
		for _, k := range strings.Split(tc.keys, ",") {
			if _, ok := byKey[k]; !ok {
				t.Errorf("%s: no %s in %q", tc.query, k, r.body)
			}
			keys = append(keys, k)
		}
		if len(byKey) != len(keys) || r.header.Get("X-Total-Count") != tc.total || r.header.Get("Link") != tc.link {
			t.Errorf("%s: %d tags, X-Total-Count %q, Link %q; want %d, %s, %q", tc.query, len(byKey),
				r.header.Get("X-Total-Count"), r.header.Get("Link"), len(keys), tc.total, tc.link)
		}
	}
	html := get(t, e.URL+"/cache?page=2", "Accept", "text/html")
	if !strings.Contains(html.body, "page 2 of 3 (10 tags)") || !strings.Contains(html.body, `id="next" href="/cache?page=3"`) {
		t.Errorf("the HTML page lacks its pager:\n%s", html.body)
	}
}
