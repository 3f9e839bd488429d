package segment

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// Loading a tag's next segment. A load is queued (startLoadLocked; after an
// outage, as a background reload: reloadLocked) on the loader pool
// (pool.go); the worker that takes it plans it (startRun, planLocked) and
// takes the ranges of every load it took in one store round trip
// (loadGroup), which tells the store's health each answer (health.go)
// around each tag's finishing its own (finishLoad): the range is checked
// and becomes the next segment, or the failure is recorded and the load
// retried (scheduleRetryLocked). A request for more IDs than a segment
// holds takes a range of its own, at once (dedicatedLocked).

// errDiscarded marks a load whose range ended up below a dedicated range
// taken meanwhile: not an error for waiters, who simply load again.
var errDiscarded = errors.New("segment: loaded range is below a newer one")

// load is one segment load; done is closed when it ends, after err is set.
type load struct {
	done chan struct{}
	err  error
	// Guarded by the tag's mu:
	low     bool // queued as a background reload, not yet promoted
	started bool // a worker runs it: the tag's other queue entry, if any, is spent
	waited  bool // a request waited for it (counted in Stats.WaitedLoads)
}

// plannedLoad is one load of a group: the tag, its load, and what was
// decided before the store call.
type plannedLoad struct {
	t      *Tag
	l      *load
	size   int64 // 0: the table's step, for the first segment
	h0     int64 // t.high when the request was sent
	first  bool
	create int64 // the step to create the row with, for a lookup with auto-create
	d0     int64 // DropCached calls when it was planned: a range across one is refused
	s0     int64 // the tag's steps when it was planned
	at     int64 // unix nanos when it was planned: its load time ends at the answer
}

// startLoadLocked queues a load of the next segment. It returns nil when the
// allocator is closed.
func (t *Tag) startLoadLocked() *load {
	l := &load{done: make(chan struct{})}
	t.inflight = l
	if !t.a.pool.push(t) {
		t.inflight = nil
		return nil
	}
	return l
}

// reloadLocked queues a background reload of the next segment (after an
// outage), which requests do not wait behind.
func (t *Tag) reloadLocked() {
	l := &load{done: make(chan struct{}), low: true}
	t.inflight = l
	if !t.a.pool.pushLow(t) {
		t.inflight = nil
	}
}

// promoteLocked moves l, the load a request is about to wait for, ahead of
// the background reloads if it is one of them and has not started.
func (t *Tag) promoteLocked(l *load) {
	if l.low && !l.started {
		l.low = false
		t.a.pool.push(t)
	}
}

// runLoads is a loader worker's job: the loads of ts, as one store round
// trip. While the store is away no load reaches it: each tag is parked
// until the store is back (a lookup fails at once), and its load ends at
// once.
func (a *Allocator) runLoads(ts []*Tag) {
	group := make([]plannedLoad, 0, len(ts))
	for _, t := range ts {
		if p, ok := t.startRun(); ok {
			group = append(group, p)
		}
	}
	a.loadGroup(group)
}

// startRun starts the tag's queued load for a worker, unless another
// queue entry ran it; ok is false when there is nothing to send.
func (t *Tag) startRun() (p plannedLoad, ok bool) {
	t.mu.Lock()
	l := t.inflight
	if l == nil || l.started {
		t.mu.Unlock()
		return plannedLoad{}, false // the tag's entry in the other queue ran this load
	}
	l.started = true
	c := t.lookup
	if c != nil && t.a.h.state.Load().away || c == nil && t.a.parkIfAwayLocked(t) {
		t.inflight = nil
		t.lookup = nil
		l.err = t.a.awayError(t.name)
		close(l.done)
		t.mu.Unlock()
		if c != nil {
			t.a.endLookup(c, t, t.a.refuseName(t.name))
		}
		return plannedLoad{}, false
	}
	p = t.planLocked(l)
	t.mu.Unlock()
	return p, true
}

// planLocked decides what l, the tag's load in flight, asks of the store.
func (t *Tag) planLocked(l *load) plannedLoad {
	p := plannedLoad{t: t, l: l, first: !t.init, h0: t.high, d0: t.a.drops.Load(), s0: t.steps, at: t.a.nowNanos()}
	if !p.first {
		p.size = t.nextStepLocked(p.at)
	}
	if t.lookup != nil && t.a.opts.AutoCreate {
		p.create = t.a.opts.DefaultStep
	}
	return p
}

// load takes the next segment from the store for l, the tag's load in
// flight, and ends it, outside the pool (a probe).
func (t *Tag) load(l *load) {
	t.mu.Lock()
	p := t.planLocked(l)
	t.mu.Unlock()
	t.a.loadGroup([]plannedLoad{p})
}

// probeLoad runs a load of t now, outside the pool, if t still needs one;
// it reports whether it did.
func (t *Tag) probeLoad() bool {
	t.mu.Lock()
	if t.next != nil || t.inflight != nil || t.a.closed.Load() {
		t.mu.Unlock()
		return false
	}
	l := &load{done: make(chan struct{}), started: true}
	t.inflight = l
	t.mu.Unlock()
	t.load(l)
	return true
}

// loadGroup takes the segments of group from the store in one round trip
// (a Take for a single load of a known tag, a TakeBatch otherwise) and
// ends each load.
func (a *Allocator) loadGroup(group []plannedLoad) {
	if len(group) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.LoadTimeout)
	mark := a.mark()
	res := a.observedTakes(ctx, group)
	cancel()
	// Judged before any outcome is noted: one noted answer would make the
	// others' failures look like those of a store that answers.
	outage := make([]bool, len(group))
	for i := range group {
		outage[i] = a.outage(context.Background(), res[i].Err, mark)
	}
	for i, p := range group {
		// An answer is noted before the load's waiters learn it (no lock
		// held), so that no request served after it finds the store away;
		// the store going away, once they have it: it releases the other
		// requests waiting, not these.
		if !outage[i] {
			a.noteOutcome(res[i].Err, false)
		}
		p.t.finishLoad(p, res[i], outage[i])
		if outage[i] {
			a.noteOutcome(res[i].Err, true)
		}
	}
}

// observedTakes takes the ranges of group: one Take for a single load of
// a known tag, one TakeBatch otherwise, its duration observed once per
// load (Options.Observe).
func (a *Allocator) observedTakes(ctx context.Context, group []plannedLoad) []persist.TakeResult {
	a.loadRounds.Add(1)
	if len(group) == 1 && group[0].create == 0 {
		r, err := a.observedTake(ctx, group[0].t.name, group[0].size)
		return []persist.TakeResult{{Range: r, Err: err}}
	}
	reqs := make([]persist.TakeRequest, len(group))
	for i, p := range group {
		reqs[i] = persist.TakeRequest{Tag: p.t.name, Size: p.size, Create: p.create}
	}
	start := a.opts.Now()
	res := a.store.TakeBatch(ctx, reqs)
	if a.opts.Observe != nil {
		d := a.opts.Now().Sub(start)
		for _, r := range res {
			a.opts.Observe(d, r.Err)
		}
	}
	return res
}

// observedTake is Store.Take with its duration observed (Options.Observe).
func (a *Allocator) observedTake(ctx context.Context, tag string, size int64) (persist.Range, error) {
	start := a.opts.Now()
	r, err := a.store.Take(ctx, tag, size)
	if a.opts.Observe != nil {
		a.opts.Observe(a.opts.Now().Sub(start), err)
	}
	return r, err
}

// finishLoad ends p's load with res, the store's answer; outage: res's
// failure makes the store away (loadGroup notes it once this returns).
func (t *Tag) finishLoad(p plannedLoad, res persist.TakeResult, outage bool) {
	a := t.a
	r, err := res.Range, res.Err
	t.mu.Lock()
	t.noteTakeLocked(r, err)
	if err == nil {
		err = t.checkLocked(r, p.h0)
	}
	if err == nil && (r.Start < t.high || a.drops.Load() != p.d0) {
		err = errDiscarded
	}
	lookup := t.lookup != nil
	if err == nil {
		now := a.nowNanos()
		t.next = newSegment(r.Start, r.End, a.opts.PrefetchAt, now)
		t.high = r.End
		t.tableStepLocked(r.Step, p.s0)
		t.step = max(r.Size(), t.minStep)
		if p.first {
			t.step = r.Size()
			t.init = true
		}
		t.lastLoad = now
		t.loadNanos = max(now-p.at, t.loadNanos/2)
		t.loads++
		t.failures = 0
		t.vanished.Store(false)
	} else if !errors.Is(err, errDiscarded) && !lookup {
		t.failLocked(err)
	}
	t.inflight = nil
	p.l.err = err
	close(p.l.done)
	if err != nil && t.next == nil && !lookup {
		switch {
		case errors.Is(err, errDiscarded):
			t.startLoadLocked()
		case outage:
			// This failure makes the store away, if it is not already:
			// the probe, or the end of the episode, loads the tag.
			a.parkLocked(t)
		default:
			t.scheduleRetryLocked()
		}
	}
	var lookupErr error
	c := t.lookup
	t.lookup = nil
	switch {
	case lookup && errors.Is(err, errDiscarded):
		// A floor (or a drop) reached the tag while its first load was on
		// its way: the range is a gap, and the name is looked up again,
		// its first load then starting above what the store now holds.
		lookupErr = errLookupAgain
	case lookup && err != nil:
		lookupErr = t.lookupErrorLocked(err)
	case lookup && !res.Created:
		lookupErr = errLookupAgain
	}
	t.mu.Unlock()
	if lookup {
		if err == nil && res.Created {
			a.noteCreated("tag", t.name, "step", p.create)
		}
		a.endLookup(c, t, lookupErr)
	}
}

// noteTakeLocked counts what a Take met on the way: the times the
// database made it run again (Range.Retries), an outcome left unknown
// (persist.ErrAmbiguous: the range is never served, the next Take starts
// above it if it was taken), and a repair by the store's persistent guard
// (logged): the row had gone below IDs handed out before (by any server,
// this one included), and the store moved the range, and max_id, above
// them.
func (t *Tag) noteTakeLocked(r persist.Range, err error) {
	if errors.Is(err, persist.ErrAmbiguous) {
		t.ambiguous++
		t.a.ambiguous.Add(1)
		t.a.log.Warn("the database may or may not have taken a range (the connection was lost once its commit was sent); the range is never served, the next load starts above it",
			"tag", t.name, "err", err)
	}
	if err != nil {
		return
	}
	t.retries += int64(r.Retries)
	t.a.retries.Add(int64(r.Retries))
	if !r.Repaired {
		return
	}
	t.guardRepairs++
	t.a.guardRepairs.Add(1)
	t.a.log.Warn("the database answered a range below IDs already handed out (row deleted and re-created, restored, or max_id lowered by hand); the persistent guard moved it above them",
		"tag", t.name, "database_start", r.Answered, "start", r.Start, "end", r.End)
}

// checkLocked applies the monotonic guard to a range from the database.
// h0 is t.high when the request was sent: the database's max_id only grows,
// so an answer below h0 means someone lowered it.
func (t *Tag) checkLocked(r persist.Range, h0 int64) error {
	if r.Start < h0 {
		t.guardTrips++
		t.a.guardTrips.Add(1)
		t.a.log.Error("refused a range below IDs already reserved: max_id was lowered in the database",
			"tag", t.name, "start", r.Start, "end", r.End, "reserved_up_to", h0)
		return fmt.Errorf("%w: tag %q: database gave [%d, %d), IDs up to %d are reserved; raise max_id above %d",
			ErrGuard, t.name, r.Start, r.End, h0-1, h0-1)
	}
	if r.End > maxEnd {
		return fmt.Errorf("%w: tag %q", ErrOverflow, t.name)
	}
	return nil
}

// lookupErrorLocked is the error of the lookup of an unknown name whose
// first load failed with err.
func (t *Tag) lookupErrorLocked(err error) error {
	switch {
	case errors.Is(err, persist.ErrNotFound):
		return fmt.Errorf("%w: %q (auto-create is off)", ErrUnknownTag, t.name)
	case errors.Is(err, persist.ErrDenied):
		return fmt.Errorf("%w: %q, and it cannot be created: %w", ErrUnknownTag, t.name, err)
	case isStoreFault(err):
		t.a.keepLookup(t.name)
	}
	return t.loadErrorLocked(err)
}

// failLocked records a failed database call.
func (t *Tag) failLocked(err error) {
	t.loadFailures++
	t.failures++
	t.lastErr = err
	t.lastErrAt = t.a.nowNanos()
	t.a.loadFailures.Add(1)
	if errors.Is(err, persist.ErrNotFound) && !t.vanished.Swap(true) {
		t.a.log.Warn("tag row is gone from the database; serving the IDs already reserved", "tag", t.name)
	}
	t.a.loadFailLog.Log("tag", t.name, "err", err)
}

// scheduleRetryLocked retries a failed load after an exponential backoff, so
// a tag refills on its own once the database is back.
func (t *Tag) scheduleRetryLocked() {
	if t.retry != nil || t.a.closed.Load() {
		return
	}
	d := t.a.opts.RetryBackoff << min(max(t.failures-1, 0), 8)
	d = min(d, t.a.opts.MaxRetryBackoff)
	t.retry = t.a.opts.AfterFunc(d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.retry = nil
		if t.next == nil && t.inflight == nil && !t.a.closed.Load() {
			t.startLoadLocked()
		}
	})
}

// loadErrorLocked turns a failed load into the error a caller sees.
func (t *Tag) loadErrorLocked(err error) error {
	switch {
	case errors.Is(err, ErrGuard), errors.Is(err, ErrOverflow), errors.Is(err, ErrClosed), errors.Is(err, ErrStoreAway):
		return err
	case errors.Is(err, persist.ErrOverflow):
		// The row's max_id is at the end of the range: no retry helps.
		return fmt.Errorf("%w: tag %q: %w", ErrOverflow, t.name, err)
	case errors.Is(err, persist.ErrNotFound):
		return fmt.Errorf("%w: tag %q: its cached IDs are spent; re-create the row with max_id above %d",
			ErrTagGone, t.name, t.high-1)
	default:
		return fmt.Errorf("%w: tag %q: %w", ErrUnavailable, t.name, err)
	}
}

// dedicatedLocked takes a range of exactly n for one request, then retires
// every cached segment below it so later IDs stay higher. t.mu is held on
// entry and on return, but not during the database call, so the hot path's
// prefetch never waits on the store.
//
// The range is checked against the tag's floor and drop mark as they are
// when the answer arrives, not as they were when it was asked for: a floor
// applied meanwhile (it was raised in the store after this range was
// taken) makes the range a gap, and a range of its own is taken again,
// above the floor, which the store holds by then.
func (t *Tag) dedicatedLocked(ctx context.Context, n int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.a.opts.LoadTimeout)
	defer cancel()
	var r persist.Range
	var err error
	for attempt := 1; ; attempt++ {
		h0, s0 := t.high, t.steps
		d0 := t.a.drops.Load()
		t.dedicating++ // Close gives nothing back under it
		t.mu.Unlock()
		r, err = t.a.take(ctx, t.name, n)
		t.mu.Lock()
		t.dedicating--
		t.noteTakeLocked(r, err)
		if err == nil {
			err = t.checkLocked(r, h0)
		}
		if err == nil && t.a.drops.Load() != d0 {
			err = fmt.Errorf("%w: tag %q: cached IDs were dropped during the load", ErrUnavailable, t.name)
		}
		if err == nil && r.Start <= t.floor {
			t.a.log.Info("a range taken for INCRBY is at or below a floor applied while it was taken; taking another",
				"tag", t.name, "start", r.Start, "end", r.End, "floor", t.floor)
			if attempt < maxFloorRetakes {
				continue
			}
			err = fmt.Errorf("%w: tag %q: ranges taken at or below the floor %d %d times", ErrUnavailable, t.name, t.floor, attempt)
		}
		if err == nil {
			t.tableStepLocked(r.Step, s0)
		}
		break
	}
	if err != nil {
		t.failLocked(err)
		if isStoreFault(err) && t.next == nil {
			t.a.parkIfAwayLocked(t) // the probe loads it
		}
		return 0, t.loadErrorLocked(err)
	}
	if cur := t.cur.Load(); cur.start < r.Start {
		t.issued += cur.issued()
		if last, ok := cur.lastIssued(); ok {
			t.lastIssued = max(t.lastIssued, last)
		}
		t.cur.Store(emptySegment(r.End))
		t.pos ^= 1
		t.switchedAt = t.a.nowNanos()
	}
	if t.next != nil && t.next.start < r.Start {
		t.next = nil
	}
	t.high = max(t.high, r.End)
	t.issued += n
	t.lastIssued = max(t.lastIssued, r.End-1)
	t.vanished.Store(false)
	if t.next == nil && t.inflight == nil {
		t.startLoadLocked() // refill now, so the next request need not wait
	}
	return r.End - 1, nil
}

// maxFloorRetakes bounds the dedicated ranges one INCRBY takes when
// floors keep arriving above them.
const maxFloorRetakes = 3

// take is Store.Take with its duration observed and its outcome noted.
func (a *Allocator) take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	mark := a.mark()
	r, err := a.observedTake(ctx, tag, size)
	a.noteStore(ctx, err, mark)
	return r, err
}
