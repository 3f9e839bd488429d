package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// TestAmbiguousTakeNeverServed: a Take whose answer is lost took its range
// in the store. The request that waited for it gets TRYAGAIN; the range is
// never served: the next load starts above it, and IDs go on increasing.
// The lost Take and the retries the database made are counted, per tag and
// in total.
func TestAmbiguousTakeNeverServed(t *testing.T) {
	store := newFakeStore(map[string]int64{"t": 10})
	retried := func(_ context.Context, _ faultstore.Call, r persist.Range) (persist.Range, error) {
		r.Retries = 2 // the database ran every Take again twice
		return r, nil
	}
	store.InjectAnswer(retried)
	c := newClock()
	o := awayOptions(c)
	o.MaxStep = 10 // every segment is [n, n+10)
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "t")

	last := mustNext(t, tag)
	waitLoad(t, tag) // [1, 11) and [11, 21) cached
	// The prefetch of [21, 31), started by ID 11, loses its answer, and is
	// held in the store until the request for ID 21 waits for it.
	hold := faultstore.NewHold() // the load's deadline is far beyond the test
	store.Inject(hold.Fault, faultstore.OpTake)
	lose := faultstore.Lose(1, fmt.Errorf("%w: %w: %w", persist.ErrAmbiguous, persist.ErrUnavailable, io.ErrUnexpectedEOF))
	store.InjectAnswer(func(ctx context.Context, c faultstore.Call, r persist.Range) (persist.Range, error) {
		r, _ = retried(ctx, c, r)
		return lose(ctx, c, r)
	})
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
	hold.Release()
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
