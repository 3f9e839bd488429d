package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Errors of the generator. Those that wrap ErrUnavailable pass: the
// client may try again later.
var (
	// ErrUnavailable: the server cannot make Snowflake IDs now.
	ErrUnavailable = errors.New("snowflake IDs unavailable")
	// ErrNoWorker: the server holds no worker id (none leased yet, every
	// one held by live servers, or the cluster registry is off).
	ErrNoWorker = fmt.Errorf("%w: this server holds no worker id", ErrUnavailable)
	// ErrLease: the worker id's lease was not renewed in time: issuing
	// stopped before another server could be given the id.
	ErrLease = fmt.Errorf("%w: the worker id's lease was not renewed in time", ErrUnavailable)
	// ErrClockBack: the clock is behind the last ID issued by more than
	// Options.MaxClockBack.
	ErrClockBack = fmt.Errorf("%w: the clock is behind the last ID issued", ErrUnavailable)
	// ErrBatch: a count beyond one time unit's sequence capacity.
	ErrBatch = errors.New("snowflake: count exceeds the IDs of one time unit")
)

// seqSpread is the range of the first sequence number of a time unit,
// drawn at random as Leaf does, so that IDs of a quiet server are not all
// multiples of 2^SeqBits (a sharding key of ID modulo n would then hit one
// shard).
const seqSpread = 100

// Options configure New.
type Options struct {
	Layout Layout
	// MaxClockBack is how far the clock may be behind the last ID issued
	// for a request to wait for it; beyond, ErrClockBack.
	MaxClockBack time.Duration
	// Now is the wall clock; nil is time.Now, read for each ID at low
	// rates and once a millisecond by a goroutine at high ones
	// (coarseClock). Tests inject one.
	Now func() time.Time
	// Sleep waits d or until ctx ends; nil waits on a timer. Tests inject
	// one that moves their clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Generator makes the Snowflake IDs of one server, for all its Snowflake
// tags: IDs are unique across the tags too, as in Leaf, whose key is
// ignored. The state is one word, the last (time unit, sequence) issued,
// moved with a compare-and-swap: no lock and no store call per ID.
//
// It issues only while it holds a worker id (Grant), and only in time
// units up to the lease's bound (Extend raises it); Revoke stops it.
type Generator struct {
	l       Layout
	shift   uint  // WorkerBits + SeqBits
	mask    int64 // of the sequence
	epochMs int64 // the layout's epoch in Unix ms
	unitMs  bool  // the layout's unit is 1 ms: a time unit is ms - epochMs
	maxBack time.Duration
	now     func() time.Time // nil: clock
	clock   coarseClock
	sleep   func(ctx context.Context, d time.Duration) error

	state     atomic.Int64 // last time unit << SeqBits | last sequence; stopped after Stop
	stoppedAt atomic.Int64 // the state Stop replaced
	lease     atomic.Pointer[lease]
	why       atomic.Pointer[error] // why there is no lease

	clockWaits, clockRefusals, seqWaits atomic.Int64
}

// lease is a worker id and the last time unit it may issue in.
type lease struct {
	id     int
	worker int64 // id << SeqBits
	bound  int64
}

// New returns a generator with no worker id: it answers ErrNoWorker until
// Grant.
func New(o Options) *Generator {
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	return &Generator{
		l: o.Layout, shift: uint(o.Layout.WorkerBits + o.Layout.SeqBits), mask: o.Layout.Capacity() - 1,
		epochMs: o.Layout.Epoch.UnixMilli(), unitMs: o.Layout.Unit == time.Millisecond, maxBack: o.MaxClockBack, now: o.Now, sleep: o.Sleep,
	}
}

// tick is Layout.tickMs, without its divisions for a unit of 1 ms (the
// default): it runs for every ID.
func (g *Generator) tick(ms int64) int64 {
	if g.unitMs {
		return ms - g.epochMs
	}
	return g.l.tickMs(ms)
}

// revoked is the error of a generator without a lease.
func (g *Generator) revoked() error {
	if why := g.why.Load(); why != nil {
		return *why
	}
	return ErrNoWorker
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Layout is the generator's layout.
func (g *Generator) Layout() Layout { return g.l }

// Grant gives the generator worker id id, leased with bound (Unix ms): it
// issues in time units up to bound's. prev is the id's bound before (0 for
// a new id): its next ID is in a time unit after prev's, so nothing its
// earlier holders issued repeats, whatever this server's clock says.
func (g *Generator) Grant(id int, prev, bound int64) {
	floor := g.l.tickMs(prev)<<g.l.SeqBits | g.mask
	for old := g.state.Load(); old < floor && !g.state.CompareAndSwap(old, floor); old = g.state.Load() {
	}
	// Published after the state moved: no ID of this id can be at or
	// below prev's unit.
	g.lease.Store(&lease{id: id, worker: int64(id) << g.l.SeqBits, bound: g.l.tickMs(bound)})
}

// Extend raises the bound of worker id id, recorded in the store by a
// renewal; nothing when the generator holds another id or none.
func (g *Generator) Extend(id int, bound int64) {
	for {
		ls := g.lease.Load()
		if ls == nil || ls.id != id {
			return
		}
		b := max(ls.bound, g.l.tickMs(bound))
		if b == ls.bound || g.lease.CompareAndSwap(ls, &lease{id: id, worker: ls.worker, bound: b}) {
			return
		}
	}
}

// Revoke stops issuing: every request answers why (which should wrap
// ErrLease or ErrNoWorker) until Grant.
func (g *Generator) Revoke(why error) {
	g.why.Store(&why)
	g.lease.Store(nil)
}

// stopped is the state of a stopped generator: no compare-and-swap from
// an earlier state succeeds any more.
const stopped = math.MaxInt64

// Stop revokes the generator for good, as Revoke, and returns Last as it
// was when it stopped: every ID issued has a time at or before it,
// including one whose call was in progress (a call either issued before
// the stop, and is counted, or fails after it). A server that gives its
// worker id back records it as the id's bound. A stopped generator issues
// nothing again, even after Grant.
func (g *Generator) Stop(why error) int64 {
	g.Revoke(why)
	old := g.state.Swap(stopped)
	if old == stopped {
		old = g.stoppedAt.Load()
	}
	g.stoppedAt.Store(old)
	return g.l.msOf(old >> g.l.SeqBits)
}

// Worker is the worker id held, false when none.
func (g *Generator) Worker() (int, bool) {
	if ls := g.lease.Load(); ls != nil {
		return ls.id, true
	}
	return -1, false
}

// Last is the first Unix millisecond of the time unit of the last ID
// issued: no ID issued has a later time. A worker id given back after the
// generator stopped records it as its bound (Stop returns it).
func (g *Generator) Last() int64 {
	st := g.state.Load()
	if st == stopped {
		st = g.stoppedAt.Load()
	}
	return g.l.msOf(st >> g.l.SeqBits)
}

// Stats are the generator's counters.
type Stats struct {
	Worker        int   // -1: none
	Bound         int64 // Unix ms: the last time unit it may issue in starts then; 0 without a worker id
	ClockWaits    int64 // requests that waited for a clock behind the last ID
	ClockRefusals int64 // requests refused: the clock was behind by more than MaxClockBack
	SeqWaits      int64 // requests that waited for the next time unit, this one's sequence used up
}

// Stats returns the counters.
func (g *Generator) Stats() Stats {
	st := Stats{Worker: -1, ClockWaits: g.clockWaits.Load(), ClockRefusals: g.clockRefusals.Load(), SeqWaits: g.seqWaits.Load()}
	if ls := g.lease.Load(); ls != nil {
		st.Worker, st.Bound = ls.id, g.l.msOf(ls.bound)
	}
	return st
}

// Next returns the next ID.
func (g *Generator) Next(ctx context.Context) (int64, error) { return g.NextN(ctx, 1) }

// NextN makes n consecutive IDs, all in one time unit, and returns the
// last: the caller owns [last-n+1, last]. n is at most Layout.Capacity. It
// waits for a clock behind the last ID by up to MaxClockBack, and for the
// next time unit when this one's sequence is used up.
func (g *Generator) NextN(ctx context.Context, n int64) (int64, error) {
	if n < 1 || n > g.mask+1 {
		return 0, fmt.Errorf("%w: %d, at most %d", ErrBatch, n, g.mask+1)
	}
	for {
		id, wait, err := g.next(n)
		if err != nil || wait == 0 {
			return id, err
		}
		if err := g.sleep(ctx, wait); err != nil {
			return 0, fmt.Errorf("%w: waiting for the clock: %w", ErrUnavailable, err)
		}
	}
}

// TryNextN is NextN when it needs no wait: ok is false, and nothing is
// taken, when NextN would wait or fail.
func (g *Generator) TryNextN(n int64) (last int64, ok bool) {
	if n < 1 || n > g.mask+1 {
		return 0, false
	}
	id, wait, err := g.next(n)
	return id, err == nil && wait == 0
}

// nowMs is the wall clock in Unix milliseconds: the coarse clock's unless
// fresh (or a clock is injected), then read now.
func (g *Generator) nowMs(fresh bool) int64 {
	switch {
	case g.now != nil:
		return g.now().UnixMilli()
	case fresh:
		return time.Now().UnixMilli()
	}
	return g.clock.now()
}

// next makes n IDs now, or says how long to wait before trying again.
func (g *Generator) next(n int64) (id int64, wait time.Duration, err error) {
	ls := g.lease.Load()
	if ls == nil {
		return 0, 0, g.revoked()
	}
	// A wait or a refusal is decided on a fresh read of the clock: the
	// coarse one may lag it by more than a unit when its reader waits to be
	// scheduled, or lag the unit of an ID made on a fresh read. An injected
	// clock is always read now.
	fresh := g.now != nil
	for {
		// The state before the clock: an ID in a later unit than the
		// clock's was then issued by a clock read earlier, so this one
		// went back (read the other way round, a request delayed between
		// the two would take others' progress for a clock going back).
		old := g.state.Load()
		if old == stopped {
			return 0, 0, g.revoked()
		}
		nowMs := g.nowMs(fresh)
		tick := g.tick(nowMs)
		last, seq := old>>g.l.SeqBits, old&g.mask
		var t, first int64
		switch {
		case tick < last && !fresh, tick == last && seq+n > g.mask && !fresh:
			fresh = true
			continue
		case tick < last:
			behind := time.Duration(g.l.msOf(last)-nowMs) * time.Millisecond
			if behind > g.maxBack {
				g.clockRefusals.Add(1)
				return 0, 0, fmt.Errorf("%w by %s (at most %s is waited for); refusing until it catches up",
					ErrClockBack, behind, g.maxBack)
			}
			g.clockWaits.Add(1)
			return 0, behind, nil
		case tick == last:
			if seq+n > g.mask {
				g.seqWaits.Add(1)
				return 0, time.Duration(g.l.msOf(last+1)-nowMs) * time.Millisecond, nil
			}
			t, first = last, seq+1
		default:
			t, first = tick, rand.Int64N(min(seqSpread, g.mask+2-n))
		}
		switch {
		case t > ls.bound:
			return 0, 0, fmt.Errorf("%w: worker id %d may issue until %s", ErrLease, ls.id,
				time.UnixMilli(g.l.msOf(ls.bound+1)).UTC().Format(time.RFC3339Nano))
		case t < 0 || t>>g.l.TimeBits != 0:
			return 0, 0, fmt.Errorf("%w: the time is outside the layout's [%s, %s)", ErrLayout,
				g.l.Epoch.UTC().Format(time.RFC3339), g.l.End().UTC().Format(time.RFC3339))
		}
		if g.state.CompareAndSwap(old, t<<g.l.SeqBits|(first+n-1)) {
			if first <= busySeq && busySeq < first+n && g.now == nil {
				g.clock.markBusy() // once a unit at most: one ID holds busySeq
			}
			return t<<g.shift | ls.worker | (first + n - 1), 0, nil
		}
	}
}
