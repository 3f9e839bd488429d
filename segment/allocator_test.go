package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

func TestPrefetchFiresOnceAtThreshold(t *testing.T) {
	tests := []struct {
		name       string
		step       int64
		prefetchAt float64
		trigger    int // IDs used when the load starts
	}{
		{"10% of 100", 100, 0.1, 10},
		{"50% of 10", 10, 0.5, 5},
		{"rounds up", 30, 0.1, 3},
		{"whole segment", 20, 1, 20},
		{"tiny fraction fires at first ID", 100, 0.001, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": tc.step})
			o := testOptions(newClock())
			o.PrefetchAt = tc.prefetchAt
			a := newTestAllocator(t, store, o)
			tag := mustLookup(t, a, "a")
			mustNext(t, tag) // first load
			// At 1, the first ID also starts the prefetch, which may
			// already have run.
			if got := len(store.Taken()); got != 1 && tc.trigger > 1 {
				t.Fatalf("takes after first ID = %d, want 1", got)
			}
			for i := 2; i <= tc.trigger; i++ {
				if in := tag.Info(); in.Loading || in.NextReady {
					t.Fatalf("load started after %d IDs, want at %d", i-1, tc.trigger)
				}
				mustNext(t, tag)
			}
			if in := tag.Info(); !in.Loading && !in.NextReady {
				t.Fatalf("no load started after %d IDs", tc.trigger)
			}
			waitLoad(t, tag)
			for i := tc.trigger; i < int(tc.step); i++ {
				mustNext(t, tag)
			}
			if got := len(store.Taken()); got != 2 {
				t.Fatalf("takes after the first segment = %d, want exactly 2", got)
			}
		})
	}
}

func TestSwitchIsContiguous(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	for want := int64(1); want <= 500; want++ {
		if got := mustNext(t, tag); got != want {
			t.Fatalf("id = %d, want %d (one server alone must hand out 1, 2, 3, ...)", got, want)
		}
	}
	if in := tag.Info(); in.Loads < 2 {
		t.Fatalf("loads = %d, want several switches", in.Loads)
	}
}

func TestStepPolicy(t *testing.T) {
	p := stepPolicy{segmentDuration: 15 * time.Minute, maxStep: 1000}
	tests := []struct {
		name        string
		step, floor int64
		lasted      time.Duration
		want        int64
	}{
		{"fast doubles", 100, 100, time.Minute, 200},
		{"fast at cap keeps", 1000, 100, time.Minute, 1000},
		{"fast below cap but double passes it keeps", 600, 100, time.Minute, 600},
		{"between one and two durations keeps", 400, 100, 20 * time.Minute, 400},
		{"exactly one duration keeps", 400, 100, 15 * time.Minute, 400},
		{"slow halves", 400, 100, 31 * time.Minute, 200},
		{"exactly two durations halves", 400, 100, 30 * time.Minute, 200},
		{"slow at floor keeps", 100, 100, time.Hour, 100},
		{"slow would pass floor keeps", 150, 100, time.Hour, 150},
		{"raised table step lifts it", 100, 300, time.Hour, 300},
		{"table step above max wins", 100, 5000, time.Minute, 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.next(tc.step, tc.floor, tc.lasted); got != tc.want {
				t.Fatalf("next(%d, %d, %s) = %d, want %d", tc.step, tc.floor, tc.lasted, got, tc.want)
			}
		})
	}
}

// TestAdaptiveStepThroughLoads drives the allocator with the injected clock:
// fast segments double the step up to max_step, slow ones halve it down to
// the table's step.
func TestAdaptiveStepThroughLoads(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	c := newClock()
	o := testOptions(c)
	o.MaxStep = 800
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")

	// drain uses every ID of the current segment and waits for the
	// prefetch, advancing the clock by d per segment.
	drain := func(d time.Duration) {
		t.Helper()
		c.Add(d)
		in := tag.Info()
		cur := in.Segments[in.Pos]
		if n := cur.Max - cur.Value; n > 0 {
			mustNextN(t, tag, n)
		}
		waitLoad(t, tag)
		mustNext(t, tag) // switch
		waitLoad(t, tag)
	}
	mustNext(t, tag)
	waitLoad(t, tag)
	var steps []int64
	for range 5 {
		drain(time.Minute)
		steps = append(steps, tag.Info().Step)
	}
	for range 5 {
		drain(time.Hour)
		steps = append(steps, tag.Info().Step)
	}
	want := []int64{200, 400, 800, 800, 800, 400, 200, 100, 100, 100}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("steps = %v, want %v", steps, want)
	}
	for _, r := range store.Taken() {
		if s := r.Size(); s > 800 || s < 100 {
			t.Fatalf("a segment of %d was taken, outside [100, 800]: %v", s, store.Taken())
		}
	}
}

func TestWaitsForInFlightLoad(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	hold := faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")

	const callers = 20
	ids := make(chan int64, callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			id, err := tag.Next(context.Background())
			if err != nil {
				errs <- err
				return
			}
			ids <- id
		}()
	}
	<-hold.Entered() // exactly one load runs while every caller waits
	hold.Release()
	seen := map[int64]bool{}
	for range callers {
		select {
		case err := <-errs:
			t.Fatalf("caller failed: %v", err)
		case id := <-ids:
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
		}
	}
	for id := int64(1); id <= callers; id++ {
		if !seen[id] {
			t.Fatalf("ids %v miss %d", seen, id)
		}
	}
	if got := a.Stats().Waits; got < 1 {
		t.Fatalf("waits = %d, want >= 1", got)
	}
}

// TestWaitedLoads: requests that wait for one load count as many waits
// and one waited load; a dedicated range counts one more; a request
// served from memory counts neither.
func TestWaitedLoads(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	hold := faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")

	const callers = 5
	ids := make(chan int64, callers)
	for range callers {
		go func() {
			id, err := tag.Next(context.Background())
			if err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	<-hold.Entered()
	for a.Stats().Waits < callers { // counted once each holds the load
		runtime.Gosched()
	}
	hold.Release()
	seen := map[int64]bool{}
	for range callers {
		id := <-ids
		if seen[id] {
			t.Fatalf("duplicate id %d", id)
		}
		seen[id] = true
	}
	if st := a.Stats(); st.Waits != callers || st.WaitedLoads != 1 {
		t.Fatalf("after %d requests waited for the first load: waits %d, waited loads %d; want %d and 1",
			callers, st.Waits, st.WaitedLoads, callers)
	}
	if last := mustNextN(t, tag, 1000); last <= callers {
		t.Fatalf("INCRBY 1000 = %d, want above %d", last, callers)
	}
	if st := a.Stats(); st.WaitedLoads != 2 {
		t.Fatalf("after a dedicated range: waited loads %d, want 2", st.WaitedLoads)
	}
	waitLoad(t, tag)
	mustNext(t, tag)
	if st := a.Stats(); st.WaitedLoads != 2 {
		t.Fatalf("after a request served from memory: waited loads %d, want 2", st.WaitedLoads)
	}
}

func TestLoadFailureThenRecovery(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	down := errors.New("connection refused")
	store.Fail(fmt.Errorf("%w: %w", persist.ErrUnavailable, down), faultstore.OpTake)
	c := newClock()
	o := testOptions(c)
	o.AfterFunc = c.AfterFunc
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")
	_, err := tag.Next(context.Background())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, down) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping the cause", err)
	}
	c.waitTimer() // the failure made the store away: a probe is due
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %q does not say why", err)
	}
	if s := a.Stats(); s.StoreOK || s.StoreError == "" {
		t.Fatalf("stats = %+v, want the store marked down", s)
	}
	store.Fail(nil)
	c.Add(o.RetryBackoff) // the probe finds the store back
	if got := mustNext(t, tag); got != 1 {
		t.Fatalf("after recovery id = %d, want 1", got)
	}
	if !a.Stats().StoreOK {
		t.Fatal("store still marked down after a successful load")
	}
}

// TestPrefetchFailureRetries: a failed prefetch is retried on its own, so the
// next segment is ready once the database is back, with no caller waiting.
func TestPrefetchFailureRetries(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	mustNext(t, tag)

	calls := make(chan struct{}, 10)
	var mu sync.Mutex
	fails := 2
	store.Inject(func(context.Context, faultstore.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls <- struct{}{}
		if fails > 0 {
			fails--
			return persist.ErrUnavailable
		}
		return nil
	}, faultstore.OpTake)
	mustNext(t, tag) // crosses 10%: prefetch
	for range 3 {
		<-calls // two failures, then the retry that succeeds
	}
	waitLoad(t, tag)
	if in := tag.Info(); !in.NextReady || in.Failures != 2 {
		t.Fatalf("info = %+v, want the next segment ready after 2 failures", in)
	}
	waits := a.Stats().Waits
	for want := int64(3); want <= 20; want++ {
		if got := mustNext(t, tag); got != want {
			t.Fatalf("id = %d, want %d", got, want)
		}
	}
	if a.Stats().Waits != waits {
		t.Fatal("a request waited although the retried prefetch had loaded the next segment")
	}
}

func TestLoadTimeout(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	store.Inject(faultstore.Hang, faultstore.OpTake) // only the deadline ends a load
	o := testOptions(newClock())
	o.LoadTimeout = 20 * time.Millisecond
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")
	_, err := tag.Next(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestRequestContextEndsWait(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	hold := faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	a := newTestAllocator(t, store, testOptions(newClock()))
	t.Cleanup(hold.Release) // runs before the allocator's Close
	tag := mustLookup(t, a, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tag.Next(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping context.Canceled", err)
	}
}

func TestNextN(t *testing.T) {
	tests := []struct {
		name     string
		before   int64 // IDs taken with Next first
		n        int64
		wantLast int64
		wantNext int64 // the following Next must be at least this
	}{
		{"fits in current", 0, 5, 5, 6},
		{"fits exactly", 0, 100, 100, 101},
		{"spills to next, remainder abandoned", 95, 10, 110, 111},
		{"larger than a segment: dedicated range", 1, 250, 350, 351},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": 100})
			o := testOptions(newClock())
			o.MaxStep = 100 // keep the step at the table's: a frozen clock doubles it up to MaxStep
			a := newTestAllocator(t, store, o)
			tag := mustLookup(t, a, "a")
			var last int64
			for range tc.before {
				last = mustNext(t, tag)
			}
			waitLoad(t, tag)
			got := mustNextN(t, tag, tc.n)
			if got != tc.wantLast {
				t.Fatalf("last = %d, want %d", got, tc.wantLast)
			}
			if got-tc.n+1 <= last {
				t.Fatalf("range [%d, %d] overlaps IDs up to %d", got-tc.n+1, got, last)
			}
			next := mustNext(t, tag)
			if next < tc.wantNext {
				t.Fatalf("next after INCRBY = %d, want >= %d", next, tc.wantNext)
			}
		})
	}
}

func TestDedicatedRangeKeepsOrder(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	prev := mustNext(t, tag)
	waitLoad(t, tag) // the next segment is ready: the dedicated range lies above it
	for _, n := range []int64{5000, 3, 10000, 1, 7000, 50} {
		last := mustNextN(t, tag, n)
		if first := last - n + 1; first <= prev {
			t.Fatalf("INCRBY %d gave [%d, %d], not above %d", n, first, last, prev)
		}
		prev = last
		id := mustNext(t, tag)
		if id <= prev {
			t.Fatalf("INCR after INCRBY %d = %d, not above %d", n, id, prev)
		}
		prev = id
	}
}

func TestBadInput(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	o := testOptions(newClock())
	o.MaxBatch = 1000
	a := newTestAllocator(t, store, o)
	long := strings.Repeat("x", MaxTagLen+1)
	tests := []struct {
		name string
		tag  string
		n    int64
		want error
	}{
		{"empty tag", "", 1, ErrBadTag},
		{"129-byte tag", long, 1, ErrBadTag},
		{"NUL in tag", "a\x00b", 1, ErrBadTag},
		{"newline in tag", "a\nb", 1, ErrBadTag},
		{"DEL in tag", "a\x7fb", 1, ErrBadTag},
		{"not UTF-8", "a\xffb", 1, ErrBadTag},
		{"n zero", "a", 0, ErrBadCount},
		{"n negative", "a", -5, ErrBadCount},
		{"n min int", "a", math.MinInt64, ErrBadCount},
		{"n over max_batch", "a", 1001, ErrTooMany},
		{"n max int", "a", math.MaxInt64, ErrTooMany},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.NextN(context.Background(), tc.tag, tc.n)
			if !errors.Is(err, tc.want) {
				t.Fatalf("NextN(%q, %d) err = %v, want %v", tc.tag, tc.n, err, tc.want)
			}
		})
	}
	if _, err := a.Next(context.Background(), strings.Repeat("é", 64)); err != nil {
		t.Fatalf("a 128-byte UTF-8 tag is valid: %v", err)
	}
}

func TestGuardRefusesLowerMaxID(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	c := newClock()
	o := testOptions(c)
	o.PrefetchAt = 1 // no prefetch before the segment is spent
	// Every segment is the table's 10 IDs: each load, refused or not,
	// moves max_id up by 10, so the first two loads from the lowered row
	// are both below the 20 IDs reserved, whichever of them a request
	// meets (the prefetch may have been refused before it came).
	o.MaxStep = 10
	// Refused loads are retried only when the test moves the clock: each
	// one moves max_id up, and a retry in the background could carry it
	// past the reserved IDs before a request meets the refusal.
	o.AfterFunc = c.AfterFunc
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")
	for range 15 {
		mustNext(t, tag) // segments [1,11) and [11,21): IDs up to 15 served
	}
	waitLoad(t, tag)
	store.db.SetMaxID("a", 1) // row deleted and re-created, or a backup restored
	var last int64
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatalf("100 IDs after the row was lowered, up to %d, and no refusal", last)
		}
		id, err := tag.Next(context.Background())
		if err != nil {
			if !errors.Is(err, ErrGuard) {
				t.Fatalf("err = %v, want ErrGuard", err)
			}
			break
		}
		if id <= last {
			t.Fatalf("id %d not above %d", id, last)
		}
		last = id
	}
	if last != 20 {
		t.Fatalf("served up to %d; the reserved IDs up to 20, and none above, must be served", last)
	}
	in := tag.Info()
	if in.GuardTrips < 1 || a.Stats().GuardTrips < 1 {
		t.Fatalf("guard trips not counted: %+v", in)
	}
	// Repair: raise max_id above what was served; IDs continue above it.
	store.db.SetMaxID("a", 1000)
	id := mustNext(t, tag)
	if id < 1000 {
		t.Fatalf("after repair id = %d, want >= 1000", id)
	}
}

// With the store's persistent guard on, a lowered row never reaches the
// in-memory guard: the store repairs the range, the allocator serves on,
// strictly increasing, and counts the repair, whether the range was a
// segment load, a dedicated range, or the first load of a new server.
func TestPersistentGuardRepairCounted(t *testing.T) {
	tests := []struct {
		name string
		// next hands out IDs after the row was lowered below high, on a or
		// on a new allocator over the same store, up to the first one from
		// a range taken after; it returns that ID and the allocator.
		next func(t *testing.T, a *Allocator, store *fakeStore, high int64) (int64, *Allocator)
	}{
		{"Load", func(t *testing.T, a *Allocator, _ *fakeStore, high int64) (int64, *Allocator) {
			tag := mustLookup(t, a, "a")
			last := int64(15)
			for last < high { // the rest of the current segment, then a load
				id := mustNext(t, tag)
				if id <= last {
					t.Fatalf("id %d after %d", id, last)
				}
				last = id
			}
			return last, a
		}},
		{"Dedicated", func(t *testing.T, a *Allocator, _ *fakeStore, _ int64) (int64, *Allocator) {
			const n = 100 // more than any segment yet
			return mustNextN(t, mustLookup(t, a, "a"), n) - n + 1, a
		}},
		{"NewServer", func(t *testing.T, _ *Allocator, store *fakeStore, _ int64) (int64, *Allocator) {
			b := newTestAllocator(t, store, testOptions(newClock()))
			return mustNext(t, mustLookup(t, b, "a")), b
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := fakeOn(faultstore.NewMemory(map[string]int64{"a": 10}).WithGuard())
			o := testOptions(newClock())
			o.PrefetchAt = 1 // no prefetch before the segment is spent
			a := newTestAllocator(t, store, o)
			tag := mustLookup(t, a, "a")
			for range 15 {
				mustNext(t, tag) // two segments loaded, IDs up to 15 served
			}
			waitLoad(t, tag)
			high := tag.Info().GuardHigh
			store.db.SetMaxID("a", 1) // row deleted and re-created, or a backup restored
			id, b := tc.next(t, a, store, high)
			if id != high {
				t.Fatalf("first ID of a range taken after the row was lowered = %d, want %d (IDs below are reserved)", id, high)
			}
			in, st := mustLookup(t, b, "a").Info(), b.Stats()
			if in.GuardRepairs != 1 || st.GuardRepairs != 1 || in.GuardTrips != 0 || st.GuardTrips != 0 {
				t.Fatalf("guard repairs %d (stats %d), trips %d (stats %d); want 1 repair, no trip",
					in.GuardRepairs, st.GuardRepairs, in.GuardTrips, st.GuardTrips)
			}
		})
	}
}

func TestVanishedTagKeepsServing(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	o := testOptions(newClock())
	o.PrefetchAt = 1
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")
	mustNext(t, tag)
	store.db.Delete("a")
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in, err := a.Info("a"); err != nil || !in.Vanished {
		t.Fatalf("info = %+v, %v: want the tag kept and marked vanished", in, err)
	}
	for want := int64(2); want <= 10; want++ {
		if got := mustNext(t, tag); got != want {
			t.Fatalf("id = %d, want %d", got, want)
		}
	}
	if _, err := tag.Next(context.Background()); !errors.Is(err, ErrTagGone) {
		t.Fatalf("err = %v, want ErrTagGone once the reserved IDs are spent", err)
	}
}

func TestSyncAddsNewTags(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	if _, err := a.Info("b"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("info of an absent tag: %v", err)
	}
	if _, err := store.Create(context.Background(), "b", 7, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Info("b"); err != nil {
		t.Fatalf("b not added by sync: %v", err)
	}
	if got := len(a.Tags()); got != 2 {
		t.Fatalf("tags = %d, want 2", got)
	}
}

func TestUnknownTag(t *testing.T) {
	t.Run("auto-create", func(t *testing.T) {
		store := newFakeStore(nil)
		o := testOptions(newClock())
		o.DefaultStep = 50
		a := newTestAllocator(t, store, o)
		if id, err := a.Next(context.Background(), "new"); err != nil || id != 1 {
			t.Fatalf("Next = %d, %v; want 1", id, err)
		}
		row, err := store.Tag(context.Background(), "new")
		if err != nil || row.Step != 50 {
			t.Fatalf("row = %+v, %v; want created with step 50", row, err)
		}
	})
	t.Run("off", func(t *testing.T) {
		store := newFakeStore(nil)
		o := testOptions(newClock())
		o.AutoCreate = false
		a := newTestAllocator(t, store, o)
		for range 3 {
			if _, err := a.Next(context.Background(), "new"); !errors.Is(err, ErrUnknownTag) {
				t.Fatalf("err = %v, want ErrUnknownTag", err)
			}
		}
		if _, err := store.Tag(context.Background(), "new"); !errors.Is(err, persist.ErrNotFound) {
			t.Fatal("the tag was created with auto-create off")
		}
		if lookups := store.Calls(faultstore.OpTag, faultstore.OpTake); lookups != 2 { // one by the allocator, one by this test
			t.Fatalf("database lookups = %d, want the negative cache to answer repeats", lookups)
		}
	})
	t.Run("created elsewhere later", func(t *testing.T) {
		store := newFakeStore(nil)
		c := newClock()
		o := testOptions(c)
		o.AutoCreate = false
		a := newTestAllocator(t, store, o)
		if _, err := a.Next(context.Background(), "x"); !errors.Is(err, ErrUnknownTag) {
			t.Fatalf("err = %v", err)
		}
		if _, err := store.Create(context.Background(), "x", 10, ""); err != nil {
			t.Fatal(err)
		}
		c.Add(2 * time.Second) // past the negative cache
		if id, err := a.Next(context.Background(), "x"); err != nil || id != 1 {
			t.Fatalf("Next = %d, %v; want 1 once the row exists", id, err)
		}
	})
}

// TestConcurrentMixedNoDuplicates is the allocator's central promise: 100
// goroutines x 10,000 mixed INCR/INCRBY on one tag with small segments (so
// switches and dedicated ranges happen constantly): no ID twice, and each
// goroutine sees strictly increasing IDs.
func TestConcurrentMixedNoDuplicates(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 50})
	o := testOptions(nil)
	o.MaxStep = 400
	a := newTestAllocator(t, store, o)
	tag := mustLookup(t, a, "a")

	const workers, ops = 100, 10_000
	type span struct{ first, last int64 }
	results := make([][]span, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]span, 0, ops)
			var prev int64
			for i := range ops {
				n := int64(1)
				switch {
				case i%97 == 0:
					n = 1000 // beyond most segments: dedicated ranges
				case i%7 == 0:
					n = int64(i%40 + 2)
				}
				var last int64
				var err error
				if n == 1 {
					last, err = tag.Next(context.Background())
				} else {
					last, err = tag.NextN(context.Background(), n)
				}
				if err != nil {
					errs <- err
					return
				}
				first := last - n + 1
				if first <= prev {
					errs <- fmt.Errorf("worker %d: [%d, %d] after %d: not increasing", w, first, last, prev)
					return
				}
				prev = last
				out = append(out, span{first, last})
			}
			results[w] = out
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []span
	for _, r := range results {
		all = append(all, r...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].first < all[j].first })
	for i := 1; i < len(all); i++ {
		if all[i].first <= all[i-1].last {
			t.Fatalf("duplicate: [%d, %d] overlaps [%d, %d]", all[i].first, all[i].last, all[i-1].first, all[i-1].last)
		}
	}
	if len(all) != workers*ops {
		t.Fatalf("%d results, want %d", len(all), workers*ops)
	}
}

// TestManyTagsBlockedStoreBoundsGoroutines: 20,000 tags on a database whose
// calls block. Goroutines stay at the callers plus the loaders plus a
// constant, and every caller gets an answer or an error by its deadline.
func TestManyTagsBlockedStoreBoundsGoroutines(t *testing.T) {
	const tags = 20_000
	rows := make(map[string]int64, tags)
	for i := range tags {
		rows[fmt.Sprintf("t%05d", i)] = 10
	}
	store := newFakeStore(rows)
	hold := faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	o := testOptions(nil)
	o.Loaders = 8
	o.LoadTimeout = 200 * time.Millisecond
	a := newTestAllocator(t, store, o)

	base := runtime.NumGoroutine()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, failed int
	peak := 0
	for i := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := a.Next(context.Background(), fmt.Sprintf("t%05d", i))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if errors.Is(err, ErrUnavailable) {
				failed++
			} else {
				t.Errorf("tag %d: unexpected error %v", i, err)
			}
		}()
	}
	close(start)
	// Sample the goroutine count while the callers are blocked.
	for range 20 {
		peak = max(peak, runtime.NumGoroutine())
		runtime.Gosched()
	}
	wg.Wait()
	hold.Release()
	// callers + this test's goroutines + loaders + a few timers.
	if limit := base + tags + o.Loaders + 64; peak > limit {
		t.Fatalf("peak goroutines %d > %d: loads are not bounded by the pool", peak, limit)
	}
	if ok+failed != tags {
		t.Fatalf("answers %d + errors %d != %d callers", ok, failed, tags)
	}
	if failed == 0 {
		t.Fatal("no caller timed out although the database never answered")
	}
}

func TestCloseGivesBackUnusedIDs(t *testing.T) {
	tests := []struct {
		name  string
		ids   int  // IDs used before Close
		wait  bool // let the prefetch finish
		other bool // another server takes a range after ours
		want  int64
	}{
		{"tail of current", 5, false, false, 6},
		{"next segment then tail", 15, true, false, 16},
		{"another server above: nothing lowered", 15, true, true, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": 10})
			o := testOptions(newClock())
			o.MaxStep = 10 // keep the step at the table's
			a := New(store, o)
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			tag := mustLookup(t, a, "a")
			for range tc.ids {
				mustNext(t, tag)
			}
			if tc.wait {
				waitLoad(t, tag)
			}
			var otherEnd int64
			if tc.other {
				r, err := store.Take(context.Background(), "a", 0)
				if err != nil {
					t.Fatal(err)
				}
				otherEnd = r.End
			}
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := store.db.MaxID("a")
			want := tc.want
			if want < 0 {
				want = otherEnd
			}
			if got != want {
				t.Fatalf("max_id after close = %d, want %d", got, want)
			}
			if _, err := tag.Next(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("Next after Close: %v, want ErrClosed", err)
			}
			// A restart continues at exactly the next ID.
			if !tc.other {
				b := newTestAllocator(t, store, o)
				if id, err := b.Next(context.Background(), "a"); err != nil || id != int64(tc.ids)+1 {
					t.Fatalf("after restart id = %d, %v; want %d", id, err, tc.ids+1)
				}
			}
		})
	}
}

// TestTwoAllocatorsOneStore: two servers on one database never hand out the
// same ID, and each one's IDs increase.
func TestTwoAllocatorsOneStore(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 20})
	o := testOptions(nil)
	o.MaxStep = 80
	servers := []*Allocator{newTestAllocator(t, store, o), newTestAllocator(t, store, o)}
	seen := sync.Map{}
	var wg sync.WaitGroup
	for i, a := range servers {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var prev int64
				for range 5000 {
					id, err := a.Next(context.Background(), "a")
					if err != nil {
						t.Error(err)
						return
					}
					if id <= prev {
						t.Errorf("server %d goroutine %d: %d after %d", i, g, id, prev)
						return
					}
					prev = id
					if _, dup := seen.LoadOrStore(id, i); dup {
						t.Errorf("duplicate id %d", id)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
}
