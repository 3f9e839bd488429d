package segment

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// hungGiveBack is a store whose GiveBack never answers, as a hung (SIGSTOPped)
// database: it returns only when its context ends.
type hungGiveBack struct{ *fakeStore }

func (s hungGiveBack) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	<-ctx.Done()
	return false, fmt.Errorf("%w: %w", persist.ErrUnavailable, ctx.Err())
}

// TestCloseOnHungDatabase: the give-back of Close is bounded by
// load_timeout, like every database call of the allocator, so a hung
// database cannot hold a shutdown for the caller's whole deadline (here:
// none). Close reports the failure; the IDs stay a gap, never a repeat.
func TestCloseOnHungDatabase(t *testing.T) {
	store := hungGiveBack{newFakeStore(map[string]int64{"a": 10, "b": 10})}
	o := testOptions(newClock())
	// Long enough for the loads before Close on a busy machine; the hung
	// give-backs each end at it.
	o.LoadTimeout = 2 * time.Second
	a := New(store, o)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		tag := mustLookup(t, a, name)
		for range 3 {
			mustNext(t, tag)
		}
		waitLoad(t, tag) // the prefetched next segment: two give-backs due
	}
	before := map[string]int64{"a": store.maxID("a"), "b": store.maxID("b")}
	done := make(chan error, 1)
	go func() { done <- a.Close(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, persist.ErrUnavailable) {
			t.Fatalf("Close on a hung database: err = %v, want ErrUnavailable", err)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Close still waits on a hung database after a minute")
	}
	for _, name := range []string{"a", "b"} {
		if got := store.maxID(name); got != before[name] {
			t.Errorf("max_id of %s = %d, want %d: nothing given back", name, got, before[name])
		}
	}
}
