package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
)

// Deferred is a store that may start while its database is down. Until
// the database first answers, every call tries to open it (connect, check
// or create the tables, as the backend's Open does) and fails with
// ErrUnavailable while it cannot; after that it is the opened Backend.
// After Close, calls fail with ErrClosed.
//
// A server process wants this: an orchestrator that restarts a process
// failing at start turns a database outage into a restart loop, while a
// server that starts answers TRYAGAIN, reports the database state, and
// serves as soon as the database is back. Mistakes that no wait will fix
// (a bad DSN, a refused password, a missing table without CreateSchema)
// still fail at once.
type Deferred struct {
	name  string // the backend, for errors: "open <name>: ..."
	open  func(context.Context) (persist.Backend, error)
	log   *slog.Logger
	attrs []any // where the database is, for the log (never a password)

	// sem holds the one attempt to open at a time; a channel rather than
	// a mutex, so that a caller waiting for it gives up at its deadline.
	sem    chan struct{}
	m      atomic.Pointer[opened]
	closed atomic.Bool
}

// opened is the Backend once open succeeded.
type opened struct{ persist.Backend }

var (
	_ persist.Store      = (*Deferred)(nil)
	_ persist.Admin      = (*Deferred)(nil)
	_ persist.Guarded    = (*Deferred)(nil)
	_ persist.BatchGiver = (*Deferred)(nil)
)

// OpenDeferred is a backend's Open for a server that must start while the
// database is down. open is one attempt to open it (its errors already
// name the backend, never the DSN); name names the backend in the errors
// of calls made before it opened, and attrs say where the database is in
// the log. When the database can be reached it is opened at once; when it
// cannot (ErrUnavailable: refused, timed out, shutting down), a warning
// is logged and the store opens the database on first use instead. Every
// other error is returned.
func OpenDeferred(ctx context.Context, name string, open func(context.Context) (persist.Backend, error), log *slog.Logger, attrs ...any) (*Deferred, error) {
	d := &Deferred{name: name, open: open, log: log, attrs: attrs, sem: make(chan struct{}, 1)}
	b, err := open(ctx)
	switch {
	case err == nil:
		d.m.Store(&opened{b})
	case errors.Is(err, persist.ErrUnavailable):
		d.log.Warn("persist: database unreachable at start; serving errors until it answers",
			append(append([]any(nil), attrs...), "err", err)...)
	default:
		return nil, err
	}
	return d, nil
}

// Opened reports whether the database has been opened.
func (d *Deferred) Opened() bool { return d.m.Load() != nil }

// store returns the opened Backend, opening it now if it is not yet.
func (d *Deferred) store(ctx context.Context) (persist.Backend, error) {
	if d.closed.Load() {
		return nil, persist.ErrClosed
	}
	if m := d.m.Load(); m != nil {
		return m.Backend, nil
	}
	select {
	case d.sem <- struct{}{}:
		defer func() { <-d.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("persist: open %s: %w: %w", d.name, persist.ErrUnavailable, ctx.Err())
	}
	if m := d.m.Load(); m != nil {
		return m.Backend, nil // opened by the call we waited for
	}
	if d.closed.Load() {
		return nil, persist.ErrClosed
	}
	b, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	d.m.Store(&opened{b})
	d.log.Info("persist: database reachable, store opened", d.attrs...)
	return b, nil
}

// Take implements persist.Store.
func (d *Deferred) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	m, err := d.store(ctx)
	if err != nil {
		return persist.Range{}, err
	}
	return m.Take(ctx, tag, size)
}

// TakeBatch implements persist.Store: while the database cannot be opened, every
// request fails with the error of the attempt.
func (d *Deferred) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	m, err := d.store(ctx)
	if err != nil {
		return failAll(reqs, err)
	}
	return m.TakeBatch(ctx, reqs)
}

// Tags implements persist.Store.
func (d *Deferred) Tags(ctx context.Context) ([]persist.Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	return m.Tags(ctx)
}

// Tag implements persist.Store.
func (d *Deferred) Tag(ctx context.Context, name string) (persist.Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return persist.Tag{}, err
	}
	return m.Tag(ctx, name)
}

// Create implements persist.Store.
func (d *Deferred) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.Create(ctx, name, step, description)
}

// GiveBack implements persist.Store.
func (d *Deferred) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.GiveBack(ctx, tag, from, to)
}

// SetStep implements persist.Admin.
func (d *Deferred) SetStep(ctx context.Context, tag string, step int64) error {
	m, err := d.store(ctx)
	if err != nil {
		return err
	}
	return m.SetStep(ctx, tag, step)
}

// RaiseFloor implements persist.Admin.
func (d *Deferred) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return persist.Tag{}, false, err
	}
	return m.RaiseFloor(ctx, tag, floor)
}

// GuardEnabled implements persist.Guarded: false until the database was opened.
func (d *Deferred) GuardEnabled() bool {
	m := d.m.Load()
	return m != nil && m.GuardEnabled()
}

// Close closes the database when it was opened; later calls fail with
// ErrClosed. An open in progress is waited for, so it cannot leak.
func (d *Deferred) Close() error {
	d.closed.Store(true)
	d.sem <- struct{}{}
	defer func() { <-d.sem }()
	if m := d.m.Load(); m != nil {
		return m.Close()
	}
	return nil
}

// GiveBackBatch implements persist.BatchGiver; errors.ErrUnsupported when the
// backend gives back tag by tag only.
func (d *Deferred) GiveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest) ([]bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	b, ok := m.(persist.BatchGiver)
	if !ok {
		return nil, giveBackUnsupported(d.name)
	}
	return b.GiveBackBatch(ctx, reqs)
}

// GiveBackBatchAfter implements persist.BatchGiver, as GiveBackBatch.
func (d *Deferred) GiveBackBatchAfter(ctx context.Context, reqs []persist.GiveBackRequest, seen int64) ([]bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	b, ok := m.(persist.BatchGiver)
	if !ok {
		return nil, giveBackUnsupported(d.name)
	}
	return b.GiveBackBatchAfter(ctx, reqs, seen)
}

var _ durability.Durable = (*Deferred)(nil)

// Durability implements durability.Durable: the opened backend's answer. Before
// the database was opened it does not try to open it (the allocator's calls
// do): ErrUnavailable.
func (d *Deferred) Durability(ctx context.Context) (durability.Replication, error) {
	if d.closed.Load() {
		return durability.Replication{}, persist.ErrClosed
	}
	m := d.m.Load()
	if m == nil {
		return durability.Replication{}, fmt.Errorf("persist: %s: %w: not opened yet", d.name, persist.ErrUnavailable)
	}
	return durability.Read(ctx, m.Backend)
}

// failAll answers every request of a batch with err: the store could not
// be reached, so nothing was taken.
func failAll(reqs []persist.TakeRequest, err error) []persist.TakeResult {
	res := make([]persist.TakeResult, len(reqs))
	for i := range res {
		res[i].Err = err
	}
	return res
}
