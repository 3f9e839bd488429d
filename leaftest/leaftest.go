// Package leaftest runs a real leaf server inside a Go test, as miniredis
// does for Redis: the test of a service that takes its IDs from leaf talks
// to the same server code, over the same Redis protocol, on a loopback
// port, with no binary to build and no database server to run.
//
//	func TestOrders(t *testing.T) {
//		srv := leaftest.Start(t, leaftest.WithStep(100))
//		orders := NewOrderService(srv.Client()) // or redis.NewClient(&redis.Options{Addr: srv.Addr()})
//		...
//	}
//
// The server is leaf's own allocator, Redis-protocol server and cluster
// node (for Snowflake tags and LEAF.NODES) on a SQLite file in a
// temporary directory, started on 127.0.0.1:0 and stopped at t.Cleanup,
// as leaf stops on SIGTERM (unused IDs given back, the file closed).
// Every guarantee of leaf holds: IDs increase, never repeat, INCRBY
// reserves contiguous ranges, and a server started again on the same file
// (WithDatabase) continues above every ID handed out.
//
// Outside a test function (TestMain, an example), Run starts one and
// Close stops it.
package leaftest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/snowflake"
)

// Timeout is how long the server waits for its SQLite file (a load, the
// lock another process holds) and how long Client waits for a reply: far
// beyond what a load takes, so that tests hold on a busy machine.
const Timeout = 30 * time.Second

// Option sets one setting of the server.
type Option func(*options)

type options struct {
	step          int64
	password      string
	adminPassword string
	snowflake     []string
	database      string
	noAutoCreate  bool
	logger        *slog.Logger
}

// WithStep sets the step of tags created on their first INCR (leaf's
// segment.default_step, 1000 by default): the IDs one segment holds, and
// so how many a restart without a clean stop may skip.
func WithStep(n int64) Option { return func(o *options) { o.step = n } }

// WithPassword makes clients AUTH with password first (server.password);
// Client does.
func WithPassword(password string) Option { return func(o *options) { o.password = password } }

// WithAdminPassword restricts LEAF.CREATE, LEAF.STEP, LEAF.FLOOR and SET
// to connections authenticated as user admin (server.admin_password).
func WithAdminPassword(password string) Option {
	return func(o *options) { o.adminPassword = password }
}

// WithSnowflakeTags creates the tags as Snowflake tags (LEAF.CREATE tag
// MODE snowflake): time-ordered IDs in Meituan Leaf's layout. A tag that
// exists already (WithDatabase) keeps its mode.
func WithSnowflakeTags(tags ...string) Option {
	return func(o *options) { o.snowflake = append(o.snowflake, tags...) }
}

// WithDatabase keeps the IDs in the SQLite file at path (created when
// missing) instead of a new file in a temporary directory: start a server
// again on the same file to test a restart.
func WithDatabase(path string) Option { return func(o *options) { o.database = path } }

// WithoutAutoCreate turns off segment.auto_create: INCR of a tag that was
// not created (LEAF.CREATE) answers an error.
func WithoutAutoCreate() Option { return func(o *options) { o.noAutoCreate = true } }

// WithLogger sends the server's log to l (it discards it by default).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Server is a running leaf server. Its methods are safe for concurrent use.
type Server struct {
	addr     string
	path     string
	password string
	tempDir  string // removed by Close; "" when the caller owns the file

	store  *sqlite.Store
	alloc  *segment.Allocator
	node   *cluster.Node
	srv    *server.Server
	served chan error

	mu     sync.Mutex
	client *redis.Client // made by the first Client call

	closeOnce sync.Once
	closeErr  error
}

// Start runs a server for the test tb and stops it at tb.Cleanup; it
// fails the test (tb.Fatal) when the server cannot start.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := start(tb.TempDir(), opts)
	if err != nil {
		tb.Fatalf("leaftest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("leaftest: %v", err)
		}
	})
	return s
}

// Run starts a server outside a test function (TestMain, an example):
// the caller stops it with Close, which also removes its temporary
// directory.
func Run(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "leaftest-")
	if err != nil {
		return nil, fmt.Errorf("leaftest: %w", err)
	}
	s, err := start(dir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("leaftest: %w", err)
	}
	s.tempDir = dir
	return s, nil
}

// start wires what leaf's main wires, on a SQLite file in dir (or
// WithDatabase's): store, Snowflake generator, allocator, cluster node,
// Redis-protocol server.
func start(dir string, opts []Option) (s *Server, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	log := o.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := o.database
	if path == "" {
		path = filepath.Join(dir, "leaf.db")
	}
	ctx := context.Background()
	s = &Server{path: path, password: o.password, served: make(chan error, 1)}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	if err := fromTemplate(path); err != nil {
		return nil, err
	}
	s.store, err = sqlite.Open(ctx, path, persist.Options{CreateSchema: true, BusyTimeout: Timeout, QueryTimeout: Timeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	undo = append(undo, func() { _ = s.store.Close() })

	gen := snowflake.New(snowflake.Options{Layout: snowflake.DefaultLayout()})
	so := segment.DefaultOptions()
	if o.step > 0 {
		so.DefaultStep = o.step
		so.MaxStep = max(so.MaxStep, o.step)
	}
	so.LoadTimeout = Timeout
	so.AutoCreate = !o.noAutoCreate
	so.Modes = cluster.Modes(gen)
	so.Logger = log
	s.alloc = segment.New(s.store, so)
	if err := s.alloc.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the allocator: %w", err)
	}
	undo = append(undo, func() { _ = s.alloc.Close(context.Background()) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = ln.Close() })
	s.addr = ln.Addr().String()

	// The node leases the Snowflake worker id and lets the segment tags
	// serve: Start registers it at once, so the first INCR does not wait.
	s.node = cluster.New(s.store, s.alloc, gen, cluster.Options{
		Node:   persist.NodeInfo{Addr: s.addr, Version: "leaftest"},
		Logger: log,
	})
	s.node.Start(ctx)
	undo = append(undo, func() { _ = s.node.Leave(context.Background()) })
	for _, tag := range o.snowflake {
		err := s.alloc.CreateMode(ctx, tag, persist.ModeSnowflake, "")
		if err != nil && !errors.Is(err, segment.ErrExists) {
			return nil, fmt.Errorf("create Snowflake tag %q: %w", tag, err)
		}
	}

	s.srv = server.New(s.alloc, server.Options{
		Password:      o.password,
		AdminPassword: o.adminPassword,
		Version:       "leaftest",
		Logger:        log,
		Cluster:       s.node,
	})
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// template is an empty store with leaf's schema, made once a process: a
// new store is a copy of it, because creating the tables takes a dozen
// synchronous commits (a third of Start's time on a plain disk).
var template struct {
	once  sync.Once
	bytes []byte // nil: none, each store makes its own tables
}

// fromTemplate writes the template to path when no file is there.
func fromTemplate(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil // there, or a path Open will report on
	}
	template.once.Do(func() { template.bytes = makeTemplate() })
	if template.bytes == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, template.bytes, 0o600)
}

// makeTemplate creates the schema in a file of its own and reads it back
// once closed (the last connection's close checkpoints the WAL into the
// file and removes it); nil when that fails or a WAL file remains.
func makeTemplate() []byte {
	dir, err := os.MkdirTemp("", "leaftest-template-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "leaf.db")
	st, err := sqlite.Open(context.Background(), path, persist.Options{CreateSchema: true, BusyTimeout: Timeout, QueryTimeout: Timeout})
	if err != nil {
		return nil
	}
	if err := st.Close(); err != nil {
		return nil
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return b
}

// Addr is the server's host:port on 127.0.0.1.
func (s *Server) Addr() string { return s.addr }

// Path is the SQLite file that keeps the server's IDs.
func (s *Server) Path() string { return s.path }

// Client is a go-redis client of the server (with the password of
// WithPassword), made on the first call and closed by Close. Its
// timeouts are Timeout.
func (s *Server) Client() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{
			Addr:         s.addr,
			Password:     s.password,
			DialTimeout:  Timeout,
			ReadTimeout:  Timeout,
			WriteTimeout: Timeout,
		})
	}
	return s.client
}

// Close stops the server as leaf stops on SIGTERM: no new connection, the
// commands in flight answered, unused IDs given back to the file (so a
// server started again on it continues at the next ID), the file closed.
// Start calls it at the test's cleanup; calling it again returns the first
// call's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		var errs []error
		s.mu.Lock()
		if s.client != nil {
			_ = s.client.Close()
		}
		s.mu.Unlock()
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
		if err := <-s.served; err != nil && !errors.Is(err, server.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
		if err := s.node.Leave(ctx); err != nil {
			errs = append(errs, fmt.Errorf("leave the registry: %w", err))
		}
		if err := s.alloc.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("give back unused IDs: %w", err))
		}
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.path, err))
		}
		if s.tempDir != "" {
			if err := os.RemoveAll(s.tempDir); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
