package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
)

// TestGroupCommit: the loads queued while the loader is busy (first
// touches of known tags, lookups of new names that create them, a tag
// whose Take fails) run as one store round trip; the failure stays that
// tag's, and every other tag gets its first segment.
func TestGroupCommit(t *testing.T) {
	rows := map[string]int64{"gate": 10, "full": 10}
	for i := range 20 {
		rows[fmt.Sprintf("known%02d", i)] = 10
	}
	store := newFakeStore(rows)
	store.db.SetMaxID("full", math.MaxInt64-5) // a Take of 10 overflows
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		if c.Tag == "gate" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	}, faultstore.OpTake)
	o := testOptions(newClock())
	o.Loaders = 1 // one worker: what queues behind the gate is one group
	a := newTestAllocator(t, store, o)

	a.Prepare([]byte("gate"))
	<-entered
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("known%02d", i), fmt.Sprintf("new%02d", i))
	}
	for _, name := range append(slices.Clone(names), "full") {
		a.Prepare([]byte(name))
	}
	a.Prepare([]byte("bad\x01name")) // not a tag: nothing queued
	if q := a.Stats().QueuedLoads; q != len(names)+1 {
		t.Fatalf("queued loads = %d, want %d", q, len(names)+1)
	}
	close(release)

	for _, name := range names {
		if id, err := a.Next(context.Background(), name); err != nil || id != 1 {
			t.Fatalf("INCR %s = %d, %v; want 1", name, id, err)
		}
	}
	if _, err := a.Next(context.Background(), "full"); !errors.Is(err, ErrOverflow) {
		t.Fatalf("INCR full: err = %v, want ErrOverflow", err)
	}
	// Then the INCRs' prefetches, grouped as they come.
	if got := store.Batches(); len(got) == 0 || got[0] != len(names)+1 {
		t.Fatalf("TakeBatch sizes = %v, want the first of %d", got, len(names)+1)
	}
	if st := a.Stats(); !st.StoreOK || st.LoadFailures == 0 {
		t.Fatalf("stats = %+v: want the store up and the failed loads of full counted", st)
	}
	for i := range 20 {
		if row, err := store.Tag(context.Background(), fmt.Sprintf("new%02d", i)); err != nil || row.Step != o.DefaultStep {
			t.Fatalf("new%02d: row %+v, %v; want created with step %d", i, row, err, o.DefaultStep)
		}
	}
}

// TestGroupCommitUnknownWithoutAutoCreate: without auto-create, Prepare
// starts no lookup (the lookup reads the row, and its mode); the name is
// an unknown tag, the others load.
func TestGroupCommitUnknownWithoutAutoCreate(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10, "b": 10})
	o := testOptions(newClock())
	o.AutoCreate = false
	o.Loaders = 1
	o.PrefetchAt = 1 // the INCRs below start no prefetch, which could be grouped
	a := newTestAllocator(t, store, o)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		if c.Tag == "a" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	}, faultstore.OpTake)
	a.Prepare([]byte("a"))
	<-entered
	a.Prepare([]byte("nope"))
	a.Prepare([]byte("b"))
	close(release)
	if _, err := a.Next(context.Background(), "nope"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("INCR nope: err = %v, want ErrUnknownTag", err)
	}
	for _, name := range []string{"a", "b"} {
		if id, err := a.Next(context.Background(), name); err != nil || id != 1 {
			t.Fatalf("INCR %s = %d, %v; want 1", name, id, err)
		}
	}
	// Without auto-create, Prepare leaves unknown names to the lookup:
	// b's load ran alone, a Take.
	if got := store.Batches(); len(got) != 0 {
		t.Fatalf("TakeBatch sizes = %v, want none", got)
	}
}

// TestGroupCommitNeverRepeats: many clients on many tags with small steps,
// INCR and INCRBY (some larger than a segment: a dedicated range), while
// loads run in small groups: no ID is handed out twice, and each client
// sees its IDs of a tag increase.
func TestGroupCommitNeverRepeats(t *testing.T) {
	const tags, clients, rounds = 24, 8, 300
	rows := map[string]int64{}
	for i := range tags {
		rows[fmt.Sprintf("t%02d", i)] = int64(3 + i%4)
	}
	store := fakeOn(faultstore.NewMemory(rows).WithGuard())
	o := testOptions(nil)
	o.Loaders = 3
	o.MaxLoadBatch = 5
	o.DefaultStep = 4
	a := newTestAllocator(t, store, o)

	var mu sync.Mutex
	seen := map[string]map[int64]bool{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			last := map[string]int64{}
			for r := range rounds {
				name := fmt.Sprintf("t%02d", (c*7+r)%tags)
				if r%11 == 0 {
					name = fmt.Sprintf("n%02d-%d", r%13, c%2) // created on first use
				}
				a.Prepare([]byte(name))
				n := int64(1 + (r % 3))
				if r%17 == 0 {
					n = 9 // beyond a segment: a dedicated range
				}
				id, err := a.NextN(context.Background(), name, n)
				if err != nil {
					t.Errorf("INCRBY %s %d: %v", name, n, err)
					return
				}
				if id <= last[name] {
					t.Errorf("client %d: %s went from %d to %d", c, name, last[name], id)
					return
				}
				last[name] = id
				mu.Lock()
				if seen[name] == nil {
					seen[name] = map[int64]bool{}
				}
				for v := id - n + 1; v <= id; v++ {
					if seen[name][v] {
						t.Errorf("%s: ID %d handed out twice", name, v)
					}
					seen[name][v] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	grouped := false
	for _, n := range store.Batches() {
		if n > o.MaxLoadBatch {
			t.Fatalf("a group of %d loads, more than MaxLoadBatch %d", n, o.MaxLoadBatch)
		}
		grouped = grouped || n > 1
	}
	if !grouped {
		t.Log("no group of more than one load formed this run")
	}
}
