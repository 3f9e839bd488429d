package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// The store's health: see "A database that is away" in doc.go.

// storeState is one snapshot of the store's health, replaced as a whole.
type storeState struct {
	away  bool
	since time.Time     // start of the episode; zero when the store is up
	gone  chan struct{} // up only: closed when the store goes away
}

type storeError struct {
	err error
	at  time.Time
}

// health is the allocator's view of its store.
type health struct {
	state   atomic.Pointer[storeState]
	lastErr atomic.Pointer[storeError] // kept after recovery, for the record

	mu         sync.Mutex
	parked     map[*Tag]struct{} // tags that need a load once the store is back
	lookupName string            // the last unknown name whose lookup failed or was refused
	probing    bool              // a probe is scheduled or running
	stop       func() bool       // cancels the scheduled probe
	backoff    time.Duration     // wait before the next probe
	wg         sync.WaitGroup    // the scheduled or running probe

	answered                 atomic.Int64 // store calls that got an answer
	outages, probes, refused atomic.Int64
}

func (h *health) init() {
	h.state.Store(&storeState{gone: make(chan struct{})})
	h.parked = map[*Tag]struct{}{}
}

// isStoreFault tells a failure of the store from an answer about one tag
// (no row, an overflow, a range the guard refused or discarded, an argument
// refused, a statement the user lacks a privilege for): only the first
// makes the store away.
func isStoreFault(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, persist.ErrNotFound), errors.Is(err, persist.ErrOverflow), errors.Is(err, persist.ErrInvalid),
		errors.Is(err, persist.ErrDenied),
		errors.Is(err, ErrGuard), errors.Is(err, ErrOverflow), errors.Is(err, errDiscarded),
		errors.Is(err, ErrBadTag), errors.Is(err, ErrUnknownTag):
		return false
	}
	return true
}

// mark is taken before a store call, for outage.
func (a *Allocator) mark() int64 { return a.h.answered.Load() }

// outage reports whether err, the outcome of a store call begun at mark
// under ctx, means that the store is away: a failure of the store itself
// (not an answer about one tag, not the caller giving up) while it
// answered no other call. A database that answers other calls meanwhile is
// slow, or holds one row locked: that call failed, not the store.
func (a *Allocator) outage(ctx context.Context, err error, mark int64) bool {
	if !isStoreFault(err) || errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return false
	}
	return a.h.answered.Load() == mark
}

// noteStore records the outcome of a store call begun at mark under ctx.
func (a *Allocator) noteStore(ctx context.Context, err error, mark int64) {
	a.noteOutcome(err, a.outage(ctx, err, mark))
}

// noteOutcome records err, the outcome of a store call that outage
// judged.
func (a *Allocator) noteOutcome(err error, outage bool) {
	switch {
	case outage:
		a.storeFailed(err)
	case !isStoreFault(err):
		a.storeSucceeded()
	case !errors.Is(err, context.Canceled):
		a.h.lastErr.Store(&storeError{err: err, at: a.opts.Now()})
	}
}

// storeFailed records a failed store call. The first one since the store
// last answered starts an episode: waiters are released and a probe is
// scheduled.
func (a *Allocator) storeFailed(err error) {
	now := a.opts.Now()
	a.h.lastErr.Store(&storeError{err: err, at: now})
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	st := a.h.state.Load()
	if st.away {
		return
	}
	a.h.state.Store(&storeState{away: true, since: now})
	close(st.gone)
	a.h.outages.Add(1)
	a.h.backoff = a.opts.RetryBackoff
	a.log.Warn("database away: requests that need it answer TRYAGAIN at once until a probe reaches it",
		"err", err, "first_probe_in", a.h.backoff, "max_probe_interval", a.opts.MaxRetryBackoff)
	a.scheduleProbeLocked()
}

// storeSucceeded records a store call that got an answer. If the store was
// away, the episode ends and the parked tags are queued for loading.
func (a *Allocator) storeSucceeded() {
	a.h.answered.Add(1)
	if !a.h.state.Load().away {
		return // the common case: no lock
	}
	a.h.mu.Lock()
	st := a.h.state.Load()
	if !st.away {
		a.h.mu.Unlock()
		return
	}
	a.h.state.Store(&storeState{gone: make(chan struct{})})
	if a.h.probing && a.h.stop() {
		a.h.probing = false
		a.h.wg.Done()
	}
	parked := a.h.parked
	a.h.parked = map[*Tag]struct{}{}
	a.h.lookupName = ""
	a.h.mu.Unlock()
	a.log.Info("database reachable again", "away_for", a.opts.Now().Sub(st.since),
		"probes", a.h.probes.Load(), "tags_to_load", len(parked))
	for t := range parked {
		t.mu.Lock()
		if t.next == nil && t.inflight == nil {
			t.reloadLocked()
		}
		t.mu.Unlock()
	}
}

// parkLocked records that t needs a load once the store is back; t.mu is
// held. The caller has seen the store away, or a failure of it that it is
// about to note (which makes it away): the episode's end loads t.
func (a *Allocator) parkLocked(t *Tag) {
	a.h.mu.Lock()
	a.h.parked[t] = struct{}{}
	a.h.mu.Unlock()
}

// parkIfAwayLocked parks t if the store is away, and reports whether it
// did; t.mu is held.
func (a *Allocator) parkIfAwayLocked(t *Tag) bool {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	if !a.h.state.Load().away {
		return false
	}
	a.h.parked[t] = struct{}{}
	return true
}

// refuseName answers a lookup of an unknown name while the store is away,
// and keeps the name for the probe.
func (a *Allocator) refuseName(name string) error {
	a.keepLookup(name)
	a.h.refused.Add(1)
	return a.awayError(name)
}

// keepLookup keeps name, whose lookup the store did not answer, for the
// probe: its lookup tests reads and, when it creates the tag, writes.
func (a *Allocator) keepLookup(name string) {
	a.h.mu.Lock()
	a.h.lookupName = name
	a.h.mu.Unlock()
}

// awayError is the error of a request that needs the store while it is
// away: since when, and the last store error (of any tag).
func (a *Allocator) awayError(name string) error {
	cause := errors.New("no answer")
	if e := a.h.lastErr.Load(); e != nil {
		cause = e.err
	}
	since := ""
	if at := a.h.state.Load().since; !at.IsZero() {
		since = " since " + at.UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: tag %q: %w%s; last error: %w", ErrUnavailable, name, ErrStoreAway, since, cause)
}

// scheduleProbeLocked schedules the next probe after the current backoff,
// unless one is scheduled or running; a.h.mu is held.
func (a *Allocator) scheduleProbeLocked() {
	if a.h.probing || a.closed.Load() {
		return
	}
	a.h.probing = true
	a.h.wg.Add(1)
	a.h.stop = a.opts.AfterFunc(a.h.backoff, a.probe)
}

// probe makes one store call to learn whether the store is back, then
// schedules the next one, with a doubled backoff, if it is still away.
func (a *Allocator) probe() {
	defer a.h.wg.Done()
	a.h.probes.Add(1)
	a.probeOnce()
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.h.probing = false
	if a.h.state.Load().away {
		a.h.backoff = min(2*a.h.backoff, a.opts.MaxRetryBackoff)
		a.scheduleProbeLocked()
	}
}

// probeOnce is the probe's call: the load of a parked tag, which is a
// write as every load is; else the lookup of a name refused while away;
// else a read of the tag list. Its outcome updates the state as any call.
func (a *Allocator) probeOnce() {
	for {
		a.h.mu.Lock()
		var t *Tag
		for t = range a.h.parked {
			delete(a.h.parked, t)
			break
		}
		name := a.h.lookupName
		a.h.mu.Unlock()
		if t == nil {
			if name == "" || !a.probeLookup(name) {
				_ = a.sync(context.Background(), a.opts.LoadTimeout)
			}
			return
		}
		if t.probeLoad() {
			return
		}
		// That tag no longer needs a load: try the next.
	}
}

// probeLookup resolves name as a lookup would, unless it is known or being
// looked up; it reports whether it did.
func (a *Allocator) probeLookup(name string) bool {
	a.mu.Lock()
	if _, busy := a.pending[name]; busy || a.tags.get(name) != nil {
		a.mu.Unlock()
		return false
	}
	_, _ = a.leadLookup(context.Background(), name, nil)
	return true
}

// stopProbes cancels the scheduled probe and waits for a running one.
func (a *Allocator) stopProbes() {
	a.h.mu.Lock()
	if a.h.probing && a.h.stop() {
		a.h.probing = false
		a.h.wg.Done()
	}
	a.h.mu.Unlock()
	a.h.wg.Wait()
}
