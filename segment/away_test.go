package segment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// awayOptions are testOptions with the probes on the manual clock c: no
// probe runs until the test moves c.
func awayOptions(c *clock) Options {
	o := testOptions(c)
	o.AfterFunc = c.AfterFunc
	o.RetryBackoff = 100 * time.Millisecond
	o.MaxRetryBackoff = time.Second
	return o
}

// wantAway checks that err is an immediate refusal: ErrStoreAway, which
// TRYAGAIN reports, wrapping ErrUnavailable.
func wantAway(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrStoreAway) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%s while the store is away: err = %v, want ErrStoreAway and ErrUnavailable", what, err)
	}
}

// TestStoreHangsOneWaitThenAtOnce: the store hangs. The first request that
// needs it waits for its load, which its deadline ends; from then on the
// store is away and requests of other tags, lookups of unknown tags and
// dedicated INCRBY ranges are answered at once: no store call, no wait.
func TestStoreHangsOneWaitThenAtOnce(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10, "b": 10, "c": 10, "d": 10, "e": 10})
	c := newClock()
	o := awayOptions(c)
	o.LoadTimeout = 100 * time.Millisecond
	a := newTestAllocator(t, store, o)
	store.Inject(faultstore.Hang) // only a call's deadline ends it
	defer store.Inject(nil)

	first := mustLookup(t, a, "a")
	_, err := first.Next(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first request on a hung store: err = %v, want ErrUnavailable after its wait", err)
	}
	c.waitTimer() // the load ended at its deadline: the store is away, a probe is due
	st := a.Stats()
	if st.StoreOK || st.Outages != 1 || !st.AwaySince.Equal(c.Now()) || st.Waits != 1 || st.Refused != 0 || st.StoreError == "" {
		t.Fatalf("stats after the failed load = %+v, want away since the clock's now, 1 outage, 1 wait, none refused", st)
	}

	calls := store.Calls()
	for _, name := range []string{"b", "c", "d", "e"} {
		_, err := mustLookup(t, a, name).Next(context.Background())
		wantAway(t, "INCR "+name, err)
	}
	_, err = a.Next(context.Background(), "unknown")
	wantAway(t, "INCR of an unknown tag", err)
	_, err = a.NextN(context.Background(), "b", 5000)
	wantAway(t, "INCRBY larger than a segment", err)
	if got := store.Calls(); got != calls {
		t.Fatalf("store calls while away = %d, want none: requests must not wait on a store that is away", got-calls)
	}
	st = a.Stats()
	if st.Waits != 1 || st.Refused != 6 || st.Probes != 0 {
		t.Fatalf("waits %d, refused %d, probes %d; want 1, 6, 0", st.Waits, st.Refused, st.Probes)
	}
	if got := c.pending(); !slices.Equal(got, []time.Duration{o.RetryBackoff}) {
		t.Fatalf("pending timers %v, want one probe after %v", got, o.RetryBackoff)
	}
}

// TestWaitersReleasedWhenStoreGoesAway: requests waiting on loads of their
// own tags are answered as soon as another load fails, not at their own
// deadlines: their loads are still hanging when they get their answer.
func TestWaitersReleasedWhenStoreGoesAway(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10, "b": 10, "c": 10, "d": 10})
	o := awayOptions(newClock())
	o.LoadTimeout = time.Hour // only the test ends the hanging loads
	o.MaxLoadBatch = 1        // a load each: each hangs on its own
	a := newTestAllocator(t, store, o)
	entered := make(chan string, 4)
	failA := make(chan struct{})
	release := make(chan struct{})
	var returned atomic.Int32 // hanging loads of b, c, d that returned
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		entered <- c.Tag
		if c.Tag == "a" {
			<-failA
			return fmt.Errorf("%w: connection reset", persist.ErrUnavailable)
		}
		defer returned.Add(1)
		<-release
		return fmt.Errorf("%w: %w", persist.ErrUnavailable, context.DeadlineExceeded)
	}, faultstore.OpTake)
	defer close(release)

	errs := make(chan error, 3)
	for _, name := range []string{"b", "c", "d"} {
		go func() {
			_, err := a.Next(context.Background(), name)
			errs <- err
		}()
	}
	for range 3 {
		<-entered // b, c and d wait on their loads, which hang
	}
	aErr := make(chan error, 1)
	go func() {
		_, err := a.Next(context.Background(), "a")
		aErr <- err
	}()
	<-entered
	close(failA)
	if err := <-aErr; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("INCR a: err = %v, want ErrUnavailable", err)
	}
	for range 3 {
		wantAway(t, "a request waiting on its load", <-errs)
	}
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d of the hanging loads had returned: the waiters were not released by the store going away", n)
	}
}

// TestProbeBackoff: while the store is away one probe at a time tests it,
// RetryBackoff after the failure, then at intervals doubling up to
// MaxRetryBackoff, each one store call (the load of the tag that failed).
// The first probe that gets an answer ends the episode: the tag is loaded
// and no further probe is scheduled.
func TestProbeBackoff(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	c := newClock()
	o := awayOptions(c)
	a := newTestAllocator(t, store, o)
	store.Fail(unavailable("connection refused"))
	tag := mustLookup(t, a, "a")
	if _, err := tag.Next(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	c.waitTimer()

	var delays []time.Duration
	for range 6 {
		p := c.pending()
		if len(p) != 1 {
			t.Fatalf("pending timers %v, want exactly one probe", p)
		}
		delays = append(delays, p[0])
		calls := store.Calls()
		c.Add(p[0])
		if got := store.Calls() - calls; got != 1 {
			t.Fatalf("a probe made %d store calls, want 1", got)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !slices.Equal(delays, want) {
		t.Fatalf("probe delays %v, want %v", delays, want)
	}
	if st := a.Stats(); st.StoreOK || st.Probes != 6 || st.Outages != 1 {
		t.Fatalf("stats = %+v, want still away after 6 probes, one outage", st)
	}

	store.Fail(nil)
	c.Add(c.pending()[0])
	st := a.Stats()
	if !st.StoreOK || !st.AwaySince.IsZero() || st.Probes != 7 || st.Outages != 1 {
		t.Fatalf("stats after the store came back = %+v, want up, 7 probes, one outage", st)
	}
	if p := c.pending(); len(p) != 0 {
		t.Fatalf("timers %v still pending with the store up", p)
	}
	if !tag.Info().NextReady {
		t.Fatal("the probe's load did not leave the tag a segment")
	}
	if id := mustNext(t, tag); id != 1 {
		t.Fatalf("first ID after the outage = %d, want 1", id)
	}
}

// TestAwayServesCachedThenRecovers: a tag with cached IDs serves all of
// them while the store is away, in order and without a store call (its
// prefetch is put off), then refuses. The tags refused meanwhile, and the
// one whose prefetch was put off, are loaded once a probe finds the store
// back; their IDs continue where they stopped.
func TestAwayServesCachedThenRecovers(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10, "b": 10, "c": 10})
	c := newClock()
	o := awayOptions(c)
	a := newTestAllocator(t, store, o)
	cached := mustLookup(t, a, "a")
	last := mustNext(t, cached)
	waitLoad(t, cached) // both segments cached
	runway := cached.Info().RunwayIDs

	store.Fail(unavailable("disk I/O error"))
	b, cc := mustLookup(t, a, "b"), mustLookup(t, a, "c")
	if _, err := b.Next(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("INCR b: err = %v, want ErrUnavailable", err)
	}
	c.waitTimer()
	calls := store.Calls()
	_, err := cc.Next(context.Background())
	wantAway(t, "INCR c", err)
	for range runway {
		id := mustNext(t, cached)
		if id <= last {
			t.Fatalf("cached ID = %d after %d", id, last)
		}
		last = id
	}
	waitLoad(t, cached) // the prefetch of the second segment, put off
	_, err = cached.Next(context.Background())
	wantAway(t, "INCR a with its cache spent", err)
	if got := store.Calls(); got != calls {
		t.Fatalf("%d store calls while away and no probe ran", got-calls)
	}

	store.Fail(nil)
	c.Add(o.RetryBackoff) // the probe loads one of them; the others follow
	for _, tag := range []*Tag{cached, b, cc} {
		waitLoad(t, tag)
		if !tag.Info().NextReady {
			t.Fatalf("tag %s has no segment once the store is back", tag.name)
		}
	}
	for _, tc := range []struct {
		tag  *Tag
		want int64
	}{{cached, last + 1}, {b, 1}, {cc, 1}} {
		if got := mustNext(t, tc.tag); got != tc.want {
			t.Fatalf("INCR %s after the outage = %d, want %d", tc.tag.name, got, tc.want)
		}
	}
	if st := a.Stats(); !st.StoreOK || st.Probes != 1 {
		t.Fatalf("stats = %+v, want up after one probe", st)
	}
}

// TestProbeWithoutParkedTag: with no tag waiting for a load, the probe
// resolves the unknown tag refused while away (creating it), or else reads
// the tag list; either answer ends the episode.
func TestProbeWithoutParkedTag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused string // a lookup refused while away; "" for none
	}{
		{"RefusedLookup", "fresh"},
		{"TagList", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": 10})
			c := newClock()
			a := newTestAllocator(t, store, awayOptions(c))
			store.Fail(unavailable("connection refused"))
			if err := a.Sync(context.Background()); err == nil {
				t.Fatal("sync on a store that is down succeeded")
			}
			if tc.refused != "" {
				_, err := a.Next(context.Background(), tc.refused)
				wantAway(t, "INCR of a new tag", err)
			}
			store.Fail(nil)
			c.Add(c.pending()[0])
			if st := a.Stats(); !st.StoreOK || st.Probes != 1 {
				t.Fatalf("stats = %+v, want up after one probe", st)
			}
			if tc.refused != "" {
				if _, err := a.Info(tc.refused); err != nil {
					t.Fatalf("the probe did not resolve %q: %v", tc.refused, err)
				}
			}
		})
	}
}

// TestTagErrorsKeepStoreUp: answers about one tag, and a caller giving up,
// say nothing of the store: it stays up and later requests go to it.
func TestTagErrorsKeepStoreUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run makes the request; it returns the error it got.
		run  func(t *testing.T, a *Allocator, store *fakeStore) error
		want error
	}{
		{"UnknownTagAutoCreateOff", func(t *testing.T, a *Allocator, _ *fakeStore) error {
			_, err := a.Next(context.Background(), "nope")
			return err
		}, ErrUnknownTag},
		{"BadTag", func(t *testing.T, a *Allocator, _ *fakeStore) error {
			_, err := a.Next(context.Background(), "")
			return err
		}, ErrBadTag},
		{"RowDeleted", func(t *testing.T, a *Allocator, store *fakeStore) error {
			store.db.Delete("a")
			return drain(t, a)
		}, ErrTagGone},
		{"GuardTrip", func(t *testing.T, a *Allocator, store *fakeStore) error {
			// IDs reserved far above the step, so that every load from
			// the lowered row is refused, however many run.
			tag := mustLookup(t, a, "a")
			mustNextN(t, tag, 5000)
			waitLoad(t, tag)
			store.db.SetMaxID("a", 1)
			return drain(t, a)
		}, ErrGuard},
		{"Overflow", func(t *testing.T, a *Allocator, store *fakeStore) error {
			store.db.SetMaxID("a", math.MaxInt64-5)
			return drain(t, a)
		}, ErrOverflow},
		{"CallerGaveUp", func(t *testing.T, a *Allocator, store *fakeStore) error {
			ctx, cancel := context.WithCancel(context.Background())
			store.Inject(func(hctx context.Context, _ faultstore.Call) error {
				cancel() // the client goes away during the call
				<-hctx.Done()
				return fmt.Errorf("%w: %w", persist.ErrUnavailable, hctx.Err())
			}, faultstore.OpTake)
			defer store.Inject(nil)
			_, err := a.NextN(ctx, "a", 500) // a dedicated range, on the caller's context
			return err
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": 10})
			o := awayOptions(newClock())
			o.AutoCreate = false
			o.PrefetchAt = 1
			a := newTestAllocator(t, store, o)
			mustNext(t, mustLookup(t, a, "a"))
			if err := tc.run(t, a, store); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if st := a.Stats(); !st.StoreOK || st.Outages != 0 {
				t.Fatalf("stats = %+v: a tag's error marked the store away", st)
			}
		})
	}
}

// drain takes tag a's IDs until a request fails, and returns that error.
func drain(t *testing.T, a *Allocator) error {
	t.Helper()
	tag := mustLookup(t, a, "a")
	for range 100 {
		if _, err := tag.Next(context.Background()); err != nil {
			return err
		}
	}
	t.Fatal("100 IDs of a tag whose row broke")
	return nil
}

// TestNoDuplicatesAcrossOutages: two allocators share a store that keeps
// failing, hanging and losing replies, so the store goes away and comes
// back many times while 16 clients take IDs and ranges from four tags and
// retry what is refused. No ID is handed out twice, and each client's IDs
// of a tag on one allocator increase.
func TestNoDuplicatesAcrossOutages(t *testing.T) {
	tags := []string{"a", "b", "c", "d"}
	store := newFakeStore(map[string]int64{"a": 10, "b": 10, "c": 10, "d": 10})
	// Some Takes fail, hang or lose their answer, chosen by a seeded
	// generator: a lost answer is a range the database took but the
	// allocator never learnt of.
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	roll := func() int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(100)
	}
	store.Inject(func(ctx context.Context, c faultstore.Call) error {
		switch r := roll(); {
		case r < 8:
			return unavailable("connection refused")
		case r < 12:
			return faultstore.Hang(ctx, c)
		}
		return nil
	}, faultstore.OpTake)
	store.InjectAnswer(func(_ context.Context, _ faultstore.Call, r persist.Range) (persist.Range, error) {
		if roll() < 4 {
			return persist.Range{}, unavailable("connection reset")
		}
		return r, nil
	})
	o := testOptions(nil)
	o.MaxStep = 40
	o.LoadTimeout = 20 * time.Millisecond
	o.RetryBackoff = time.Millisecond
	o.MaxRetryBackoff = 2 * time.Millisecond
	servers := []*Allocator{newTestAllocator(t, store, o), newTestAllocator(t, store, o)}

	type span struct{ first, last int64 }
	const clients, ops = 16, 600
	got := make([]map[string][]span, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := servers[w%2]
			prev := map[string]int64{}
			got[w] = map[string][]span{}
			for i := range ops {
				name := tags[(w+i)%len(tags)]
				n := int64(1)
				if i%9 == 0 {
					n = int64(i%60 + 2) // from a segment, or a dedicated range
				}
				for refusals := 0; ; refusals++ {
					last, err := a.NextN(context.Background(), name, n)
					if err == nil {
						if first := last - n + 1; first <= prev[name] {
							t.Errorf("client %d: %s [%d, %d] after %d", w, name, first, last, prev[name])
							return
						}
						prev[name] = last
						got[w][name] = append(got[w][name], span{last - n + 1, last})
						break
					}
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("client %d: %v", w, err)
						return
					}
					if refusals > 1_000_000 {
						t.Errorf("client %d: %s refused a million times: the store never came back", w, name)
						return
					}
					runtime.Gosched() // a client retrying TRYAGAIN
				}
			}
		}()
	}
	wg.Wait()
	answers := 0
	for _, name := range tags {
		var all []span
		for _, g := range got {
			all = append(all, g[name]...)
		}
		answers += len(all)
		slices.SortFunc(all, func(x, y span) int { return cmp.Compare(x.first, y.first) })
		for i := 1; i < len(all); i++ {
			if all[i].first <= all[i-1].last {
				t.Fatalf("duplicate in %s: [%d, %d] overlaps [%d, %d]", name, all[i].first, all[i].last, all[i-1].first, all[i-1].last)
			}
		}
	}
	if answers != clients*ops && !t.Failed() {
		t.Fatalf("%d answers, want %d", answers, clients*ops)
	}
	for i, a := range servers {
		if st := a.Stats(); st.Outages == 0 || st.Probes == 0 || st.Refused == 0 {
			t.Errorf("server %d: %d outages, %d probes, %d refusals: the store never went away", i, st.Outages, st.Probes, st.Refused)
		}
	}
}

// TestReloadsYieldToRequests: after an outage the tags parked meanwhile
// are reloaded in the background, on at most half the loaders: a request
// of another tag, and a request of a parked tag whose reload has not
// started, are served while the reloads hang.
func TestReloadsYieldToRequests(t *testing.T) {
	rows := map[string]int64{"x": 10}
	for i := range 40 {
		rows[fmt.Sprintf("p%02d", i)] = 10
	}
	store := newFakeStore(rows)
	c := newClock()
	o := awayOptions(c)
	o.Loaders = 8
	a := newTestAllocator(t, store, o)
	store.Fail(unavailable("connection refused"))
	if _, err := a.Next(context.Background(), "p00"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	c.waitTimer()
	for i := 1; i < 40; i++ {
		_, err := a.Next(context.Background(), fmt.Sprintf("p%02d", i))
		wantAway(t, "INCR of a tag without IDs", err)
	}

	var mu sync.Mutex
	probed, entered, running, most := false, map[string]bool{}, 0, 0
	allowed := map[string]bool{}
	hung := make(chan string, 40)
	release := make(chan struct{})
	defer close(release)
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		mu.Lock()
		if c.Tag == "x" || allowed[c.Tag] || !probed {
			probed = probed || c.Tag != "x"
			mu.Unlock()
			return nil
		}
		entered[c.Tag] = true
		running++
		most = max(most, running)
		mu.Unlock()
		hung <- c.Tag
		<-release // a reload that hangs
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}, faultstore.OpTake)
	store.Fail(nil)
	c.Add(c.pending()[0]) // the probe loads one parked tag; the others are queued behind requests
	for range o.Loaders / 2 {
		<-hung // the reloads that may run at once have started, and hang
	}

	if _, err := a.Next(context.Background(), "x"); err != nil {
		t.Fatalf("INCR x while the reloads hang: %v", err)
	}
	var waiting string // a parked tag whose reload has not started
	mu.Lock()
	for i := range 40 {
		name := fmt.Sprintf("p%02d", i)
		if in, _ := a.Info(name); in.Loading && !entered[name] {
			waiting = name
			allowed[name] = true
			break
		}
	}
	mu.Unlock()
	if waiting == "" {
		t.Fatal("every reload started: they are not limited to half the loaders")
	}
	if id, err := a.Next(context.Background(), waiting); err != nil || id != 1 {
		t.Fatalf("INCR %s, whose reload was queued: %d, %v; want 1", waiting, id, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > o.Loaders/2 {
		t.Fatalf("%d reloads ran at once, want at most %d", most, o.Loaders/2)
	}
}

// TestFailureWhileStoreAnswers: a load that fails while the store answers
// other calls (a slow database, one row locked) is that tag's failure: the
// store stays up and other tags go on loading.
func TestFailureWhileStoreAnswers(t *testing.T) {
	store := newFakeStore(map[string]int64{"locked": 10, "b": 10})
	a := newTestAllocator(t, store, awayOptions(newClock()))
	entered, release := make(chan struct{}), make(chan struct{})
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		if c.Tag != "locked" {
			return nil
		}
		close(entered)
		<-release
		return fmt.Errorf("%w: lock wait timeout exceeded", persist.ErrUnavailable)
	}, faultstore.OpTake)
	errs := make(chan error, 1)
	go func() {
		_, err := a.Next(context.Background(), "locked")
		errs <- err
	}()
	<-entered
	if id := mustNext(t, mustLookup(t, a, "b")); id != 1 {
		t.Fatalf("INCR b = %d, want 1", id)
	}
	close(release)
	if err := <-errs; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("INCR locked: err = %v, want ErrUnavailable", err)
	}
	waitLoad(t, mustLookup(t, a, "b"))
	if st := a.Stats(); !st.StoreOK || st.Outages != 0 || st.StoreError == "" {
		t.Fatalf("stats = %+v: want the store up, no outage, the error recorded", st)
	}
}
