package segment

import (
	"sync"
	"sync/atomic"
	"time"
)

// The right to serve cached segment IDs. A server that shares its store
// with others may serve from its cache only while the cluster registry
// vouches that it has applied every floor acknowledged so far: while its
// lease is current (package cluster). The invariant that keeps floors and
// uniqueness, stated once:
//
//	An ID is served only if it lies above every floor acknowledged before
//	the request arrived, and the server's right to serve from its cache
//	(its registry lease; for Snowflake tags, the worker id's bound) was
//	current when the request arrived.
//
// The first half is the node's: it applies every floor before it confirms
// it, and a range that a store answers is checked against the tag's floor
// as it is when the answer arrives. The second half is checked here, on
// the request path, not by a timer: a process stopped (SIGSTOP) or a
// machine suspended past its lease wakes up with requests already read
// and timers not yet run. The connection layer reads the clock once per
// round of its event loop, after the reads and before the commands run,
// and calls Admit with it: every request of the round arrived before that
// reading, so if the lease is still current then, it was current when
// each arrived. A lease that has run out holds the allocator (as Hold)
// until the node renews it and applies the changes made meanwhile.
//
// The clock is time.Now's: its monotonic reading, which does not count
// the time a machine is suspended, and its wall reading, which does; the
// lease ends when either passes its end, so a suspended machine finds its
// lease over when it wakes. A wall clock set forward only ends it early.
// The one assumption is that clocks run at the same rate, within the
// lease's margin (cluster.Options.Margin), not that they agree.

// lease is a current right to serve, until until (its monotonic and wall
// readings both); why is what requests get once it has run out.
type lease struct {
	until time.Time
	wall  int64 // until.UnixNano()
	why   error
}

// gate is the allocator's right to serve.
type gate struct {
	mu    sync.Mutex            // orders Serve, Hold, Release and a lapse
	lease atomic.Pointer[lease] // nil: no end (not held, or held until told)
	// lapses counts the leases that Admit found over.
	lapses atomic.Int64
}

// Serve lets the segment tags serve from their caches until until, on the
// clock that the connection layer passes to Admit (time.Now in a server):
// requests read after it are refused with why until the next Serve.
// Package cluster calls it once a renewal of its lease is committed and
// the changes made before it are applied.
func (a *Allocator) Serve(until time.Time, why error) {
	a.gate.mu.Lock()
	defer a.gate.mu.Unlock()
	a.gate.lease.Store(&lease{until: until, wall: until.UnixNano(), why: why})
	a.held.Store(nil)
}

// Admit is the request path's check of the lease: now is a clock reading
// taken after the requests about to be served were read. When the lease
// has run out by then, every segment tag is held, as by Hold, until the
// next Serve: those requests, and any after them, are refused. Without a
// lease (Release, or never served under one) it does nothing. It costs a
// pointer load and two comparisons while the lease is current.
func (a *Allocator) Admit(now time.Time) {
	l := a.gate.lease.Load()
	if l == nil || now.Before(l.until) && now.UnixNano() < l.wall {
		return
	}
	a.gate.mu.Lock()
	defer a.gate.mu.Unlock()
	if a.gate.lease.Load() != l {
		return // served again, or held, meanwhile
	}
	a.gate.lease.Store(nil)
	a.held.Store(&l.why)
	a.gate.lapses.Add(1)
	a.log.Warn("lease over when requests arrived: serving nothing cached until it is renewed",
		"lease_end", l.until.Format(time.RFC3339Nano), "now", now.Format(time.RFC3339Nano))
}

// admitNow is Admit on the allocator's clock, read only under a lease.
func (a *Allocator) admitNow() {
	if a.gate.lease.Load() != nil {
		a.Admit(a.opts.Now())
	}
}

// Lapses is how many times Admit found the lease over.
func (a *Allocator) Lapses() int64 { return a.gate.lapses.Load() }

// Hold makes every segment tag refuse to hand out IDs with err (cached or
// not) until Serve or Release: the cluster registry holds a server that
// is not registered, or whose lease lapsed, since a floor may have been
// set meanwhile that it has not seen. Tags in other modes are not held:
// their generators stop on their own.
func (a *Allocator) Hold(err error) {
	a.gate.mu.Lock()
	defer a.gate.mu.Unlock()
	a.gate.lease.Store(nil)
	a.held.Store(&err)
}

// Release ends Hold, with no lease: the tags serve until held again (a
// server that runs alone).
func (a *Allocator) Release() {
	a.gate.mu.Lock()
	defer a.gate.mu.Unlock()
	a.gate.lease.Store(nil)
	a.held.Store(nil)
}

// Held is the error of Hold, or of a lease over, nil when not held.
func (a *Allocator) Held() error {
	if h := a.held.Load(); h != nil {
		return *h
	}
	return nil
}
