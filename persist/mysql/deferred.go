package mysql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
)

// Deferred is a MySQL store that may start while its database is down.
// Until the database first answers, every call tries to open it (connect,
// check or create the table, as Open does) and fails with
// persist.ErrUnavailable while it cannot; after that it is the opened
// *Store. After Close, calls fail with persist.ErrClosed.
//
// A server process wants this: an orchestrator that restarts a process
// failing at start turns a database outage into a restart loop, while a
// server that starts answers TRYAGAIN, reports the database state, and
// serves as soon as the database is back. Mistakes that no wait will fix
// (a bad DSN, a refused password, a missing table without CreateSchema)
// still fail at once.
type Deferred struct {
	cfg  *mysql.Config // parsed once: a DSN that does not parse fails at once
	opts persist.Options
	log  *slog.Logger

	// open holds the one attempt to open at a time; a channel rather than
	// a mutex, so that a caller waiting for it gives up at its deadline.
	open   chan struct{}
	m      atomic.Pointer[Store]
	closed atomic.Bool
}

var (
	_ persist.Store   = (*Deferred)(nil)
	_ persist.Admin   = (*Deferred)(nil)
	_ persist.Guarded = (*Deferred)(nil)
)

// OpenDeferred is Open for a server that must start while the database is
// down. When the database can be reached it opens it at once, as Open
// does; when it cannot (persist.ErrUnavailable: refused, timed out,
// shutting down), it logs a warning and returns a store that opens the
// database on first use instead. Every other error is returned, as by
// Open, without the DSN.
func OpenDeferred(ctx context.Context, dsn string, opts persist.Options) (*Deferred, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("persist: open mysql: %w", err)
	}
	d := &Deferred{cfg: cfg, opts: opts, log: opts.Log(), open: make(chan struct{}, 1)}
	m, err := d.openNow(ctx)
	switch {
	case err == nil:
		d.m.Store(m)
	case errors.Is(err, persist.ErrUnavailable):
		d.log.Warn("persist: database unreachable at start; serving errors until it answers",
			"addr", cfg.Addr, "db", cfg.DBName, "err", err)
	default:
		return nil, err
	}
	return d, nil
}

// openNow is one attempt to open the database, as Open does.
func (d *Deferred) openNow(ctx context.Context) (*Store, error) {
	// open sets parameters of its own (TiDB's): each attempt gets a copy.
	m, err := open(ctx, d.cfg.Clone(), d.opts)
	if err != nil {
		return nil, fmt.Errorf("persist: open mysql: %w", err)
	}
	return m, nil
}

// Opened reports whether the database has been opened.
func (d *Deferred) Opened() bool { return d.m.Load() != nil }

// store returns the opened Store, opening it now if it is not yet.
func (d *Deferred) store(ctx context.Context) (*Store, error) {
	if d.closed.Load() {
		return nil, persist.ErrClosed
	}
	if m := d.m.Load(); m != nil {
		return m, nil
	}
	select {
	case d.open <- struct{}{}:
		defer func() { <-d.open }()
	case <-ctx.Done():
		return nil, fmt.Errorf("persist: open mysql: %w: %w", persist.ErrUnavailable, ctx.Err())
	}
	if m := d.m.Load(); m != nil {
		return m, nil // opened by the call we waited for
	}
	if d.closed.Load() {
		return nil, persist.ErrClosed
	}
	m, err := d.openNow(ctx)
	if err != nil {
		return nil, err
	}
	d.m.Store(m)
	d.log.Info("persist: database reachable, store opened", "addr", d.cfg.Addr, "db", d.cfg.DBName)
	return m, nil
}

// Take implements persist.Store.
func (d *Deferred) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	m, err := d.store(ctx)
	if err != nil {
		return persist.Range{}, err
	}
	return m.Take(ctx, tag, size)
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
// persist.ErrClosed. An open in progress is waited for, so it cannot leak.
func (d *Deferred) Close() error {
	d.closed.Store(true)
	d.open <- struct{}{}
	defer func() { <-d.open }()
	if m := d.m.Load(); m != nil {
		return m.Close()
	}
	return nil
}
