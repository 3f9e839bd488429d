// Package servertest starts a real leaf server for tests: an allocator on a
// SQLite file and the Redis-protocol listener on 127.0.0.1:0, all stopped
// by t.Cleanup in the order leaf itself stops (server, allocator, store).
package servertest

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/snowflake"
)

// Options configure Start. The zero value is a server with the default
// allocator options, no password, on a fresh database file.
type Options struct {
	// Server options.
	Server server.Options
	// Segment, when not nil, replaces segment.DefaultOptions().
	Segment *segment.Options
	// Path is the SQLite file; "" makes a new one in t.TempDir(). Start
	// twice on one path to test a restart.
	Path string
	// Wrap, when not nil, wraps the store the allocator uses (fault
	// injection: slow or failing calls).
	Wrap func(persist.Store) persist.Store
	// Cluster, when not nil, makes the server a node of the store's
	// cluster registry with these options (Node.Addr is the listener's),
	// serving Snowflake tags with a generator made with Snowflake
	// (snowflake.DefaultLayout when its Layout is zero).
	Cluster   *cluster.Options
	Snowflake snowflake.Options
}

// Instance is a running server.
type Instance struct {
	Addr   string // host:port of the listener
	Path   string // the SQLite file
	Server *server.Server
	Alloc  *segment.Allocator
	Store  persist.Store        // what the allocator uses (wrapped when Wrap is set)
	Node   *cluster.Node        // with Options.Cluster
	Gen    *snowflake.Generator // with Options.Cluster

	sqlite   *sqlite.Store
	served   chan error
	stopOnce sync.Once
	stopErr  error
}

// Start opens the store, starts the allocator and serves on 127.0.0.1:0.
// Everything is stopped by tb.Cleanup (or earlier by Stop).
func Start(tb testing.TB, opts Options) *Instance {
	tb.Helper()
	ctx := context.Background()
	path := opts.Path
	if path == "" {
		path = filepath.Join(tb.TempDir(), "leaf.db")
	}
	// A test's server waits for SQLite's write lock as long as a busy
	// machine needs (a thousand give-backs queue for it at Stop).
	db, err := sqlite.Open(ctx, path, persist.Options{CreateSchema: true, BusyTimeout: time.Minute})
	if err != nil {
		tb.Fatalf("servertest: open sqlite %s: %v", path, err)
	}
	var store persist.Store = db
	if opts.Wrap != nil {
		store = opts.Wrap(db)
	}
	so := segment.DefaultOptions()
	if opts.Segment != nil {
		so = *opts.Segment
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		db.Close()
		tb.Fatalf("servertest: listen: %v", err)
	}
	in := &Instance{
		Addr:   ln.Addr().String(),
		Path:   path,
		Store:  store,
		sqlite: db,
		served: make(chan error, 1),
	}
	if opts.Cluster != nil {
		sf := opts.Snowflake
		if sf.Layout == (snowflake.Layout{}) {
			sf.Layout = snowflake.DefaultLayout()
		}
		in.Gen = snowflake.New(sf)
		so.Modes = cluster.Modes(in.Gen)
	}
	in.Alloc = segment.New(store, so)
	if err := in.Alloc.Start(ctx); err != nil {
		ln.Close()
		db.Close()
		tb.Fatalf("servertest: start allocator: %v", err)
	}
	if opts.Cluster != nil {
		co := *opts.Cluster
		co.Node.Addr = in.Addr
		in.Node = cluster.New(db, in.Alloc, in.Gen, co)
		in.Node.Start(ctx)
		opts.Server.Cluster = in.Node
	}
	if opts.Server.StoreID == nil {
		// As main's durability checks read it: once, here.
		id, err := persist.StoreID(ctx, db)
		if err != nil {
			tb.Fatalf("servertest: store identity: %v", err)
		}
		opts.Server.StoreID = func() string { return id }
	}
	in.Server = server.New(in.Alloc, opts.Server)
	go func() { in.served <- in.Server.Serve(ln) }()
	tb.Cleanup(func() {
		if err := in.Stop(); err != nil {
			tb.Errorf("servertest: stop: %v", err)
		}
	})
	return in
}

// Stop shuts the server down, closes the allocator (giving unused IDs back)
// and the store, as leaf does on SIGTERM. It is safe to call more than once;
// the later calls return the first one's error.
func (in *Instance) Stop() error {
	in.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		if err := in.Server.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := <-in.served; !errors.Is(err, server.ErrServerClosed) {
			errs = append(errs, err)
		}
		// Give back while registered, then leave, as leaf does.
		if err := in.Alloc.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		if in.Node != nil {
			if err := in.Node.Leave(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := in.sqlite.Close(); err != nil {
			errs = append(errs, err)
		}
		in.stopErr = errors.Join(errs...)
	})
	return in.stopErr
}

// Probes holds what the allocator schedules (its probes of a database that
// is away, and retries) until the test runs it: set its AfterFunc as
// segment.Options.AfterFunc.
type Probes struct {
	mu sync.Mutex
	f  func()
}

// AfterFunc is segment.Options.AfterFunc: it keeps f, whatever d, until
// Run.
func (p *Probes) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f = f
	return func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		held := p.f != nil
		p.f = nil
		return held
	}
}

// Run runs the scheduled function now, on the caller's goroutine; it fails
// the test when none is scheduled.
func (p *Probes) Run(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	f := p.f
	p.f = nil
	p.mu.Unlock()
	if f == nil {
		tb.Fatal("servertest: no probe scheduled")
	}
	f()
}
