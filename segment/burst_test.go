package segment

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
)

// slowGate holds each Take, once on, until the test lets it go: a database
// whose answers take as long as the test's clock says.
type slowGate struct {
	on      atomic.Bool
	entered chan struct{}
	proceed chan struct{}
	stop    chan struct{} // closed at the test's end: nothing is held
}

func newSlowGate() *slowGate {
	return &slowGate{entered: make(chan struct{}), proceed: make(chan struct{}), stop: make(chan struct{})}
}

func (g *slowGate) fault(ctx context.Context, _ faultstore.Call) error {
	if !g.on.Load() {
		return nil
	}
	select {
	case g.entered <- struct{}{}:
	case <-g.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.proceed:
	case <-g.stop:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// TestBurstOnIdleTagWaitsAtMostOneLoad: a tag idle for an hour (its step
// at the table's, its first segment barely used) meets a burst on a slow
// database. Time is the injected clock: each ID moves it on by the
// burst's interval, and a load answers once the clock has moved by the
// latency since it reached the store; when the segment runs out before
// that, a request waits (the clock jumps to the answer). Leaf's doubling
// alone meets a wait at every load until the step outgrows the latency;
// sizing the step from the rate and the load time (stepPolicy.cover)
// leaves two when the rate is measured since the segment became current
// (the idle hour counts); measured from the segment's probe, half-way to
// its prefetch point, one: the load in flight when the burst was seen.
func TestBurstOnIdleTagWaitsAtMostOneLoad(t *testing.T) {
	for _, tc := range []struct {
		rate    int64 // IDs a second
		latency time.Duration
		burst   int
		ramp    int // IDs at the start at a tenth of the rate, as while clients connect
	}{
		{50_000, 100 * time.Millisecond, 200_000, 0},
		{50_000, 500 * time.Millisecond, 300_000, 0},
		{5_000, time.Second, 50_000, 0},
		{50_000, 100 * time.Millisecond, 200_000, 100},
		{50_000, 500 * time.Millisecond, 300_000, 100},
	} {
		t.Run(fmt.Sprintf("%d/s,%s,ramp%d", tc.rate, tc.latency, tc.ramp), func(t *testing.T) {
			c := newClock()
			o := testOptions(c)
			o.DefaultStep = 1000
			o.MaxStep = 1_000_000
			store := newFakeStore(map[string]int64{"b": 1000})
			g := newSlowGate()
			store.Inject(g.fault, faultstore.OpTake)
			a := newTestAllocator(t, store, o)
			t.Cleanup(func() { close(g.stop) }) // before the allocator closes
			// The first load takes the latency too: the tag knows how
			// long loads take when the burst comes.
			g.on.Store(true)
			type first struct {
				tag *Tag
				id  int64
				err error
			}
			got := make(chan first, 1)
			go func() {
				tag, err := a.Lookup(context.Background(), []byte("b"))
				var id int64
				if err == nil {
					id, err = tag.Next(context.Background())
				}
				got <- first{tag, id, err}
			}()
			<-g.entered
			c.Add(tc.latency)
			g.proceed <- struct{}{}
			f := <-got
			if f.err != nil {
				t.Fatal(f.err)
			}
			tag, last := f.tag, f.id
			waitLoad(t, tag)
			c.Add(time.Hour) // idle

			perID := time.Second / time.Duration(tc.rate)
			var sentAt time.Time // when the held load reached the store; zero: none
			answer := func() {
				g.proceed <- struct{}{}
				waitLoad(t, tag)
				sentAt = time.Time{}
			}
			loading := func() bool {
				tag.mu.Lock()
				defer tag.mu.Unlock()
				return tag.inflight != nil
			}
			waits := 0
			for i := 0; i < tc.burst; {
				// A load queued reaches the store before the clock moves on,
				// so that its plan sees the clock of the ID that queued it.
				if sentAt.IsZero() && loading() {
					<-g.entered
					sentAt = c.Now()
				}
				if !sentAt.IsZero() && !c.Now().Before(sentAt.Add(tc.latency)) {
					answer()
					continue
				}
				if id, ok := tag.TryNextN(1); ok {
					if id <= last {
						t.Fatalf("ID %d after %d", id, last)
					}
					last = id
					i++
					if i <= tc.ramp {
						c.Add(10 * perID)
					} else {
						c.Add(perID)
					}
					continue
				}
				if sentAt.IsZero() {
					t.Fatalf("after %d IDs the segment ran out with no load in flight", i)
				}
				waits++ // the request waits for the load's answer
				c.Add(sentAt.Add(tc.latency).Sub(c.Now()))
				answer()
			}
			var sizes []int64
			for _, r := range store.Taken() {
				sizes = append(sizes, r.Size())
			}
			if waits > 1 {
				t.Fatalf("the burst waited for %d loads, want at most 1; segments taken: %v", waits, sizes)
			}
			t.Logf("%d waits; segments taken: %v", waits, sizes)
		})
	}
}

// TestStepCover: the step that lasts loadMargin load times after the
// prefetch point, at the rate measured, capped at max_step; and the step
// doubled up to it in one jump.
func TestStepCover(t *testing.T) {
	p := stepPolicy{segmentDuration: 15 * time.Minute, maxStep: 1_000_000}
	for _, tc := range []struct {
		used          int64
		elapsed, load time.Duration
		want          int64
	}{
		{0, time.Second, time.Second, 0},                            // nothing used yet
		{100, 0, time.Second, 0},                                    // no time passed
		{100, time.Second, 0, 0},                                    // no load measured
		{100, 2 * time.Millisecond, 100 * time.Millisecond, 11_112}, // 50k/s: 5,000 IDs a load, twice, over 0.9
		{900, time.Minute, 10 * time.Millisecond, 1},                // a quiet tag needs little
		{1_000_000, time.Millisecond, time.Second, 1_000_000},       // capped
	} {
		if got := p.cover(tc.used, int64(tc.elapsed), int64(tc.load), 0.1); got != tc.want {
			t.Errorf("cover(%d IDs in %s, load %s) = %d, want %d", tc.used, tc.elapsed, tc.load, got, tc.want)
		}
	}
	for _, tc := range []struct{ step, need, want int64 }{
		{1000, 0, 1000},
		{1000, 1000, 1000},
		{1000, 11_112, 16_000},
		{1000, 600_000, 1_000_000}, // 512,000 doubled passes max_step: max_step
		{1000, 1_000_000, 1_000_000},
		{3000, 5000, 6000},
		{600_000, 700_000, 1_000_000},
		{2_000_000, 3_000_000, 2_000_000}, // a table's step above max_step stays
	} {
		if got := p.climb(tc.step, tc.need); got != tc.want {
			t.Errorf("climb(%d, %d) = %d, want %d", tc.step, tc.need, got, tc.want)
		}
	}
}
