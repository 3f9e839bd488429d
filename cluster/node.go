package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/internal/ratelog"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/snowflake"
)

// Errors of the node, wrapped with %w.
var (
	// ErrLapsed: this server could not renew its lease in time, so it
	// serves no cached segment ID until it has read the changes made
	// meanwhile. Clients may try again.
	ErrLapsed = errors.New("this server's lease in the cluster registry lapsed")
	// ErrUnconfirmed: live servers did not confirm a change within
	// cluster.ack_timeout; it is in effect in the store all the same.
	ErrUnconfirmed = errors.New("servers did not confirm the change")
	// ErrOff: the cluster features are off (the store keeps no registry).
	ErrOff = errors.New("cluster features are off")
)

// Options configure a Node. Zero durations take DefaultOptions'.
type Options struct {
	// Heartbeat is how often the lease is renewed and the log read
	// (cluster.heartbeat).
	Heartbeat time.Duration
	// Lease is how long a renewal lasts, on the store's clock
	// (cluster.lease). The server serves cached segment IDs and Snowflake
	// IDs until Lease less Margin after it sent its last successful
	// renewal.
	Lease time.Duration
	// AckTimeout is how long Announce waits for the live servers to
	// confirm a change (cluster.ack_timeout).
	AckTimeout time.Duration
	// NodeTimeout is how much older than the freshest server's a server's
	// last renewal may be before it leaves the Redis Cluster slot map
	// (cluster.node_timeout); zero is DefaultNodeTimeoutBeats heartbeats.
	NodeTimeout time.Duration
	// Node is what the server registers. An empty ID gets one made of the
	// host name and random digits; a zero Started is now.
	Node persist.NodeInfo
	// Logger receives the node's events; nil discards them.
	Logger *slog.Logger
	// Now is the clock of leases (its monotonic reading) and of the
	// Snowflake bounds (its wall reading); nil is time.Now.
	Now func() time.Time
	// AfterFunc runs f after d and returns what stops it, as
	// time.AfterFunc; it arms the lapse at the end of the lease. Tests
	// inject one to fire it on cue.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// DefaultOptions are the documented defaults (leaf.yaml).
func DefaultOptions() Options {
	return Options{Heartbeat: time.Second, Lease: 30 * time.Second, AckTimeout: 10 * time.Second}
}

// Margin is how much earlier than the store a server gives up its lease:
// a tenth of it, for clocks that run at slightly different rates.
func (o Options) Margin() time.Duration { return o.Lease / 10 }

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Heartbeat <= 0 {
		o.Heartbeat = d.Heartbeat
	}
	if o.Lease <= 0 {
		o.Lease = d.Lease
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = d.AckTimeout
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = DefaultNodeTimeoutBeats * o.Heartbeat
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AfterFunc == nil {
		o.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if o.Node.ID == "" {
		o.Node.ID = newNodeID()
	}
	if o.Node.Started.IsZero() {
		o.Node.Started = o.Now()
	}
	return o
}

// newNodeID is the host's name (cut short) and 8 random hex digits: new at
// every start, so a restarted server is a new node.
func newNodeID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '_'
		}
		return r
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	if host == "" {
		return hex.EncodeToString(b)
	}
	return host + "-" + hex.EncodeToString(b)
}

// Node is this server in the cluster registry. Make it with New, start
// it with Start before serving, and end it with Leave after serving.
type Node struct {
	reg   persist.Registry // nil: off
	alloc *segment.Allocator
	gen   *snowflake.Generator
	opts  Options
	log   *slog.Logger

	beatMu sync.Mutex // one heartbeat at a time
	// beatLog logs failed heartbeats: the first of a minute, then one
	// line with the count, so an outage writes two lines a minute, not
	// one a heartbeat.
	beatLog *ratelog.Logger

	mu         sync.Mutex
	off        error // why the cluster features are off; nil when on
	joined     bool  // registered (the row may have expired)
	everJoined bool
	seen       int64 // the last change applied
	worker     int   // -1: none
	workerPrev int64 // the bound the worker id had when leased
	serving    bool  // the lease is current: not held
	deadline   time.Time
	arm        int64       // the lapse armed last; older ones do nothing
	stopLapse  func() bool // stops the armed lapse
	lastBeat   time.Time   // start of the last successful heartbeat
	lastErr    error
	noWorker   error // why no worker id, logged once
	nodes      []persist.Node
	nodesAt    time.Time

	beats, failures, lapses, applied, unconfirmed, drops atomic.Int64

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// New returns the node of this server over reg (nil: a store without a
// registry, the features are off), applying changes to alloc and leasing
// gen's worker id. Until Start registers it, alloc's segment tags are held
// and gen has no worker id.
func New(reg persist.Registry, alloc *segment.Allocator, gen *snowflake.Generator, opts Options) *Node {
	opts = opts.withDefaults()
	n := &Node{reg: reg, alloc: alloc, gen: gen, opts: opts, log: opts.Logger, worker: -1, stopLapse: func() bool { return false }}
	// The window's timer is a real one (opts.AfterFunc arms the lapse):
	// the summary comes a minute after the first failure, or at Leave.
	n.beatLog = ratelog.New(opts.Logger, slog.LevelWarn, "cluster: heartbeat failed", ratelog.Options{Burst: 1, Now: opts.Now})
	if reg == nil {
		n.off = errors.New("the store keeps no cluster registry")
		gen.Revoke(fmt.Errorf("%w: %w: %w", snowflake.ErrNoWorker, ErrOff, n.off))
		return n
	}
	alloc.Hold(fmt.Errorf("%w: not registered yet", ErrLapsed))
	gen.Revoke(fmt.Errorf("%w: not registered yet", snowflake.ErrNoWorker))
	alloc.SetFence(n)
	return n
}

// ID is the node's id in the registry.
func (n *Node) ID() string { return n.opts.Node.ID }

// Start registers the node (one heartbeat, now) and renews its lease every
// heartbeat until Leave. A store that cannot be reached is no error: the
// node keeps trying, and the segment tags stay held meanwhile. A store
// without the registry's tables turns the features off, with one warning,
// and the server runs alone.
func (n *Node) Start(ctx context.Context) {
	if err := n.Beat(ctx); err != nil {
		n.log.Warn("cluster: could not register; serving nothing cached until it can", "err", err)
	}
	n.mu.Lock()
	off := n.off != nil
	n.mu.Unlock()
	n.stop, n.done = make(chan struct{}), make(chan struct{})
	if off {
		close(n.done)
		return
	}
	go n.loop()
}

func (n *Node) loop() {
	defer close(n.done)
	tick := time.NewTicker(n.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
			n.Tick(context.Background())
		}
	}
}

// Tick is one heartbeat of the loop Start runs: Beat, with a failure
// logged at most once a minute and the rest counted ("cluster: heartbeat
// failed 57 more times in the last minute", with the last error).
func (n *Node) Tick(ctx context.Context) {
	if err := n.Beat(ctx); err != nil {
		n.beatLog.Log("err", err)
	}
}

// Beat is one heartbeat: register when not registered, renew the lease,
// read and apply the changes after the last one applied, confirm them,
// and lease a worker id when the node has none. Only after the renewal
// and the changes does the node serve until the new lease's end.
func (n *Node) Beat(ctx context.Context) error {
	n.beatMu.Lock()
	defer n.beatMu.Unlock()
	n.mu.Lock()
	off := n.off != nil
	n.mu.Unlock()
	if off {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.Lease/3)
	defer cancel()
	t0 := n.opts.Now()
	err := n.beat(ctx, t0)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.failures.Add(1)
		n.lastErr = err
		return err
	}
	n.beats.Add(1)
	n.lastErr = nil
	return nil
}

// beat does Beat's work; n.beatMu is held.
func (n *Node) beat(ctx context.Context, t0 time.Time) error {
	bound := t0.UnixMilli() + n.opts.Lease.Milliseconds()
	if err := n.renew(ctx, bound); err != nil {
		return err
	}
	if n.offNow() {
		return nil
	}
	changes, head, err := n.reg.Changes(ctx, n.seenNow())
	if err != nil {
		return err
	}
	confirm := n.apply(changes, head)
	// Renewed, and the log applied up to then: serve until the lease ends.
	n.extend(t0)
	if err := n.ensureWorker(ctx, t0, bound); err != nil {
		return err
	}
	if confirm {
		// Confirm at once, rather than at the next heartbeat.
		return n.renew(ctx, bound)
	}
	return nil
}

// renew joins when the node is not registered, then renews its lease and
// its worker id's; a lost worker id is revoked.
func (n *Node) renew(ctx context.Context, bound int64) error {
	for attempt := 0; ; attempt++ {
		n.mu.Lock()
		joined, seen, worker := n.joined, n.seen, n.worker
		n.mu.Unlock()
		if !joined {
			if err := n.join(ctx); err != nil || n.offNow() {
				return err
			}
		}
		err := n.reg.Renew(ctx, persist.Renewal{Node: n.opts.Node.ID, TTL: n.opts.Lease, Seen: seen, Worker: worker, Bound: bound})
		switch {
		case errors.Is(err, persist.ErrLeaseLost) && attempt == 0:
			n.log.Warn("cluster: registration gone (expired and removed); registering again", "node", n.opts.Node.ID)
			n.mu.Lock()
			n.joined = false
			n.mu.Unlock()
			continue
		case errors.Is(err, persist.ErrWorkerLost):
			n.log.Warn("cluster: the worker id went to another server while this one could not renew; leasing another",
				"worker_id", worker)
			n.gen.Revoke(fmt.Errorf("%w: worker id %d went to another server", snowflake.ErrLease, worker))
			n.mu.Lock()
			n.worker = -1
			n.mu.Unlock()
			return nil
		case err != nil:
			return err
		}
		if worker >= 0 {
			if id, ok := n.gen.Worker(); ok && id == worker {
				n.gen.Extend(worker, bound)
			} else {
				// Revoked by a lapse; renewed now, so no other server
				// held it meanwhile: it continues where it was.
				n.gen.Grant(worker, n.workerPrevNow(), bound)
			}
		}
		return nil
	}
}

// join registers the node. A first registration refused for a reason
// other than an unreachable store (no registry tables, no right to write
// them) turns the features off.
func (n *Node) join(ctx context.Context) error {
	head, err := n.reg.Join(ctx, n.opts.Node, n.opts.Lease)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		if !n.everJoined && !errors.Is(err, persist.ErrUnavailable) && !errors.Is(err, persist.ErrClosed) {
			n.turnOffLocked(err)
			return nil
		}
		return err
	}
	if !n.everJoined {
		// Nothing is cached yet: the changes before are in the store.
		n.seen = head
		n.everJoined = true
	}
	n.joined = true
	n.log.Info("cluster: registered", "node", n.opts.Node.ID, "addr", n.opts.Node.Addr,
		"heartbeat", n.opts.Heartbeat, "lease", n.opts.Lease)
	return nil
}

// turnOffLocked turns the features off for good: the server runs alone.
func (n *Node) turnOffLocked(why error) {
	n.off = why
	if errors.Is(why, persist.ErrNoCluster) {
		n.log.Warn("cluster: features off: the store has no cluster registry; this server runs alone: floors take effect "+
			"on other servers when their cached IDs run out, and there are no Snowflake tags", "err", why)
	} else {
		n.log.Warn("cluster: features off: the cluster registry refused this server; it runs alone: floors take effect "+
			"on other servers when their cached IDs run out, and there are no Snowflake tags", "err", why)
	}
	n.gen.Revoke(fmt.Errorf("%w: %w: %w", snowflake.ErrNoWorker, ErrOff, why))
	n.serving = true
	n.alloc.SetFence(nil)
	n.alloc.Release()
}

// apply applies the changes read after the last one applied; it reports
// whether any was.
func (n *Node) apply(changes []persist.Change, head int64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case head < n.seen:
		n.log.Error("cluster: the change log went back (leaf_change emptied by hand?); dropping every cached ID",
			"applied", n.seen, "head", head)
		n.alloc.DropCached()
		n.drops.Add(1)
		n.seen = head
	case len(changes) > 0 && changes[0].Seq > n.seen+1:
		n.log.Warn("cluster: changes made while this server was away are no longer in the log; dropping every cached ID",
			"applied", n.seen, "first", changes[0].Seq)
		n.alloc.DropCached()
		n.drops.Add(1)
	}
	for _, ch := range changes {
		switch ch.Kind {
		case persist.ChangeFloor:
			n.alloc.SkipTo(ch.Tag, ch.Value)
		case persist.ChangeStep:
			n.alloc.ApplyStep(ch.Tag, ch.Value)
		default:
			n.log.Warn("cluster: unknown change kind ignored", "kind", ch.Kind, "seq", ch.Seq)
		}
		n.seen = ch.Seq
		n.applied.Add(1)
	}
	return len(changes) > 0
}

// extend makes the node serve until the lease renewed at t0 ends, less
// the margin: the allocator admits requests read before then (Serve; the
// request path checks it, segment/lease.go), and a timer marks the lapse
// there for the Snowflake generator, the status and the log.
func (n *Node) extend(t0 time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastBeat = t0
	n.deadline = t0.Add(n.opts.Lease - n.opts.Margin())
	n.stopLapse()
	n.arm++
	arm := n.arm
	if n.serving && n.alloc.Held() != nil {
		// A request arrived after the lease ran out, before the timer
		// fired (the process was stopped, the machine suspended): the
		// allocator stopped serving then.
		n.lapses.Add(1)
		n.log.Warn("cluster: the lease had run out when requests arrived (process stopped or machine suspended?); renewed now",
			"node", n.opts.Node.ID, "last_renewal", n.lastBeat.Format(time.RFC3339Nano))
		n.serving = false
	}
	left := n.deadline.Sub(n.opts.Now())
	if left <= 0 {
		n.lapseLocked()
		return
	}
	n.alloc.Serve(n.deadline, fmt.Errorf("%w: not renewed within the lease since %s; cached IDs are not served until the changes made meanwhile are read",
		ErrLapsed, t0.Format(time.RFC3339Nano)))
	n.stopLapse = n.opts.AfterFunc(left, func() { n.lapse(arm) })
	if !n.serving {
		n.serving = true
		n.log.Info("cluster: lease current, changes applied; serving", "node", n.opts.Node.ID, "applied", n.seen)
	}
}

// lapse stops serving when the lease armed as arm ends unrenewed.
func (n *Node) lapse(arm int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if arm == n.arm && n.off == nil {
		n.lapseLocked()
	}
}

func (n *Node) lapseLocked() {
	if !n.serving {
		return
	}
	n.serving = false
	n.lapses.Add(1)
	since := n.lastBeat.Format(time.RFC3339Nano)
	n.alloc.Hold(fmt.Errorf("%w: not renewed since %s (last error: %v); cached IDs are not served until the changes made meanwhile are read",
		ErrLapsed, since, n.lastErr))
	n.gen.Revoke(fmt.Errorf("%w: not renewed since %s", snowflake.ErrLease, since))
	n.log.Warn("cluster: lease not renewed in time; serving nothing cached and no Snowflake IDs until it is",
		"node", n.opts.Node.ID, "last_renewal", since, "err", n.lastErr)
}

// ensureWorker leases a worker id when the node holds none.
func (n *Node) ensureWorker(ctx context.Context, t0 time.Time, bound int64) error {
	n.mu.Lock()
	has := n.worker >= 0
	n.mu.Unlock()
	if has {
		return nil
	}
	w, err := n.reg.LeaseWorker(ctx, persist.WorkerRequest{
		Node: n.opts.Node.ID, Limit: n.gen.Layout().Workers(), TTL: n.opts.Lease, Now: t0.UnixMilli(), Bound: bound,
	})
	n.mu.Lock()
	defer n.mu.Unlock()
	if errors.Is(err, persist.ErrNoWorker) {
		n.gen.Revoke(fmt.Errorf("%w: all %d worker ids are leased to live servers; one is free when a server stops or its lease ends",
			snowflake.ErrNoWorker, n.gen.Layout().Workers()))
		if n.noWorker == nil {
			n.log.Error("cluster: no Snowflake worker id free; Snowflake tags answer TRYAGAIN until one is", "err", err)
		}
		n.noWorker = err
		return nil
	}
	if err != nil {
		return err
	}
	n.noWorker = nil
	n.worker, n.workerPrev = w.ID, w.Prev
	if !n.serving {
		// The lease lapsed while the answer was on its way: the next
		// renewal grants the id (renew), once the lease is current.
		n.log.Info("cluster: Snowflake worker id leased; issuing once the lease is renewed", "worker_id", w.ID, "previous_bound", w.Prev)
		return nil
	}
	n.gen.Grant(w.ID, w.Prev, bound)
	n.log.Info("cluster: Snowflake worker id leased", "worker_id", w.ID, "previous_bound", w.Prev)
	return nil
}

func (n *Node) offNow() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.off != nil
}

func (n *Node) seenNow() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen
}

func (n *Node) workerPrevNow() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.workerPrev
}

// Seen is how far the node has applied the changes published through the
// other servers (segment.Fence).
func (n *Node) Seen() int64 { return n.seenNow() }

// GiveBack gives unused IDs back as the store's GiveBack does, refused
// when a floor published after seen forbids it (segment.Fence): a server
// that shuts down never lowers max_id below a floor it has not applied,
// which others may have confirmed and acknowledged meanwhile.
func (n *Node) GiveBack(ctx context.Context, tag string, from, to, seen int64) (bool, error) {
	ok, err := n.reg.GiveBackAfter(ctx, tag, from, to, seen)
	if err == nil && !ok {
		n.log.Debug("cluster: give-back refused or not matched", "tag", tag, "from", from, "to", to, "applied", seen)
	}
	return ok, err
}

var _ segment.BatchFence = (*Node)(nil)

// GiveBackBatch is GiveBack for many tags in one transaction
// (segment.BatchFence); errors.ErrUnsupported when the registry's store
// gives back tag by tag only.
func (n *Node) GiveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest, seen int64) ([]bool, error) {
	b, ok := n.reg.(persist.BatchGiver)
	if !ok {
		return nil, fmt.Errorf("cluster: batched give-back: %w", errors.ErrUnsupported)
	}
	return b.GiveBackBatchAfter(ctx, reqs, seen)
}

// Leave ends the heartbeat and removes the node from the registry,
// freeing its worker id with the bound of the last ID it issued, so the
// id's next holder need not wait for the lease's bound. Call it once
// nothing issues IDs any more, after the allocator has given back its
// unused IDs (segment.Allocator.Close): until Leave the node renews its
// lease and applies the changes made meanwhile, so that publishers wait
// for it, and each give-back is checked against them (GiveBack).
//
// Only the worker id the node knows it holds is freed, with the later of
// the bound it had when leased (what its earlier holders issued up to)
// and the time of the last ID this node issued: never below either. An id
// it holds without knowing (a lease whose answer was lost) keeps the
// bound the store recorded and expires with its lease.
func (n *Node) Leave(ctx context.Context) error {
	if n.stop != nil {
		n.stopOnce.Do(func() { close(n.stop) })
		<-n.done
	}
	n.beatLog.Flush() // the count of failures not logged yet
	n.beatMu.Lock()
	defer n.beatMu.Unlock()
	// Stopped before its last time unit is read: no ID can be issued
	// after it, so none is above the bound recorded below.
	last := n.gen.Stop(fmt.Errorf("%w: the server is shutting down", snowflake.ErrNoWorker))
	n.mu.Lock()
	n.stopLapse()
	n.arm++
	off, joined := n.off, n.joined
	worker, bound := n.worker, max(n.workerPrev, last)
	n.mu.Unlock()
	if off != nil || !joined {
		return nil
	}
	if err := n.reg.Leave(ctx, n.opts.Node.ID, worker, bound); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	n.mu.Lock()
	n.joined = false
	n.mu.Unlock()
	n.log.Info("cluster: left", "node", n.opts.Node.ID)
	return nil
}
