package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// Floors against store answers in flight: a floor applied while a range
// is on its way from the store holds for that range, whichever path
// turns it into IDs. The store's answer is held after its commit (the
// range is taken in the store) until the floor is applied, as when a
// floor set through another server arrives between the two.

// seenIDs fails its test when an ID comes twice.
type seenIDs struct {
	t   *testing.T
	mu  sync.Mutex
	ids map[int64]bool
}

func newSeen(t *testing.T) *seenIDs { return &seenIDs{t: t, ids: map[int64]bool{}} }

// Add records the n IDs ending at last.
func (s *seenIDs) Add(last, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := last - n + 1; id <= last; id++ {
		if s.ids[id] {
			s.t.Errorf("ID %d handed out twice", id)
		}
		s.ids[id] = true
	}
}

// heldAnswer is a Take of the fake store held after its commit.
type heldAnswer struct {
	r       persist.Range
	release chan error // what the Take answers: nil, its range
}

// holdAnswers makes the Takes of store that match wait after their commit
// until released; each one held is sent on the returned channel.
func holdAnswers(t *testing.T, store *fakeStore, match func(tag string, r persist.Range) bool) <-chan heldAnswer {
	t.Helper()
	held := make(chan heldAnswer, 1)
	store.InjectAnswer(func(ctx context.Context, c faultstore.Call, r persist.Range) (persist.Range, error) {
		if !match(c.Tag, r) {
			return r, nil
		}
		h := heldAnswer{r: r, release: make(chan error, 1)}
		held <- h
		select {
		case err := <-h.release:
			return r, err
		case <-ctx.Done():
			return r, ctx.Err()
		}
	})
	t.Cleanup(func() { store.InjectAnswer(nil) })
	return held
}

// floorAt applies a floor set through another server: raised in the store,
// then applied here (SkipTo), as package cluster does when it reads the
// change.
func floorAt(t *testing.T, a *Allocator, store *fakeStore, tag string, n int64) {
	t.Helper()
	if _, _, err := store.RaiseFloor(context.Background(), tag, n); err != nil {
		t.Fatal(err)
	}
	a.SkipTo(tag, n)
}

// TestFloorDuringDedicatedTake: an INCRBY larger than any segment takes a
// dedicated range; a floor applied while that range is on its way, above
// it, holds: the reply is above the floor (a range of its own taken
// again), never the range below it.
func TestFloorDuringDedicatedTake(t *testing.T) {
	store := newFakeStore(map[string]int64{"t": 100})
	a := newTestAllocator(t, store, testOptions(nil))
	tag := mustLookup(t, a, "t")
	ids := newSeen(t)
	ids.Add(mustNext(t, tag), 1)

	const n = 5000 // beyond any segment: a dedicated range
	held := holdAnswers(t, store, func(_ string, r persist.Range) bool { return r.Size() == n })
	type reply struct {
		last int64
		err  error
	}
	got := make(chan reply, 1)
	go func() {
		last, err := tag.NextN(context.Background(), n)
		got <- reply{last, err}
	}()
	h := <-held
	const floor = 1_000_000
	if h.r.End > floor {
		t.Fatalf("dedicated range %v: the test needs it below the floor", h.r)
	}
	floorAt(t, a, store, "t", floor)
	store.InjectAnswer(nil)
	h.release <- nil
	r := <-got
	if r.err != nil {
		t.Fatalf("INCRBY t %d after the floor: %v", n, r.err)
	}
	if first := r.last - n + 1; first <= floor {
		t.Fatalf("INCRBY t %d = %d (IDs from %d) though the floor %d was applied before the store's answer arrived", n, r.last, first, floor)
	}
	ids.Add(r.last, n)
	if id := mustNext(t, tag); id <= r.last {
		t.Fatalf("INCR after the INCRBY = %d, not above %d", id, r.last)
	} else {
		ids.Add(id, 1)
	}
}

// TestFloorDuringFirstLoad: the first load of a new tag that a pipeline
// queued (Prepare: its lookup is its first load, which creates the row)
// is on its way when a floor of that name arrives: the tag is not in the
// map yet, and the floor holds all the same.
func TestFloorDuringFirstLoad(t *testing.T) {
	store := newFakeStore(nil)
	a := newTestAllocator(t, store, testOptions(nil))
	held := holdAnswers(t, store, func(tag string, _ persist.Range) bool { return tag == "fresh" })
	a.Prepare([]byte("fresh"))
	h := <-held
	const floor = 500
	if h.r.Start > floor {
		t.Fatalf("first range %v: the test needs it below the floor", h.r)
	}
	floorAt(t, a, store, "fresh", floor)
	store.InjectAnswer(nil)
	h.release <- nil
	ids := newSeen(t)
	for range 300 { // across segments
		id, err := a.Next(context.Background(), "fresh")
		if err != nil {
			t.Fatalf("INCR fresh after the floor: %v", err)
		}
		if id <= floor {
			t.Fatalf("INCR fresh = %d though the floor %d was applied before the first load's answer arrived", id, floor)
		}
		ids.Add(id, 1)
	}
}

// TestFloorDuringLoadLost: a load whose answer is lost after its commit
// (the range is taken, and never served), then a floor: nothing at or
// below the floor is served after it, and nothing twice.
func TestFloorDuringLoadLost(t *testing.T) {
	store := newFakeStore(map[string]int64{"t": 100})
	a := newTestAllocator(t, store, testOptions(nil))
	tag := mustLookup(t, a, "t")
	ids := newSeen(t)
	lost := errors.New("connection lost after the commit")
	held := holdAnswers(t, store, func(string, persist.Range) bool { return true })
	got := make(chan error, 1)
	go func() {
		id, err := tag.Next(context.Background())
		if err == nil {
			ids.Add(id, 1)
		}
		got <- err
	}()
	h := <-held
	// The store answers another call meanwhile: the lost answer is that
	// load's failure, not an outage.
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	floorAt(t, a, store, "t", 150)
	store.InjectAnswer(nil)
	h.release <- fmt.Errorf("%w: %w", persist.ErrAmbiguous, lost)
	if err := <-got; err == nil {
		t.Fatalf("INCR whose load's answer was lost (%v) succeeded", lost)
	}
	for range 300 {
		id := mustNext(t, tag)
		if id <= 150 {
			t.Fatalf("INCR = %d after the floor 150", id)
		}
		ids.Add(id, 1)
	}
}
