package snowflake_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/snowflake"
)

// clock is the tests' wall clock: it moves only when told to, or when the
// generator sleeps (by exactly the time slept).
type clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.slept)
}

// start is a time well inside the default layout.
var start = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newGen(c *clock, maxBack time.Duration) *snowflake.Generator {
	return snowflake.New(snowflake.Options{Layout: snowflake.DefaultLayout(), MaxClockBack: maxBack, Now: c.Now, Sleep: c.Sleep})
}

// far is a bound that never stops the tests that are not about it.
var far = start.Add(24 * time.Hour).UnixMilli()

func mustNext(t *testing.T, g *snowflake.Generator, n int64) int64 {
	t.Helper()
	id, err := g.NextN(t.Context(), n)
	if err != nil {
		t.Fatalf("NextN(%d): %v", n, err)
	}
	return id
}

func TestDefaultLayout(t *testing.T) {
	l := snowflake.DefaultLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := l.End().UTC().Format(time.DateOnly), "2080-07-10"; got != want {
		t.Errorf("End() = %s, want %s", got, want)
	}
	if l.Workers() != 1024 || l.Capacity() != 4096 {
		t.Errorf("Workers() = %d, Capacity() = %d", l.Workers(), l.Capacity())
	}
	if got := l.Lasts(start); got < 54*365*24*time.Hour || got > 55*365*24*time.Hour {
		t.Errorf("Lasts(2026) = %s, want about 54 years", got)
	}
	if got, want := l.String(), "epoch=1288834974657 unit=1ms bits=41/10/12"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLayoutUsable(t *testing.T) {
	l := snowflake.DefaultLayout()
	if err := l.Usable(start); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		now  time.Time
		want string
	}{
		{"EpochAhead", l.Epoch.Add(-time.Hour), "in the future"},
		{"MonthsLeft", l.End().Add(-200 * 24 * time.Hour), "less than a year from now"},
		{"RunOut", l.End().Add(time.Hour), "less than a year from now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.Usable(tc.now); !errors.Is(err, snowflake.ErrLayout) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Usable(%s) = %v, want %q", tc.now, err, tc.want)
			}
		})
	}
}

func TestLayoutValidate(t *testing.T) {
	d := snowflake.DefaultLayout()
	tests := []struct {
		name string
		edit func(*snowflake.Layout)
		want string
	}{
		{"BitsNot63", func(l *snowflake.Layout) { l.SeqBits = 13 }, "want 63"},
		{"NoWorkerBits", func(l *snowflake.Layout) { l.WorkerBits, l.TimeBits = 0, 51 }, "at least one bit"},
		{"TooManyWorkerBits", func(l *snowflake.Layout) { l.WorkerBits, l.TimeBits = 17, 34 }, "at most 16"},
		{"SubMillisecond", func(l *snowflake.Layout) { l.Unit = time.Microsecond }, "whole milliseconds"},
		{"OddUnit", func(l *snowflake.Layout) { l.Unit = 1500 * time.Microsecond }, "whole milliseconds"},
		{"ZeroEpoch", func(l *snowflake.Layout) { l.Epoch = time.Time{} }, "whole millisecond"},
		{"EpochNanos", func(l *snowflake.Layout) { l.Epoch = l.Epoch.Add(1) }, "whole millisecond"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := d
			tc.edit(&l)
			err := l.Validate()
			if !errors.Is(err, snowflake.ErrLayout) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrLayout saying %q", err, tc.want)
			}
		})
	}
}

// TestDecodeAsLeaf: IDs of the default layout decode as Leaf's
// /decodeSnowflakeId reads them (twepoch 1288834974657, shifts 22 and 12).
func TestDecodeAsLeaf(t *testing.T) {
	c := newClock(start.Add(123 * time.Millisecond))
	g := newGen(c, 5*time.Millisecond)
	g.Grant(39, 0, far)
	id := mustNext(t, g, 1)
	ts := (id >> 22) + 1288834974657
	worker := (id >> 12) ^ (id >> 22 << 10)
	seq := id ^ (id >> 12 << 12)
	if ts != c.Now().UnixMilli() || worker != 39 || seq < 0 || seq >= 100 {
		t.Fatalf("Leaf decodes %d as time %d, worker %d, sequence %d; want %d, 39, below 100", id, ts, worker, seq, c.Now().UnixMilli())
	}
	p, ok := g.Layout().Decode(id)
	if !ok || p.Time.UnixMilli() != ts || p.Worker != 39 || p.Seq != seq {
		t.Fatalf("Decode(%d) = %+v, %v", id, p, ok)
	}
	if _, ok := g.Layout().Decode(-1); ok {
		t.Fatal("Decode(-1) ok")
	}
}

func TestNoWorker(t *testing.T) {
	g := newGen(newClock(start), time.Millisecond)
	if _, err := g.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrNoWorker) || !errors.Is(err, snowflake.ErrUnavailable) {
		t.Fatalf("NextN without a worker id: %v, want ErrNoWorker", err)
	}
	if _, ok := g.TryNextN(1); ok {
		t.Fatal("TryNextN without a worker id succeeded")
	}
}

// TestSequence: one time unit's IDs are consecutive from a random start
// below 100; when they run out the request waits for the next unit.
func TestSequence(t *testing.T) {
	c := newClock(start)
	g := newGen(c, time.Millisecond)
	g.Grant(5, 0, far)
	first := mustNext(t, g, 1)
	p, _ := g.Layout().Decode(first)
	if p.Seq >= 100 || p.Worker != 5 || !p.Time.Equal(start) {
		t.Fatalf("first ID %d = %+v", first, p)
	}
	prev := first
	for i := p.Seq + 1; i < 4096; i++ {
		id := mustNext(t, g, 1)
		if id != prev+1 {
			t.Fatalf("ID after %d is %d, want the next", prev, id)
		}
		prev = id
	}
	if len(c.Slept()) != 0 {
		t.Fatalf("slept %v within one unit", c.Slept())
	}
	if _, ok := g.TryNextN(1); ok {
		t.Fatal("TryNextN succeeded with the unit's sequence used up")
	}
	id := mustNext(t, g, 1)
	p, _ = g.Layout().Decode(id)
	if !p.Time.Equal(start.Add(time.Millisecond)) || id <= prev || !slices.Equal(c.Slept(), []time.Duration{time.Millisecond}) {
		t.Fatalf("after the sequence ran out: ID %+v, slept %v; want the next millisecond after sleeping 1ms", p, c.Slept())
	}
	if st := g.Stats(); st.SeqWaits == 0 || st.ClockWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatch: INCRBY n takes n consecutive IDs of one unit and returns the
// last; a whole unit fits, more does not.
func TestBatch(t *testing.T) {
	c := newClock(start)
	g := newGen(c, time.Millisecond)
	g.Grant(1, 0, far)
	a := mustNext(t, g, 1)
	b := mustNext(t, g, 10)
	if b != a+10 {
		t.Fatalf("NextN(10) after %d = %d, want %d", a, b, a+10)
	}
	c.Add(time.Millisecond)
	whole := mustNext(t, g, 4096)
	p, _ := g.Layout().Decode(whole)
	if p.Seq != 4095 || !p.Time.Equal(start.Add(time.Millisecond)) {
		t.Fatalf("NextN(4096) = %+v, want the whole of one millisecond", p)
	}
	for _, n := range []int64{0, -1, 4097} {
		if _, err := g.NextN(t.Context(), n); !errors.Is(err, snowflake.ErrBatch) {
			t.Fatalf("NextN(%d): %v, want ErrBatch", n, err)
		}
	}
	// A batch that does not fit what is left of a unit goes to the next.
	c.Add(time.Millisecond)
	x := mustNext(t, g, 4000)
	y := mustNext(t, g, 200)
	px, _ := g.Layout().Decode(x)
	py, _ := g.Layout().Decode(y)
	if !py.Time.After(px.Time) || py.Seq-199 >= 100 || y <= x {
		t.Fatalf("batch of 200 after %+v: %+v", px, py)
	}
}

// TestClockBack: a step back within MaxClockBack waits for the clock; a
// larger one is refused and counted, until the clock catches up; nothing
// repeats and nothing goes back.
func TestClockBack(t *testing.T) {
	c := newClock(start)
	g := newGen(c, 5*time.Millisecond)
	g.Grant(2, 0, far)
	var ids []int64
	ids = append(ids, mustNext(t, g, 1))

	c.Add(-time.Millisecond) // 1 ms back: waits
	ids = append(ids, mustNext(t, g, 1))
	if slept := c.Slept(); len(slept) != 1 || slept[0] != time.Millisecond {
		t.Fatalf("a 1ms step back slept %v, want [1ms]", slept)
	}
	c.Add(2 * time.Millisecond)
	ids = append(ids, mustNext(t, g, 1))

	c.Add(-time.Second) // 1 s back: refused
	_, err := g.NextN(t.Context(), 1)
	if !errors.Is(err, snowflake.ErrClockBack) || !errors.Is(err, snowflake.ErrUnavailable) || !strings.Contains(err.Error(), "by 1s") {
		t.Fatalf("NextN after a 1s step back: %v, want ErrClockBack by 1s", err)
	}
	if _, ok := g.TryNextN(1); ok {
		t.Fatal("TryNextN succeeded with the clock 1s back")
	}
	if st := g.Stats(); st.ClockRefusals != 2 || st.ClockWaits != 1 {
		t.Fatalf("stats %+v, want 2 refusals, 1 wait", st)
	}
	c.Add(time.Second)
	ids = append(ids, mustNext(t, g, 1))
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("IDs went back: %v", ids)
		}
	}
}

// TestRestartClockBack: a server that restarts with its clock 10s back and
// gets the same worker id starts after the id's recorded bound: it refuses
// until its clock passes it, and repeats nothing.
func TestRestartClockBack(t *testing.T) {
	c := newClock(start)
	before := newGen(c, 5*time.Millisecond)
	bound := start.Add(3 * time.Second).UnixMilli() // as the lease recorded it
	before.Grant(7, 0, bound)
	seen := map[int64]bool{}
	for range 3 {
		for range 50 {
			seen[mustNext(t, before, 1)] = true
		}
		c.Add(time.Second)
	}
	last := before.Last()

	// The restart: a new generator, the clock 10s back, the same id.
	c.Add(-10 * time.Second)
	after := newGen(c, 5*time.Millisecond)
	after.Grant(7, max(bound, last), c.Now().Add(time.Hour).UnixMilli())
	if _, err := after.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrClockBack) {
		t.Fatalf("NextN 10s behind the id's bound: %v, want ErrClockBack", err)
	}
	for c.Now().UnixMilli() <= bound {
		c.Add(500 * time.Millisecond)
		if id, err := after.NextN(t.Context(), 1); err == nil {
			if seen[id] {
				t.Fatalf("ID %d repeated after the restart", id)
			}
			p, _ := after.Layout().Decode(id)
			if p.Time.UnixMilli() <= bound {
				t.Fatalf("ID %d at %s, at or before the bound %d", id, p.Time, bound)
			}
		}
	}
	for range 100 {
		id := mustNext(t, after, 1)
		if seen[id] {
			t.Fatalf("ID %d repeated after the restart", id)
		}
	}
}

// TestBound: the generator never issues past its lease's bound; Extend
// raises it; Revoke stops everything.
func TestBound(t *testing.T) {
	c := newClock(start)
	g := newGen(c, time.Millisecond)
	g.Grant(3, 0, start.Add(2*time.Second).UnixMilli())
	mustNext(t, g, 1)
	c.Add(2 * time.Second)
	mustNext(t, g, 1) // the bound's own unit
	c.Add(time.Millisecond)
	if _, err := g.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrLease) {
		t.Fatalf("NextN past the bound: %v, want ErrLease", err)
	}
	g.Extend(4, far) // another id: ignored
	if _, err := g.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrLease) {
		t.Fatalf("NextN after Extend of another id: %v, want ErrLease", err)
	}
	g.Extend(3, start.Add(time.Minute).UnixMilli())
	g.Extend(3, start.UnixMilli()) // lower: kept
	mustNext(t, g, 1)
	if st := g.Stats(); st.Worker != 3 || st.Bound != start.Add(time.Minute).UnixMilli() {
		t.Fatalf("stats %+v", st)
	}
	why := errors.Join(snowflake.ErrLease, errors.New("store unreachable"))
	g.Revoke(why)
	if _, err := g.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrLease) || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("NextN after Revoke: %v", err)
	}
	if w, ok := g.Worker(); ok || w != -1 {
		t.Fatalf("Worker() after Revoke = %d, %v", w, ok)
	}
}

// TestGrantStartsAfterPrev: a worker id's next holder starts in a time
// unit after the id's previous bound, also when its clock is behind it by
// less than MaxClockBack (it waits).
func TestGrantStartsAfterPrev(t *testing.T) {
	c := newClock(start)
	g := newGen(c, 5*time.Millisecond)
	prev := start.Add(2 * time.Millisecond).UnixMilli()
	g.Grant(9, prev, far)
	id := mustNext(t, g, 1)
	p, _ := g.Layout().Decode(id)
	if p.Time.UnixMilli() <= prev {
		t.Fatalf("first ID at %d, want after the previous bound %d", p.Time.UnixMilli(), prev)
	}
}

// TestConcurrent: goroutines taking IDs and batches at once on the real
// clock (read for each ID, or by the reader once the rate is high) get no
// ID twice, each its own increasing, and no ID carries a time after the
// clock's.
func TestConcurrent(t *testing.T) {
	g := snowflake.New(snowflake.Options{Layout: snowflake.DefaultLayout(), MaxClockBack: 5 * time.Millisecond})
	g.Grant(1, 0, time.Now().Add(time.Hour).UnixMilli())

	const workers, each = 8, 3000
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := int64(1 + i%3)
				last, err := g.NextN(context.Background(), n)
				if err != nil {
					t.Error(err)
					return
				}
				for id := last - n + 1; id <= last; id++ {
					got[w] = append(got[w], id)
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	seen := map[int64]bool{}
	for w, ids := range got {
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d: %d after %d", w, id, ids[i-1])
			}
			if p, _ := g.Layout().Decode(id); p.Time.After(end) {
				t.Fatalf("ID %d made at %s, after the clock's %s", id, p.Time, end)
			}
		}
	}
}

func BenchmarkNext(b *testing.B) {
	g := snowflake.New(snowflake.Options{Layout: snowflake.DefaultLayout(), MaxClockBack: 5 * time.Millisecond})
	g.Grant(1, 0, time.Now().Add(time.Hour).UnixMilli())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextN(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNextCPU is what an ID costs the CPU: a sequence of 22 bits
// never runs out within a millisecond, where BenchmarkNext's 12 bits make
// it wait for the next one (4,096 IDs a millisecond at most).
func BenchmarkNextCPU(b *testing.B) {
	l := snowflake.DefaultLayout()
	l.TimeBits, l.WorkerBits, l.SeqBits = 40, 1, 22
	g := snowflake.New(snowflake.Options{Layout: l, MaxClockBack: 5 * time.Millisecond})
	g.Grant(1, 0, time.Now().Add(time.Hour).UnixMilli())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextN(context.Background(), 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnits: an ID's time is the start of the time unit the clock is in,
// for the default unit of 1 ms and for longer ones.
func TestUnits(t *testing.T) {
	for _, unit := range []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second} {
		t.Run(unit.String(), func(t *testing.T) {
			l := snowflake.DefaultLayout()
			l.Unit = unit
			now := start.Add(1234567 * time.Microsecond)
			g := snowflake.New(snowflake.Options{Layout: l, MaxClockBack: time.Millisecond, Now: newClock(now).Now})
			g.Grant(3, 0, now.Add(time.Hour).UnixMilli())
			id, err := g.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p, _ := l.Decode(id)
			want := l.Epoch.Add(now.Sub(l.Epoch).Truncate(unit))
			if !p.Time.Equal(want) || p.Worker != 3 {
				t.Fatalf("ID %d = %+v, want time %s and worker 3", id, p, want)
			}
		})
	}
}
