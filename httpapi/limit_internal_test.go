package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
)

// TestRenderLimit: with every render slot taken, a page or a scrape
// answers 503 (after slotWait) rather than adding its copy of the tags;
// the probes do not wait on the slots; a slot freed lets a waiting page
// through.
func TestRenderLimit(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "leaf.db"), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := New(segment.New(db, segment.DefaultOptions()), Options{MaxRenders: 2}).(*handler)
	h.g.slotWait = time.Millisecond // the test waits for no real slotWait
	h.g.renders <- struct{}{}
	h.g.renders <- struct{}{}
	for _, path := range []string{"/", "/cache", "/metrics"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
			t.Errorf("GET %s with every slot taken = %d, want 503 and Retry-After", path, w.Code)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK {
		t.Errorf("GET /healthz = %d", w.Code)
	}
	// A page waiting for a slot gets one when a render ends.
	h.g.slotWait = time.Hour
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		done <- w.Code
	}()
	<-h.g.renders
	if code := <-done; code == http.StatusServiceUnavailable {
		t.Errorf("a page waiting for a freed slot: %d", code)
	}
}

// TestCmdlineRedacted: pprof's cmdline shows the command line it was
// given (main gives it with the passwords replaced: config.RedactArgs),
// never the process's own, which holds them.
func TestCmdlineRedacted(t *testing.T) {
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	os.Args = []string{"leaf", "--server.password=pw-Zt90"}
	h := New(nil, Options{PProf: true, Cmdline: []string{"leaf", "--server.password=REDACTED", "--server.addr=:6380"}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/debug/pprof/cmdline", nil))
	got := w.Body.String()
	if w.Code != http.StatusOK || strings.Contains(got, "pw-Zt90") ||
		got != "leaf\x00--server.password=REDACTED\x00--server.addr=:6380" {
		t.Fatalf("cmdline = %d %q", w.Code, got)
	}
}
