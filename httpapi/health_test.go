package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

func TestHealthz(t *testing.T) {
	e := start(t, setup{})
	for _, down := range []bool{false, true} {
		e.storeDown(down)
		r := get(t, e.URL+"/healthz")
		if r.status != http.StatusOK || r.body != "ok\n" {
			t.Fatalf("store down %v: GET /healthz = %d %q, want 200 \"ok\\n\"", down, r.status, r.body)
		}
	}
}

// TestReadyzFlips: ready while the store answers; partially ready (still
// 200) when it is away but IDs are cached; 503 with the reason once a tag
// in use runs dry; ready again once a probe finds the store back.
func TestReadyzFlips(t *testing.T) {
	probes := &servertest.Probes{}
	e := start(t, setup{seg: func(o *segment.Options) {
		o.DefaultStep = 10
		// Prefetch only when the last ID goes: no load runs in the
		// background until the test spends the segment.
		o.PrefetchAt = 1
		o.AfterFunc = probes.AfterFunc
	}})
	c := e.client(t)
	ctx := context.Background()
	readyz := func(t *testing.T, status int, reason string) {
		t.Helper()
		r := get(t, e.URL+"/readyz")
		if r.status != status || !strings.Contains(r.body, reason) {
			t.Fatalf("GET /readyz = %d %q, want %d and %q", r.status, r.body, status, reason)
		}
	}

	if got := redistest.Incr(t, c, "r"); got != 1 {
		t.Fatalf("first ID %d, want 1", got)
	}
	t.Run("store up", func(t *testing.T) { readyz(t, http.StatusOK, "ok") })

	e.storeDown(true)
	if err := e.Alloc.Sync(ctx); err == nil {
		t.Fatal("Sync with the store down: no error")
	}
	t.Run("store down, IDs cached", func(t *testing.T) {
		readyz(t, http.StatusOK, "partially ready: database away since ")
		readyz(t, http.StatusOK, "(0 probes); serving 9 cached IDs")
		// Open to anyone: no database error (it may name its address).
		if r := get(t, e.URL+"/readyz"); strings.Contains(r.body, "the test took the database away") {
			t.Fatalf("/readyz quotes the database's error: %q", r.body)
		}
	})

	for want := int64(2); want <= 10; want++ {
		if got := redistest.Incr(t, c, "r"); got != want {
			t.Fatalf("ID %d, want %d", got, want)
		}
	}
	t.Run("store down, runway spent", func(t *testing.T) {
		readyz(t, http.StatusServiceUnavailable, `not ready: database away since`)
		readyz(t, http.StatusServiceUnavailable, "1 tag(s) have no cached IDs left\n") // named on the status page only
		if err := c.Incr(ctx, "r").Err(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			t.Fatalf("INCR r with no runway and no store: %v, want TRYAGAIN", err)
		}
		m := metrics(t, e.URL)
		for series, want := range map[string]float64{
			"leaf_store_up": 0, "leaf_store_outages_total": 1, "leaf_store_refused_total": 1, "leaf_store_probes_total": 0,
		} {
			if m[series] != want {
				t.Errorf("%s = %v while away, want %v", series, m[series], want)
			}
		}
		if m["leaf_store_away_since_seconds"] <= 0 {
			t.Errorf("leaf_store_away_since_seconds = %v while away, want a unix time", m["leaf_store_away_since_seconds"])
		}
	})

	e.storeDown(false)
	probes.Run(t) // finds the store back and loads r
	if err := c.Incr(ctx, "r").Err(); err != nil {
		t.Fatalf("INCR r with the store back: %v", err)
	}
	t.Run("store back", func(t *testing.T) {
		readyz(t, http.StatusOK, "ok")
		m := metrics(t, e.URL)
		if m["leaf_store_up"] != 1 || m["leaf_store_away_since_seconds"] != 0 || m["leaf_store_probes_total"] != 1 {
			t.Errorf("up %v, away since %v, probes %v once back; want 1, 0, 1",
				m["leaf_store_up"], m["leaf_store_away_since_seconds"], m["leaf_store_probes_total"])
		}
	})
}

// TestReadyzNothingCached: a store away before any ID was cached leaves
// nothing to serve.
func TestReadyzNothingCached(t *testing.T) {
	e := start(t, setup{})
	e.storeDown(true)
	if err := e.Alloc.Sync(context.Background()); err == nil {
		t.Fatal("Sync with the store down: no error")
	}
	r := get(t, e.URL+"/readyz")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "no IDs are cached") {
		t.Fatalf("GET /readyz = %d %q, want 503 and \"no IDs are cached\"", r.status, r.body)
	}
}
