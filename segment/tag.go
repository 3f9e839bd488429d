package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// maxEnd keeps every range end far enough below math.MaxInt64 that the adds
// of failing callers on an exhausted segment can never wrap around.
const maxEnd = math.MaxInt64 - 1<<40

// MaxFloor is the highest floor Floor accepts: every ID leaf hands out is
// at most MaxFloor, so that the adds of callers on an exhausted segment can
// never wrap around.
const MaxFloor = maxEnd - 1

// Tag is one tag's double buffer. Look it up once with Allocator.Lookup and
// call Next or NextN on it: the hot path is one atomic add on the current
// segment. A Tag is safe for concurrent use.
type Tag struct {
	cur      atomic.Pointer[segment]
	a        *Allocator
	name     string
	vanished atomic.Bool // the row was missing at the last sync or load
	// lookup, while set, is the lookup of an unknown name that this tag's
	// first load answers; the tag joins the allocator's map only if that
	// load succeeds. Set before the tag is shared, cleared under mu.
	lookup *lookupCall

	// A tag in another mode (mode.go) has a generator instead of
	// segments; both are set before the tag is published, never changed.
	mode      string
	gen       Generator
	genIssued atomic.Int64
	genLast   atomic.Int64 // the highest ID the generator made

	mu       sync.Mutex
	next     *segment
	inflight *load // the queued or running load, nil when none
	init     bool  // a first segment was loaded
	pos      int   // slot of the current segment (0 or 1), as Leaf shows it
	step     int64 // size of the last segment loaded (adaptive)
	minStep  int64 // the table's step: the floor of step
	steps    int64 // step changes applied by an operator, to spot loads that read the old step
	lastLoad int64 // unix nanos of the last successful load
	// loadNanos is how long loads take, from plan to answer: the last
	// one's time, or half the previous value when that is more, so that
	// one fast load after slow ones does not forget them at once.
	loadNanos int64
	high      int64 // highest range end accepted: later ranges must start here or above
	floor     int64 // highest floor applied: no ID at or below it is served (skipTo)

	loads, loadFailures, guardTrips, guardRepairs int64
	retries, ambiguous                            int64 // Takes run again by the database; outcomes unknown
	lastErr                                       error
	lastErrAt                                     int64
	failures                                      int         // consecutive failed loads, for the retry backoff
	retry                                         func() bool // stops the pending retry after a failed load

	issued     int64 // IDs issued from retired segments and dedicated ranges
	skipped    int64 // cached IDs a floor skipped: never handed out
	lastIssued int64 // highest ID issued from a retired segment or dedicated range
	switchedAt int64 // unix nanos when cur became current
	dedicating int   // dedicated ranges being taken (dedicatedLocked)
	// markAt and markUsed are when cur's probe was crossed and the IDs
	// used then (markSeg: of which segment), for the rate at its
	// prefetch point: since the switch it would count the time the tag
	// was idle, and a burst on an idle tag would meet a step sized for
	// idleness.
	markSeg          *segment
	markAt, markUsed int64
	prevRate         float64 // IDs per second over the previous segment
}

// newTag makes the segment tag named name, before its first load.
func (a *Allocator) newTag(name string) *Tag {
	t := &Tag{a: a, name: name}
	t.cur.Store(a.empty)
	return t
}

// newTagOf makes the tag of a row, in the row's mode.
func (a *Allocator) newTagOf(row persist.Tag) *Tag {
	t := a.newTag(row.Name)
	if row.Mode == "" {
		return t
	}
	t.mode = row.Mode
	if a.opts.Modes == nil {
		t.gen = failing{fmt.Errorf("%w: tag %q is a %s tag and this server serves segment tags only (cluster features are off)",
			ErrMode, row.Name, row.Mode)}
		return t
	}
	g, err := a.opts.Modes.Generator(row.Mode, row.Layout)
	if err != nil {
		g = failing{fmt.Errorf("tag %q: %w", row.Name, err)}
	}
	t.gen = g
	return t
}

// Name is the tag's name.
func (t *Tag) Name() string { return t.name }

// Mode is the tag's mode: "" for segments, persist.ModeSnowflake.
func (t *Tag) Mode() string { return t.mode }

// genNext takes n IDs from the tag's generator.
func (t *Tag) genNext(ctx context.Context, n int64) (int64, error) {
	last, err := t.gen.NextN(ctx, n)
	if err == nil {
		t.genIssued.Add(n)
		t.noteGenLast(last)
	}
	return last, err
}

// noteGenLast records last as the generator's highest ID if it is.
func (t *Tag) noteGenLast(last int64) {
	for v := t.genLast.Load(); v < last && !t.genLast.CompareAndSwap(v, last); v = t.genLast.Load() {
	}
}

// Next returns the tag's next ID.
func (t *Tag) Next(ctx context.Context) (int64, error) {
	if t.gen != nil {
		return t.genNext(ctx, 1)
	}
	if h := t.a.held.Load(); h != nil {
		return 0, *h
	}
	s := t.cur.Load()
	id := s.value.Add(1)
	if id <= s.last {
		if id <= s.trigger { // one compare past the prefetch point
			if id == s.trigger {
				t.prefetch(s)
			} else if id == s.probe {
				t.markRate(s)
			}
		}
		return id, nil
	}
	return t.slow(ctx, 1)
}

// NextN reserves n consecutive IDs and returns the last one: the caller owns
// [last-n+1, last]. n must be in 1..max_batch.
func (t *Tag) NextN(ctx context.Context, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: got %d", ErrBadCount, n)
	}
	if n > t.a.opts.MaxBatch {
		return 0, fmt.Errorf("%w: %d > %d", ErrTooMany, n, t.a.opts.MaxBatch)
	}
	if t.gen != nil {
		return t.genNext(ctx, n)
	}
	if h := t.a.held.Load(); h != nil {
		return 0, *h
	}
	if last, ok := t.take(t.cur.Load(), n); ok {
		return last, nil
	}
	return t.slow(ctx, n)
}

// Non-blocking variants, for a caller that must never wait (a server's
// event loop serves many clients on one goroutine): Known (allocator.go)
// and TryNextN each do what their blocking counterpart (Lookup, NextN) does
// first, and report false where that one would go on to the database or
// wait. The caller then calls the blocking one where waiting is fine. See
// "Callers that must not wait" in doc.go.

// TryNextN is NextN without waiting: it takes n IDs from the current
// segment when they fit there and returns the last one, exactly as NextN's
// first step does, or from the next segment when it is loaded and the
// tag's lock is free to switch to it; otherwise it takes nothing and ok is
// false, and NextN must be called (it switches segments, takes a dedicated
// range or waits for a load). It never blocks nor calls the database; it
// may queue the prefetch, as NextN does.
func (t *Tag) TryNextN(n int64) (last int64, ok bool) {
	if n <= 0 || n > t.a.opts.MaxBatch {
		return 0, false
	}
	if t.gen != nil {
		last, ok = t.gen.TryNextN(n)
		if ok {
			t.genIssued.Add(n)
			t.noteGenLast(last)
		}
		return last, ok
	}
	if t.a.held.Load() != nil {
		return 0, false
	}
	s := t.cur.Load()
	if last, ok = t.take(s, n); ok {
		return last, true
	}
	// The next segment may be ready (loaded in a group with others): the
	// switch to it takes the tag's lock, held only briefly, yet never
	// waited for here.
	if !t.mu.TryLock() {
		return 0, false
	}
	switched := t.cur.Load() == s && t.next != nil && n <= t.next.size && !t.a.closed.Load()
	if switched {
		t.switchLocked()
	}
	t.mu.Unlock()
	if !switched {
		return 0, false
	}
	return t.take(t.cur.Load(), n)
}

// take takes n IDs from s with one atomic add, starting the prefetch when
// the add crosses its point. ok is false when they do not fit.
func (t *Tag) take(s *segment, n int64) (last int64, ok bool) {
	if n <= s.size {
		last = s.value.Add(n)
		if last <= s.last {
			if last-n < s.trigger { // one compare past the prefetch point
				if last >= s.trigger {
					t.prefetch(s)
				} else if s.probed(last, n) {
					t.markRate(s)
				}
			}
			return last, true
		}
	}
	return 0, false
}

// markRate notes when s's probe was crossed; called once per segment, by
// the caller whose add crossed it.
func (t *Tag) markRate(s *segment) {
	now := t.a.nowNanos()
	t.mu.Lock()
	if t.cur.Load() == s {
		t.markSeg, t.markAt, t.markUsed = s, now, s.issued()
	}
	t.mu.Unlock()
}

// prefetch starts the load of the next segment; called once per segment,
// by the caller whose add crossed the prefetch point.
func (t *Tag) prefetch(s *segment) {
	t.mu.Lock()
	if t.cur.Load() == s && t.next == nil && t.inflight == nil {
		t.startLoadLocked()
	}
	t.mu.Unlock()
}

// prepare queues the load of the next segment if the current one is spent
// and none is held or coming.
func (t *Tag) prepare() {
	if t.gen != nil {
		return
	}
	if s := t.cur.Load(); s.value.Load() < s.last {
		return
	}
	t.mu.Lock()
	if t.next == nil && t.inflight == nil {
		t.startLoadLocked()
	}
	t.mu.Unlock()
}

// slow serves a request the current segment cannot: it switches to the next
// segment, takes a dedicated range, or waits for the load in flight. While
// the store is away it fails at once instead, and a store that goes away
// releases the wait.
func (t *Tag) slow(ctx context.Context, n int64) (int64, error) {
	var timer *time.Timer
	waited := false
	for {
		s := t.cur.Load()
		if last, ok := t.take(s, n); ok {
			return last, nil
		}
		t.mu.Lock()
		if t.a.closed.Load() {
			t.mu.Unlock()
			return 0, ErrClosed
		}
		if t.cur.Load() != s {
			t.mu.Unlock()
			continue
		}
		if t.next != nil && n <= t.next.size {
			t.switchLocked()
			t.mu.Unlock()
			continue
		}
		st := t.a.h.state.Load()
		if st.away {
			if t.next == nil {
				t.a.parkIfAwayLocked(t) // loaded once the store is back
			}
			t.mu.Unlock()
			t.a.h.refused.Add(1)
			return 0, t.a.awayError(t.name)
		}
		if t.init && (t.next != nil || n > t.nextStepLocked(t.a.nowNanos())) {
			// n is larger than any segment held or about to be loaded.
			if !waited {
				t.a.waits.Add(1)
			}
			t.a.waitedLoads.Add(1) // the dedicated range: this request waits for it alone
			id, err := t.dedicatedLocked(ctx, n)
			t.mu.Unlock()
			return id, err
		}
		l := t.inflight
		if l == nil {
			if l = t.startLoadLocked(); l == nil {
				t.mu.Unlock()
				return 0, ErrClosed
			}
		}
		t.promoteLocked(l)
		if !l.waited {
			l.waited = true
			t.a.waitedLoads.Add(1)
		}
		t.mu.Unlock()

		if !waited {
			waited = true
			t.a.waits.Add(1)
		}
		if timer == nil {
			timer = time.NewTimer(t.a.opts.LoadTimeout)
			defer timer.Stop()
		}
		select {
		case <-l.done:
		case <-timer.C:
			return 0, t.timeoutError()
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, t.name, ctx.Err())
		case <-st.gone:
			// Another call found the store away: this load would most
			// likely end at its deadline too, so the request is answered
			// now, unless the load has ended meanwhile.
			select {
			case <-l.done:
			default:
				return 0, t.a.awayError(t.name)
			}
		}
		if l.err != nil && !errors.Is(l.err, errDiscarded) {
			t.mu.Lock()
			err := t.loadErrorLocked(l.err)
			t.mu.Unlock()
			return 0, err
		}
	}
}

// switchLocked makes the next segment current.
func (t *Tag) switchLocked() {
	now := t.a.nowNanos()
	old := t.cur.Load()
	used := old.issued()
	if t.init && used > 0 && t.switchedAt > 0 {
		t.prevRate = rate(used, now-t.switchedAt)
	}
	t.issued += used
	if last, ok := old.lastIssued(); ok {
		t.lastIssued = max(t.lastIssued, last)
	}
	t.cur.Store(t.next)
	t.next = nil
	t.markSeg = nil // the retired segment's mark: let it go
	if old != t.a.empty {
		t.pos ^= 1 // the first segment takes slot 0, as in Leaf
	}
	t.switchedAt = now
}

// timeoutError is the error of a request that waited load_timeout.
func (t *Tag) timeoutError() error {
	t.mu.Lock()
	last := t.lastErr
	t.mu.Unlock()
	if last != nil {
		return fmt.Errorf("%w: tag %q: no segment within %s (last error: %v)", ErrUnavailable, t.name, t.a.opts.LoadTimeout, last)
	}
	return fmt.Errorf("%w: tag %q: no segment within %s", ErrUnavailable, t.name, t.a.opts.LoadTimeout)
}
