package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/persist"
)

// lossyStore takes ranges in the fakeStore it wraps and, on cue, loses the
// answer of one (ErrAmbiguous): the range is taken in the store, as when
// the connection breaks once COMMIT was sent. Every range it answers says
// the database ran its Take again retries times.
type lossyStore struct {
	*fakeStore
	mu      sync.Mutex
	lose    int // Takes whose answer to lose
	retries int
}

func (s *lossyStore) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	r, err := s.fakeStore.Take(ctx, tag, size)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lose > 0 {
		s.lose--
		return persist.Range{}, fmt.Errorf("take %q: %w: %w: %w", tag, persist.ErrAmbiguous, persist.ErrUnavailable, io.ErrUnexpectedEOF)
	}
	r.Retries = s.retries
	return r, err
}

// TakeBatch takes each request through Take.
func (s *lossyStore) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	return persist.TakeEach(ctx, reqs, s.Take, s.Create)
}

// TestAmbiguousTakeNeverServed: a Take whose answer is lost took its range
// in the store. The request that waited for it gets TRYAGAIN; the range is
// never served: the next load starts above it, and IDs go on increasing.
// The lost Take and the retries the database made are counted, per tag and
// in total.
func TestAmbiguousTakeNeverServed(t *testing.T) {
	store := &lossyStore{fakeStore: newFakeStore(map[string]int64{"t": 10}), retries: 2}
	c := newClock()
	o := awayOptions(c)
	o.MaxStep = 10 // every segment is [n, n+10)
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "t")

	last := mustNext(t, tag)
	waitLoad(t, tag) // [1, 11) and [11, 21) cached
	// The prefetch of [21, 31), started by ID 11, loses its answer, and is
	// held in the store until the request for ID 21 waits for it.
	release := make(chan struct{})
	store.setHook(func(context.Context, string, int64) error {
		<-release // the load's deadline is far beyond the test
		return nil
	})
	store.mu.Lock()
	store.lose = 1
	store.mu.Unlock()
	for range 19 {
		last = mustNext(t, tag)
	}
	if last != 20 {
		t.Fatalf("last cached ID = %d, want 20", last)
	}
	waits := a.Stats().Waits
	errc := make(chan error, 1)
	go func() {
		_, err := tag.Next(context.Background())
		errc <- err
	}()
	for a.Stats().Waits == waits { // counted once it holds the load it waits for
		runtime.Gosched()
	}
	store.setHook(nil)
	close(release)
	if err := <-errc; !errors.Is(err, ErrUnavailable) || !errors.Is(err, persist.ErrAmbiguous) {
		t.Fatalf("INCR when the load's answer is lost: err = %v, want ErrUnavailable with persist.ErrAmbiguous", err)
	}
	if row, _ := store.Tag(context.Background(), "t"); row.MaxID != 31 {
		t.Fatalf("max_id = %d after the lost Take, want 31: [21, 31) was taken", row.MaxID)
	}

	c.waitTimer()
	c.Add(o.RetryBackoff) // the probe loads the tag: [31, 41)
	waitLoad(t, tag)
	if got := mustNext(t, tag); got != 31 {
		t.Fatalf("first ID after the lost Take = %d, want 31: [21, 31) must never be served", got)
	}
	waitLoad(t, tag)

	in := tag.Info()
	st := a.Stats()
	if in.Ambiguous != 1 || st.Ambiguous != 1 {
		t.Errorf("ambiguous: tag %d, total %d; want 1, 1", in.Ambiguous, st.Ambiguous)
	}
	if in.Retries != 2*in.Loads || st.Retries != in.Retries || in.Loads < 3 {
		t.Errorf("retries: tag %d, total %d after %d loads; want 2 per load", in.Retries, st.Retries, in.Loads)
	}
}
