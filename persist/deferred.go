package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
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
	open  func(context.Context) (Backend, error)
	log   *slog.Logger
	attrs []any // where the database is, for the log (never a password)

	// sem holds the one attempt to open at a time; a channel rather than
	// a mutex, so that a caller waiting for it gives up at its deadline.
	sem    chan struct{}
	m      atomic.Pointer[opened]
	closed atomic.Bool
}

// opened is the Backend once open succeeded.
type opened struct{ Backend }

var (
	_ Store      = (*Deferred)(nil)
	_ Admin      = (*Deferred)(nil)
	_ Guarded    = (*Deferred)(nil)
	_ BatchGiver = (*Deferred)(nil)
)

// OpenDeferred is a backend's Open for a server that must start while the
// database is down. open is one attempt to open it (its errors already
// name the backend, never the DSN); name names the backend in the errors
// of calls made before it opened, and attrs say where the database is in
// the log. When the database can be reached it is opened at once; when it
// cannot (ErrUnavailable: refused, timed out, shutting down), a warning
// is logged and the store opens the database on first use instead. Every
// other error is returned.
func OpenDeferred(ctx context.Context, name string, open func(context.Context) (Backend, error), log *slog.Logger, attrs ...any) (*Deferred, error) {
	d := &Deferred{name: name, open: open, log: log, attrs: attrs, sem: make(chan struct{}, 1)}
	b, err := open(ctx)
	switch {
	case err == nil:
		d.m.Store(&opened{b})
	case errors.Is(err, ErrUnavailable):
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
func (d *Deferred) store(ctx context.Context) (Backend, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if m := d.m.Load(); m != nil {
		return m.Backend, nil
	}
	select {
	case d.sem <- struct{}{}:
		defer func() { <-d.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("persist: open %s: %w: %w", d.name, ErrUnavailable, ctx.Err())
	}
	if m := d.m.Load(); m != nil {
		return m.Backend, nil // opened by the call we waited for
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	b, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	d.m.Store(&opened{b})
	d.log.Info("persist: database reachable, store opened", d.attrs...)
	return b, nil
}

// Take implements Store.
func (d *Deferred) Take(ctx context.Context, tag string, size int64) (Range, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Range{}, err
	}
	return m.Take(ctx, tag, size)
}

// TakeBatch implements Store: while the database cannot be opened, every
// request fails with the error of the attempt.
func (d *Deferred) TakeBatch(ctx context.Context, reqs []TakeRequest) []TakeResult {
	m, err := d.store(ctx)
	if err != nil {
		return FailAll(reqs, err)
	}
	return m.TakeBatch(ctx, reqs)
}

// Tags implements Store.
func (d *Deferred) Tags(ctx context.Context) ([]Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	return m.Tags(ctx)
}

// Tag implements Store.
func (d *Deferred) Tag(ctx context.Context, name string) (Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Tag{}, err
	}
	return m.Tag(ctx, name)
}

// Create implements Store.
func (d *Deferred) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.Create(ctx, name, step, description)
}

// GiveBack implements Store.
func (d *Deferred) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.GiveBack(ctx, tag, from, to)
}

// SetStep implements Admin.
func (d *Deferred) SetStep(ctx context.Context, tag string, step int64) error {
	m, err := d.store(ctx)
	if err != nil {
		return err
	}
	return m.SetStep(ctx, tag, step)
}

// RaiseFloor implements Admin.
func (d *Deferred) RaiseFloor(ctx context.Context, tag string, floor int64) (Tag, bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Tag{}, false, err
	}
	return m.RaiseFloor(ctx, tag, floor)
}

// GuardEnabled implements Guarded: false until the database was opened.
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

// GiveBackBatch implements BatchGiver; errors.ErrUnsupported when the
// backend gives back tag by tag only.
func (d *Deferred) GiveBackBatch(ctx context.Context, reqs []GiveBackRequest) ([]bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	b, ok := m.(BatchGiver)
	if !ok {
		return nil, giveBackUnsupported(d.name)
	}
	return b.GiveBackBatch(ctx, reqs)
}

// GiveBackBatchAfter implements BatchGiver, as GiveBackBatch.
func (d *Deferred) GiveBackBatchAfter(ctx context.Context, reqs []GiveBackRequest, seen int64) ([]bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	b, ok := m.(BatchGiver)
	if !ok {
		return nil, giveBackUnsupported(d.name)
	}
	return b.GiveBackBatchAfter(ctx, reqs, seen)
}
