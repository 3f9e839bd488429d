// Package durability holds the durability check of a store: the optional
// interface a store implements to tell how its database replicates
// (Durable), and its answer (Replication, with its Safety). Like persist,
// it holds no database code, so that the server, which shows the answer,
// links no database/sql.
//
// A Watcher keeps the check of a running server: it reads the answer at
// start and again every minute, so that a change made after start is
// seen. It logs the result at start and on every change, and a warning
// whenever a failover could lose ranges already handed out, and with them
// repeat IDs; INFO, LEAF.INFO and the metrics show the last result (Last).
//
// The same checks read the store's identity (persist.Identified): INFO
// and LEAF.NODES show it (StoreID), and a change of it while the server
// runs (the DSN's host now names another database) is a warning.
package durability

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// Defaults of Options.
const (
	// DefaultInterval is the time between two checks, the tag sync's.
	DefaultInterval = time.Minute
	// DefaultTimeout bounds one check, so that a database that does not
	// answer holds up the start no longer than this.
	DefaultTimeout = 5 * time.Second
)

// Options configure a Watcher.
type Options struct {
	// Interval between checks; 0: DefaultInterval. Until a first check
	// has answered, the next one comes after a sixth of it.
	Interval time.Duration
	// Timeout of one check; 0: DefaultTimeout.
	Timeout time.Duration
	// Logger receives the results and the warnings; nil discards them.
	Logger *slog.Logger
}

// WarnMessage starts the warning logged when a failover could lose
// committed ranges.
const WarnMessage = "a failover of the database could repeat IDs: it may lose ranges already handed out"

// Watcher checks a store's replication and keeps the last result.
type Watcher struct {
	store any // a Durable, or a store without the check
	opts  Options
	log   *slog.Logger

	last atomic.Pointer[Replication]
	id   atomic.Pointer[string] // the store's identity, as last read
	mu   sync.Mutex             // one check at a time, so that changes are logged in order
	seen bool                   // a check has answered (under mu)
	wg   sync.WaitGroup
}

// New returns a Watcher of store; it checks nothing until Check or
// Start. Last is unknown until a check answers.
func New(store any, opts Options) *Watcher {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{store: store, opts: opts, log: log}
	unknown := UnknownReplication("not checked yet: the database has not answered")
	w.last.Store(&unknown)
	none := ""
	w.id.Store(&none)
	return w
}

// StoreID is the store's identity as last read: "" before a check has
// read it, or when the store keeps none.
func (w *Watcher) StoreID() string { return *w.id.Load() }

// checkID reads the store's identity and keeps it; it logs it when first
// read, and warns when it changes.
func (w *Watcher) checkID(ctx context.Context) {
	id, err := persist.StoreID(ctx, w.store)
	if err != nil {
		w.log.Debug("store identity: the database did not answer", "err", err)
		return
	}
	prev := w.StoreID()
	if id == prev {
		return
	}
	w.id.Store(&id)
	switch {
	case prev == "":
		w.log.Info("store identity", "store_id", id)
	case id == "":
		w.log.Warn("the store's identity is gone: its row in leaf_store was deleted, or this server now reaches another store "+
			"that has none; IDs handed out by two stores may repeat", "was", prev)
	default:
		w.log.Warn("the store's identity changed: this server now reaches another store than before "+
			"(store.dsn or its host name now names another database); IDs handed out by two stores may repeat",
			"was", prev, "store_id", id)
	}
}

// Last is the result of the last check that answered (unknown before
// one has).
func (w *Watcher) Last() Replication { return *w.last.Load() }

// Check asks the store now, logs the result when it differs from the last
// one (at start: always), with a warning when it is unsafe, and returns
// it. A check the database does not answer changes nothing: the result
// stays the last one, and false is returned.
func (w *Watcher) Check(ctx context.Context) (Replication, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	w.checkID(ctx)
	r, err := Read(ctx, w.store)
	if err != nil {
		w.log.Debug("durability check: the database did not answer", "err", err)
		return w.Last(), false
	}
	prev := w.Last()
	w.last.Store(&r)
	first := !w.seen
	w.seen = true
	if !first && r == prev {
		return r, true
	}
	msg := "store replication"
	if !first {
		msg = "store replication changed"
	}
	attrs := []any{"kind", r.Kind, "durability", r.Safety.String(), "members", r.Members}
	if r.Sync >= 0 {
		attrs = append(attrs, "sync", r.Sync)
	}
	if r.Async >= 0 {
		attrs = append(attrs, "async", r.Async)
	}
	if r.State != "" {
		attrs = append(attrs, "state", r.State)
	}
	attrs = append(attrs, "reason", r.Reason)
	if r.Safety != Unsafe && r.Advice != "" {
		attrs = append(attrs, "advice", r.Advice)
	}
	w.log.Info(msg, attrs...)
	if r.Safety == Unsafe {
		w.log.Warn(WarnMessage+"; "+r.Reason, "kind", r.Kind, "change", r.Advice)
	}
	return r, true
}

// Start checks once now, then every Interval in the background until ctx
// ends (Wait waits for that).
func (w *Watcher) Start(ctx context.Context) {
	_, ok := w.Check(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx, ok)
	}()
}

// Wait waits until the background checks of Start have stopped (their
// context ended).
func (w *Watcher) Wait() { w.wg.Wait() }

// run checks every Interval until ctx ends; answered says whether a check
// has answered yet.
func (w *Watcher) run(ctx context.Context, answered bool) {
	for {
		wait := w.opts.Interval
		if !answered {
			wait = max(w.opts.Interval/6, time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if _, ok := w.Check(ctx); ok {
			answered = true
		}
	}
}
