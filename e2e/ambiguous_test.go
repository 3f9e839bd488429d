package e2e

// A commit whose answer is lost, under a running server: the database took
// the range, the server cannot know it. It must never serve that range.

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// TestAmbiguousCommit: leaf on PostgreSQL through a proxy that, once armed,
// breaks the connection of the next transaction that commits, after the
// server committed it: the prefetch of the third segment takes [201, 301)
// in the database and leaf never hears of it. leaf serves its two cached
// segments, counts the lost commit (LEAF.INFO ambiguous, INFO
// store_ambiguous), and once the database answers again goes on above the
// lost range: no ID of it is ever served.
func TestAmbiguousCommit(t *testing.T) {
	t.Parallel()
	const tag = "lost"
	st := postgresStore(t)
	dsn := strings.TrimPrefix(st.env[1], "LEAF_STORE_DSN=")
	proxy := postgrestest.NewProxy(t, postgrestest.Addr(t, dsn))
	p := startLeaf(t, t.TempDir(), "LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN="+postgrestest.WithAddr(t, dsn, proxy.Addr()),
		"LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100", "LEAF_SEGMENT_MAX_RETRY_BACKOFF=1s", "LEAF_LOG_LEVEL=info")
	c := patientClient(t, p)

	var served []int64
	for range 20 { // past the prefetch point (10%)
		served = append(served, redistest.Incr(t, c, tag))
	}
	nextReady(t, c, tag) // [1, 101) and [101, 201) cached
	proxy.Arm(postgrestest.AfterCommit)
	for range 180 { // through the second segment: its prefetch is cut
		served = append(served, redistest.Incr(t, c, tag))
	}
	select {
	case <-proxy.Cuts():
	case <-time.After(time.Minute):
		t.Fatal("the proxy cut no commit")
	}
	// At least: the probe may already have loaded the next range.
	if got := maxIDOf(t, st.db, st.rebind, tag); got < 301 {
		t.Fatalf("max_id = %d after the lost commit, want >= 301: [201, 301) was taken", got)
	}
	waitInfo(t, c, tag, "ambiguous 1", func(f map[string]any) bool { return f["ambiguous"] == int64(1) })

	id, retried := incrAfterRecovery(t, c, tag)
	if len(retried) > 0 {
		t.Logf("TRYAGAIN before the first ID after the lost commit: %q", retried)
	}
	served = append(served, id)
	for range 150 {
		served = append(served, redistest.Incr(t, c, tag))
	}
	for i, id := range served {
		if id >= 201 && id < 301 {
			t.Fatalf("served %d, inside the range whose commit was lost", id)
		}
		if i > 0 && id <= served[i-1] {
			t.Fatalf("INCR = %d after %d", id, served[i-1])
		}
	}
	if first := served[200]; first != 301 {
		t.Errorf("first ID after the lost commit = %d, want 301", first)
	}
	if v := infoField(t, c, "leaf", "store_ambiguous"); v != "1" {
		t.Errorf("INFO store_ambiguous = %q, want 1", v)
	}
	p.Stop(syscall.SIGTERM)
	if !strings.Contains(p.Log(), "may or may not have taken a range") {
		t.Errorf("the lost commit was not logged:\n%s", p.Log())
	}
	t.Logf("served %d IDs, %d..%d, none in [201, 301)", len(served), served[0], served[len(served)-1])
}
