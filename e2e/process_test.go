package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
)

// TestRestart: a clean stop gives the unused IDs back, so a restart continues
// at exactly the next ID; after kill -9 the next ID is still higher than
// every ID handed out.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startLeaf(t, dir)
	c := p.client(t)
	var v int64
	for range 25 {
		v = redistest.Incr(t, c, "order")
	}
	if _, err := c.IncrBy(context.Background(), "order", 10).Result(); err != nil {
		t.Fatal(err)
	}
	v += 10
	p.Stop(syscall.SIGTERM)

	p = startLeaf(t, dir)
	c = p.client(t)
	if got := redistest.Incr(t, c, "order"); got != v+1 {
		t.Fatalf("after SIGTERM and restart INCR = %d, want %d (no gap)", got, v+1)
	}
	last := v + 1
	for range 3000 { // past the prefetch: two segments are cached
		last = redistest.Incr(t, c, "order")
	}
	p.Stop(syscall.SIGKILL)

	p = startLeaf(t, dir)
	c = p.client(t)
	if got := redistest.Incr(t, c, "order"); got <= last {
		t.Fatalf("after kill -9 and restart INCR = %d, want > %d", got, last)
	}
	p.Stop(syscall.SIGTERM)
}

// TestTwoProcessesOneSQLiteFile: two servers sharing one SQLite file, small
// segments so they take ranges constantly, 3,000 alternating INCRs: no
// duplicate, and each server's IDs increase.
func TestTwoProcessesOneSQLiteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	// Small segments, loaded by turns at the file's lock: on a busy
	// machine a load may wait longer than the 2 s default load_timeout.
	env := []string{"LEAF_STORE_DSN=" + db, "LEAF_STORE_CREATE_DATABASE=true", "LEAF_SEGMENT_DEFAULT_STEP=10", "LEAF_SEGMENT_MAX_STEP=40",
		"LEAF_SEGMENT_LOAD_TIMEOUT=1m"}
	a := startLeaf(t, dir, env...)
	b := startLeaf(t, dir, env...)
	ca, cb := a.client(t), b.client(t)
	seen := map[int64]string{}
	prev := map[string]int64{}
	for i := range 3000 {
		name, c := "a", ca
		if i%2 == 1 {
			name, c = "b", cb
		}
		id := redistest.Incr(t, c, "shared")
		if other, dup := seen[id]; dup {
			t.Fatalf("ID %d handed out by %s and by %s", id, other, name)
		}
		seen[id] = name
		if id <= prev[name] {
			t.Fatalf("server %s: %d after %d", name, id, prev[name])
		}
		prev[name] = id
	}
	a.Stop(syscall.SIGTERM)
	b.Stop(syscall.SIGTERM)
	if len(seen) != 3000 {
		t.Fatal(fmt.Sprint("ids: ", len(seen)))
	}
}
