package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// ErrClosed is returned by a DeferredMySQL after Close.
var ErrClosed = errors.New("persist: store is closed")

// DeferredMySQL is a MySQL store that may start while its database is down.
// Until the database first answers, every call tries to open it (connect,
// check or create the table, as OpenMySQL does) and fails with
// ErrUnavailable while it cannot; after that it is the opened *MySQL.
//
// A server process wants this: an orchestrator that restarts a process
// failing at start turns a database outage into a restart loop, while a
// server that starts answers TRYAGAIN, reports the database state, and
// serves as soon as the database is back. Mistakes that no wait will fix
// (a bad DSN, a refused password, a missing table without CreateSchema)
// still fail at once.
type DeferredMySQL struct {
	dsn  string
	opts Options
	log  *slog.Logger

	// open holds the one attempt to open at a time; a channel rather than
	// a mutex, so that a caller waiting for it gives up at its deadline.
	open   chan struct{}
	m      atomic.Pointer[MySQL]
	closed atomic.Bool
}

var (
	_ Store   = (*DeferredMySQL)(nil)
	_ Admin   = (*DeferredMySQL)(nil)
	_ Guarded = (*DeferredMySQL)(nil)
)

// OpenMySQLDeferred is OpenMySQL for a server that must start while the
// database is down. When the database can be reached it opens it at once,
// as OpenMySQL does; when it cannot (ErrUnavailable: refused, timed out,
// shutting down), it logs a warning and returns a store that opens the
// database on first use instead. Every other error is returned, as by
// OpenMySQL, without the password.
func OpenMySQLDeferred(ctx context.Context, dsn string, opts Options) (*DeferredMySQL, error) {
	d := &DeferredMySQL{dsn: dsn, opts: opts, log: opts.Logger, open: make(chan struct{}, 1)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	m, err := OpenMySQL(ctx, dsn, opts)
	switch {
	case err == nil:
		d.m.Store(m)
	case errors.Is(err, ErrUnavailable):
		d.log.Warn("persist: database unreachable at start; serving errors until it answers",
			"dsn", RedactDSN(dsn), "err", err)
	default:
		return nil, err
	}
	return d, nil
}

// Opened reports whether the database has been opened.
func (d *DeferredMySQL) Opened() bool { return d.m.Load() != nil }

// store returns the opened MySQL, opening it now if it is not yet.
func (d *DeferredMySQL) store(ctx context.Context) (*MySQL, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if m := d.m.Load(); m != nil {
		return m, nil
	}
	select {
	case d.open <- struct{}{}:
		defer func() { <-d.open }()
	case <-ctx.Done():
		return nil, fmt.Errorf("persist: open mysql %s: %w: %w", RedactDSN(d.dsn), ErrUnavailable, ctx.Err())
	}
	if m := d.m.Load(); m != nil {
		return m, nil // opened by the call we waited for
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	m, err := OpenMySQL(ctx, d.dsn, d.opts)
	if err != nil {
		return nil, err
	}
	d.m.Store(m)
	d.log.Info("persist: database reachable, store opened", "dsn", RedactDSN(d.dsn))
	return m, nil
}

// Take implements Store.
func (d *DeferredMySQL) Take(ctx context.Context, tag string, size int64) (Range, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Range{}, err
	}
	return m.Take(ctx, tag, size)
}

// Tags implements Store.
func (d *DeferredMySQL) Tags(ctx context.Context) ([]Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	return m.Tags(ctx)
}

// Tag implements Store.
func (d *DeferredMySQL) Tag(ctx context.Context, name string) (Tag, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Tag{}, err
	}
	return m.Tag(ctx, name)
}

// Create implements Store.
func (d *DeferredMySQL) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.Create(ctx, name, step, description)
}

// GiveBack implements Store.
func (d *DeferredMySQL) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return false, err
	}
	return m.GiveBack(ctx, tag, from, to)
}

// SetStep implements Admin.
func (d *DeferredMySQL) SetStep(ctx context.Context, tag string, step int64) error {
	m, err := d.store(ctx)
	if err != nil {
		return err
	}
	return m.SetStep(ctx, tag, step)
}

// RaiseFloor implements Admin.
func (d *DeferredMySQL) RaiseFloor(ctx context.Context, tag string, floor int64) (Tag, bool, error) {
	m, err := d.store(ctx)
	if err != nil {
		return Tag{}, false, err
	}
	return m.RaiseFloor(ctx, tag, floor)
}

// GuardEnabled implements Guarded: false until the database was opened.
func (d *DeferredMySQL) GuardEnabled() bool {
	m := d.m.Load()
	return m != nil && m.GuardEnabled()
}

// Close closes the database when it was opened; later calls fail with
// ErrClosed. An open in progress is waited for, so it cannot leak.
func (d *DeferredMySQL) Close() error {
	d.closed.Store(true)
	d.open <- struct{}{}
	defer func() { <-d.open }()
	if m := d.m.Load(); m != nil {
		return m.Close()
	}
	return nil
}
