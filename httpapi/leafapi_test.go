package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/idtest"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/segment"
)

// TestLeafAPI: the ID as plain text, as Leaf's LeafController answers, from
// the allocator INCR uses.
func TestLeafAPI(t *testing.T) {
	e := start(t, setup{})
	c := e.client(t)
	first := leafID(t, e.URL, "order")
	if first != 1 {
		t.Fatalf("first ID %d, want 1", first)
	}
	if got := redistest.Incr(t, c, "order"); got != 2 {
		t.Fatalf("INCR after the API: %d, want 2", got)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			r := do(t, method, e.URL+"/api/segment/get/order")
			if r.status != http.StatusOK {
				t.Fatalf("%d %q", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain;charset=UTF-8" {
				t.Fatalf("Content-Type %q, want Leaf's text/plain;charset=UTF-8", ct)
			}
			if _, err := strconv.ParseInt(r.body, 10, 64); err != nil {
				t.Fatalf("body %q is not a bare ID", r.body)
			}
		})
	}
	t.Run("escaped key", func(t *testing.T) {
		if got := leafID(t, e.URL, "a%20b"); got != 1 {
			t.Fatalf("first ID of tag \"a b\": %d", got)
		}
		if got := redistest.Incr(t, c, "a b"); got != 2 {
			t.Fatalf("INCR \"a b\" after the API: %d, want 2", got)
		}
	})
}

// springBody is the JSON Spring Boot 1.5 answers for Leaf's exceptions.
type springBody struct {
	Timestamp int64  `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Exception string `json:"exception"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

// TestLeafAPIErrors: errors answer as Leaf does, 500 with Spring Boot's
// JSON naming Leaf's exception and its Result code.
func TestLeafAPIErrors(t *testing.T) {
	e := start(t, setup{seg: func(o *segment.Options) {
		o.AutoCreate = false
		o.DefaultStep = 10
		o.PrefetchAt = 1
	}})
	ctx := context.Background()
	if _, err := e.Store.Create(ctx, "known", 10, ""); err != nil {
		t.Fatal(err)
	}
	if got := leafID(t, e.URL, "known"); got != 1 {
		t.Fatalf("first ID %d", got)
	}
	for _, tc := range []struct {
		name, path string
		prepare    func(t *testing.T)
		code       string
		reason     string // in X-Leaf-Error
	}{
		{"key not exists", "/api/segment/get/nosuch", nil, "-2", "unknown tag"},
		{"invalid key", "/api/segment/get/" + strings.Repeat("x", segment.MaxTagLen+1), nil, "-2", "invalid tag name"},
		{"stored name of database 1", "/api/segment/get/%1F1%1Fknown", func(t *testing.T) {
			if _, err := e.Store.Create(ctx, "\x1f1\x1fknown", 10, ""); err != nil {
				t.Fatal(err)
			}
		}, "-2", "invalid tag name"},
		{"two segments null", "/api/segment/get/known", func(t *testing.T) {
			for range 8 {
				leafID(t, e.URL, "known")
			}
			// Down before the last ID, whose issue starts the prefetch.
			e.storeDown(true)
			if got := leafID(t, e.URL, "known"); got != 10 {
				t.Fatalf("last cached ID %d, want 10", got)
			}
		}, "-3", "database is unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare(t)
			}
			r := get(t, e.URL+tc.path)
			if r.status != http.StatusInternalServerError {
				t.Fatalf("status %d %q, want 500", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json;charset=UTF-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			var b springBody
			if err := json.Unmarshal([]byte(r.body), &b); err != nil {
				t.Fatalf("body %q: %v", r.body, err)
			}
			want := springBody{
				Timestamp: b.Timestamp,
				Status:    500,
				Error:     "Internal Server Error",
				Exception: "com.sankuai.inf.leaf.server.exception.LeafServerException",
				Message:   "Result{id=" + tc.code + ", status=EXCEPTION}",
				Path:      tc.path,
			}
			if b != want || b.Timestamp <= 0 {
				t.Fatalf("body\n got %+v\nwant %+v", b, want)
			}
			if !strings.HasPrefix(r.body, `{"timestamp":`) {
				t.Fatalf("fields not in Spring's order: %s", r.body)
			}
			if h := r.header.Get("X-Leaf-Error"); !strings.Contains(h, tc.reason) {
				t.Fatalf("X-Leaf-Error %q, want it to say %q", h, tc.reason)
			}
		})
	}
}

func TestLeafAPINotFound(t *testing.T) {
	e := start(t, setup{})
	for _, tc := range []struct{ path, body string }{
		{"/api/snowflake/get/order", "makes no Snowflake IDs"}, // without a generator
		{"/api/snowflake/get", "404 page not found"},
		{"/api/snowflake/get/", "404 page not found"},
		{"/api/segment/get/", "404 page not found"},
		{"/api/segment/get/a/b", "404 page not found"},
		{"/nosuch", "404 page not found"},
		{"/debug/pprof/", "404 page not found"}, // pprof is off
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, e.URL+tc.path)
			if r.status != http.StatusNotFound || !strings.Contains(r.body, tc.body) {
				t.Fatalf("%d %q, want 404 and %q", r.status, r.body, tc.body)
			}
		})
	}
}

// TestLeafAPIAndIncrUnique: IDs from the Leaf API and from INCR, taken at
// once on one tag with segments small enough to switch often, never repeat.
func TestLeafAPIAndIncrUnique(t *testing.T) {
	e := start(t, setup{seg: func(o *segment.Options) { o.DefaultStep = 7; o.MaxStep = 7 }})
	const workers, each = 4, 150
	ids := make(chan int64, 2*workers*each)
	var wg sync.WaitGroup
	for w := range 2 * workers {
		wg.Add(1)
		c := e.client(t)
		go func() {
			defer wg.Done()
			for range each {
				if w%2 == 0 {
					id, err := c.Incr(context.Background(), "mix").Result()
					if err != nil {
						t.Errorf("INCR: %v", err)
						return
					}
					ids <- id
					continue
				}
				r, err := http.Get(e.URL + "/api/segment/get/mix")
				if err != nil {
					t.Errorf("GET: %v", err)
					return
				}
				var b strings.Builder
				_, err = copyBody(&b, r)
				if err != nil || r.StatusCode != http.StatusOK {
					t.Errorf("GET: %d %q %v", r.StatusCode, b.String(), err)
					return
				}
				id, err := strconv.ParseInt(b.String(), 10, 64)
				if err != nil {
					t.Errorf("GET: body %q", b.String())
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	idtest.Unique(t, ids, 2*workers*each)
}

// TestCache: Leaf's /cache monitor, as JSON and as Leaf's HTML table.
func TestCache(t *testing.T) {
	e := start(t, setup{seg: func(o *segment.Options) { o.DefaultStep = 10; o.PrefetchAt = 1 }})
	leafID(t, e.URL, "order")
	t.Run("json", func(t *testing.T) {
		r := get(t, e.URL+"/cache")
		var got map[string]map[string]any
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatalf("%d %q: %v", r.status, r.body, err)
		}
		v, ok := got["order"]
		if !ok {
			t.Fatalf("no tag order in %s", r.body)
		}
		// One ID of [1, 11) handed out: value is the next one, as in Leaf,
		// and the first segment is in slot 0.
		want := map[string]any{
			"key": "order", "initOk": true, "nextReady": false, "pos": 0.0,
			"value0": 2.0, "max0": 11.0, "step0": 10.0,
			"value1": 0.0, "max1": 0.0, "step1": 0.0,
		}
		for k, w := range want {
			if v[k] != w {
				t.Errorf("%s = %v, want %v", k, v[k], w)
			}
		}
		if len(v) != len(want) {
			t.Errorf("fields %v, want exactly Leaf's %v", v, want)
		}
	})
	t.Run("html", func(t *testing.T) {
		r := get(t, e.URL+"/cache", "Accept", "text/html,application/xhtml+xml")
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(r.body, `<tr class="tag" data-tag="order"><td>order</td><td>true</td><td>false</td><td>0</td><td>2</td><td>11</td><td>10</td><td>0</td><td>0</td><td>0</td></tr>`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}
