package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Generator hands out the IDs of one tag from ranges it leases with
// INCRBY. Create it with New; it is safe for concurrent use.
type Generator struct {
	cur  atomic.Pointer[lease]
	rdb  redis.UniversalClient
	tag  string
	opts Options

	// ctx is the lease requests' context; Close cancels it, which also
	// releases the callers waiting for a lease.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	next      *lease   // the lease after cur, nil until it arrives
	inflight  *request // the lease request under way, nil when none
	size      int64    // the adaptive size: of the last lease requested
	askedAt   time.Time
	high      int64 // last ID of the highest lease accepted
	closed    bool
	leases    int64
	waits     int64
	failures  int64
	lastError error
}

// request is one INCRBY under way; done is closed when it ends, after err
// is set.
type request struct {
	done chan struct{}
	err  error
}

// New returns the generator of tag on rdb: a go-redis client of a leaf
// server, or of Redis (the tag is then a key holding an integer, or none).
// Nothing is sent until the first ID is asked for. Close the generator when
// done; it does not close rdb.
func New(rdb redis.UniversalClient, tag string, opts Options) (*Generator, error) {
	if tag == "" {
		return nil, errors.New("client: empty tag")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{rdb: rdb, tag: tag, opts: o}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.cur.Store(emptyLease())
	return g, nil
}

// Tag is the generator's tag.
func (g *Generator) Tag() string { return g.tag }

// Next returns the next ID: one atomic add while the current lease lasts.
// When no ID is left it waits for the lease under way (asking for one when
// none is), up to ctx's end, and returns an error wrapping ErrUnavailable,
// ErrRefused, ErrBadLease or ErrClosed when none can be had.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	l := g.cur.Load()
	id := l.value.Add(1)
	if id <= l.last {
		if id == l.trigger {
			g.prefetch(l)
		}
		return id, nil
	}
	return g.slow(ctx, 1)
}

// NextN takes n consecutive IDs and returns the last one: the caller owns
// [last-n+1, last]. n must be in 1..MaxLease. The IDs come from the current
// lease when they fit; otherwise the rest of it is skipped and they come
// from the next one, of at least n IDs.
func (g *Generator) NextN(ctx context.Context, n int64) (int64, error) {
	if n < 1 || n > g.opts.MaxLease {
		return 0, fmt.Errorf("%w: %d is not in 1..%d", ErrBadCount, n, g.opts.MaxLease)
	}
	l := g.cur.Load()
	if last, crossed, ok := l.take(n); ok {
		if crossed {
			g.prefetch(l)
		}
		return last, nil
	}
	return g.slow(ctx, n)
}

// prefetch asks for the lease after l, once l's prefetch point is passed.
func (g *Generator) prefetch(l *lease) {
	g.mu.Lock()
	if g.cur.Load() == l && g.next == nil && g.inflight == nil && !g.closed {
		g.requestLocked(0)
	}
	g.mu.Unlock()
}

// slow serves n IDs when the current lease cannot: it moves to the next
// lease, or waits for the one under way, asking for one when none is.
func (g *Generator) slow(ctx context.Context, n int64) (int64, error) {
	waited := false
	for {
		l := g.cur.Load()
		if last, crossed, ok := l.take(n); ok {
			if crossed {
				g.prefetch(l)
			}
			return last, nil
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return 0, fmt.Errorf("%w: tag %q", ErrClosed, g.tag)
		}
		if g.cur.Load() != l {
			g.mu.Unlock()
			continue
		}
		if g.next != nil {
			// What l has left cannot serve n: those IDs are skipped.
			g.cur.Store(g.next)
			g.next = nil
			g.mu.Unlock()
			continue
		}
		r := g.inflight
		if r == nil {
			r = g.requestLocked(n)
		}
		if !waited {
			waited = true
			g.waits++
		}
		g.mu.Unlock()

		select {
		case <-r.done:
			if r.err != nil {
				return 0, r.err
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: tag %q: waiting for a lease: %w", ErrUnavailable, g.tag, ctx.Err())
		case <-g.ctx.Done():
			return 0, fmt.Errorf("%w: tag %q", ErrClosed, g.tag)
		}
	}
}

// requestLocked starts the request of the next lease, of the adaptive size
// and at least n IDs. The size adapts to how long ago the previous lease
// was requested: about how long a lease lasts at the current rate.
func (g *Generator) requestLocked(n int64) *request {
	now := g.opts.Now()
	if g.askedAt.IsZero() {
		g.size = g.opts.MinLease
	} else {
		g.size = g.opts.nextLease(g.size, now.Sub(g.askedAt))
	}
	g.askedAt = now
	r := &request{done: make(chan struct{})}
	g.inflight = r
	go g.lease(r, max(g.size, n))
	return r
}

// lease runs one INCRBY and files its range: as the current lease when the
// current one is spent, else as the next.
func (g *Generator) lease(r *request, n int64) {
	last, err := g.rdb.IncrBy(g.ctx, g.tag, n).Result()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight = nil
	switch {
	case g.closed:
		err = fmt.Errorf("%w: tag %q", ErrClosed, g.tag)
	case err != nil:
		err = leaseError(g.tag, n, err)
	default:
		err = g.acceptLocked(last, n)
	}
	if err != nil {
		g.failures++
		g.lastError = err
	}
	r.err = err
	close(r.done)
}

// acceptLocked files the range [last-n+1, last]. IDs this generator
// already handed out, or below 1, are cut off: its IDs only increase.
func (g *Generator) acceptLocked(last, n int64) error {
	switch {
	case last <= g.high:
		return fmt.Errorf("%w: tag %q: INCRBY %d answered %d, not above %d already leased (was the key lowered?)",
			ErrBadLease, g.tag, n, last, g.high)
	case last > maxID:
		return fmt.Errorf("%w: tag %q: INCRBY %d answered %d, past the last ID a generator hands out (%d)",
			ErrBadLease, g.tag, n, last, int64(maxID))
	}
	l := newLease(max(last-n+1, g.high+1), last, g.opts.PrefetchAt)
	g.high = last
	g.leases++
	if g.cur.Load().spent() {
		g.cur.Store(l)
	} else {
		g.next = l
	}
	return nil
}

// Close stops the generator: calls that follow, and calls waiting for a
// lease, return ErrClosed. The IDs it holds (at most two leases) are
// dropped, never handed out; a lease request under way is cancelled, or
// its range dropped when it arrives. Close does not close the redis client
// and does not wait on the network. It is safe to call more than once.
func (g *Generator) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		g.cancel()
		g.cur.Store(emptyLease())
		g.next = nil
	}
	return nil
}

// Stats are a generator's counters.
type Stats struct {
	Leases    int64 // leases received
	LeaseSize int64 // the adaptive lease size: of the last lease requested
	Waits     int64 // calls that found no ID cached and waited for a lease
	Failures  int64 // lease requests that failed
	LastError error // the last failure, nil when none
}

// Stats returns the generator's counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Leases: g.leases, LeaseSize: g.size, Waits: g.waits, Failures: g.failures, LastError: g.lastError}
}
