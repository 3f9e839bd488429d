package e2e

// Process tests of the HTTP side (httpapi) as leaf wires it: the listener
// on http.addr, the same allocator as the Redis side, a clean SIGTERM.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/leaf-id/leaf/internal/idtest"
	"github.com/leaf-id/leaf/internal/redistest"
)

var servingHTTPRe = regexp.MustCompile(`msg="serving http" addr=(\S+)`)

// httpBase is the base URL of p's HTTP listener. leaf logs it before the
// Redis listener's "serving", so it is in the log once startLeaf returns.
func (p *proc) httpBase(t *testing.T) string {
	t.Helper()
	m := servingHTTPRe.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no \"serving http\" line in the log:\n%s", p.Log())
	}
	return "http://" + m[1]
}

// httpGet answers status and body; it fails the test on a transport error.
func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	code, body, err := tryGet(url)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// tryGet is httpGet for other goroutines than the test's.
func tryGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", url, err)
	}
	return resp.StatusCode, string(b), nil
}

// metricValue is the value of one series in a /metrics body, 0 when absent.
func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", series, v, err)
			}
			return f
		}
	}
	return 0
}

// TestHTTPProcess drives the binary's HTTP side: health, metrics that move
// with traffic, the Leaf API and INCR sharing one tag without a repeat, the
// status page, pprof; then a clean SIGTERM.
func TestHTTPProcess(t *testing.T) {
	t.Parallel()
	p := startLeaf(t, t.TempDir(),
		"LEAF_HTTP_ADDR=127.0.0.1:0",
		"LEAF_HTTP_PPROF=true",
		"LEAF_SEGMENT_DEFAULT_STEP=10",
		"LEAF_SEGMENT_MAX_STEP=10", // small segments: many switches and loads
		// Eight clients wait on those loads, SQLite's synced writes: on
		// a busy machine one may take longer than the 2 s default.
		"LEAF_SEGMENT_LOAD_TIMEOUT=1m",
	)
	base := p.httpBase(t)
	c := p.client(t)

	t.Run("health", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := httpGet(t, base+path); code != http.StatusOK || !strings.HasPrefix(body, "ok") {
				t.Errorf("GET %s = %d %q", path, code, body)
			}
		}
	})

	t.Run("metrics move", func(t *testing.T) {
		redistest.Incr(t, c, "order")
		const series = `leaf_ids_issued_total{tag="order"}`
		_, before := httpGet(t, base+"/metrics")
		for range 100 {
			redistest.Incr(t, c, "order")
		}
		_, after := httpGet(t, base+"/metrics")
		if d := metricValue(t, after, series) - metricValue(t, before, series); d != 100 {
			t.Fatalf("%s moved by %v after 100 INCR, want 100", series, d)
		}
		if v := metricValue(t, after, `leaf_store_latency_seconds_count{result="ok"}`); v < 10 {
			t.Fatalf("store latency histogram counted %v takes, want >= 10 (101 IDs in segments of 10)", v)
		}
	})

	t.Run("leaf api and incr never repeat", func(t *testing.T) {
		const workers, each = 4, 100
		ids := make(chan int64, 2*workers*each+1)
		ids <- redistest.Incr(t, c, "mix") // the API creates no tag (http.auto_create)
		var wg sync.WaitGroup
		for w := range 2 * workers {
			rc := p.client(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if w%2 == 0 {
						id, err := rc.Incr(context.Background(), "mix").Result()
						if err != nil {
							t.Errorf("INCR mix: %v", err)
							return
						}
						ids <- id
						continue
					}
					code, body, err := tryGet(base + "/api/segment/get/mix")
					if err != nil {
						t.Errorf("GET /api/segment/get/mix: %v", err)
						return
					}
					id, err := strconv.ParseInt(body, 10, 64)
					if code != http.StatusOK || err != nil {
						t.Errorf("GET /api/segment/get/mix = %d %q", code, body)
						return
					}
					ids <- id
				}
			}()
		}
		wg.Wait()
		close(ids)
		idtest.Unique(t, ids, 2*workers*each+1)
	})

	t.Run("status page", func(t *testing.T) {
		code, body := httpGet(t, base+"/")
		for _, tag := range []string{"order", "mix"} {
			if code != http.StatusOK || !strings.Contains(body, `<tr class="tag" data-tag="`+tag+`">`) {
				t.Fatalf("GET / = %d without the row of %s:\n%s", code, tag, body)
			}
		}
	})

	t.Run("pprof", func(t *testing.T) {
		if code, body := httpGet(t, base+"/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(body, "leaf") {
			t.Fatalf("GET /debug/pprof/cmdline = %d %q", code, body)
		}
	})

	p.Stop(syscall.SIGTERM)
	if strings.Contains(p.Log(), "http server stopped") || strings.Contains(p.Log(), "http shutdown") {
		t.Fatalf("HTTP server did not shut down cleanly:\n%s", p.Log())
	}
}

// TestHTTPOff: without http.addr there is no HTTP listener.
func TestHTTPOff(t *testing.T) {
	t.Parallel()
	p := startLeaf(t, t.TempDir())
	redistest.Incr(t, p.client(t), "x")
	if strings.Contains(p.Log(), "serving http") {
		t.Fatalf("an HTTP listener without http.addr:\n%s", p.Log())
	}
	p.Stop(syscall.SIGTERM)
}
