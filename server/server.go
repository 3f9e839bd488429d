package server

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/internal/ratelog"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = resp.ErrServerClosed

// Options configure a Server. The zero value serves without a password.
type Options struct {
	// Password, when not empty, is required (AUTH or HELLO ... AUTH) before
	// any command but AUTH, HELLO and QUIT, as Redis's requirepass.
	Password string
	// AdminPassword, when not empty, restricts LEAF.CREATE, LEAF.STEP,
	// LEAF.FLOOR and SET to connections authenticated as user admin with
	// it (cmd_admin.go); when empty, any authenticated client may run them.
	AdminPassword string
	// Version is leaf's version, shown in INFO as leaf_version.
	Version string
	// Revision is the VCS commit leaf was built from, shown in INFO as
	// leaf_git_sha1 (as redis_git_sha1: "00000000" when unknown).
	Revision string
	// Logger receives connection and shutdown events; nil discards them.
	// The password is never logged.
	Logger *slog.Logger
	// Now is the clock (uptime, connection age); nil is time.Now.
	Now func() time.Time
	// Conn is the connection layer's options: event loops, limits
	// (MaxClients: FitFileLimit lowers it to what the process's
	// open-file limit allows), timeouts, TLS (see LoadTLS); AuthTimeout
	// applies with a password set. New sets Logger (to Logger) and
	// Arrived (the lease's check on the request path).
	Conn resp.Options
	// ScriptTimeLimit stops a Lua script (EVAL) that runs longer, with an
	// error; 0 is DefaultScriptTimeLimit.
	ScriptTimeLimit time.Duration
	// Databases is the number of databases SELECT may choose, Redis's
	// "databases": each its own namespace of tags. 0 is
	// DefaultDatabases.
	Databases int
	// Cluster, when set, is this server's node in the cluster registry:
	// LEAF.NODES and INFO cluster show it, and LEAF.FLOOR, SET and
	// LEAF.STEP answer once every live server confirmed (cmd_cluster.go).
	Cluster Cluster

	// The limits on strangers and on what a client may make the server
	// hold (security.go).
	//
	// MaxAuthFailures closes a connection after this many refused
	// passwords (AUTH, HELLO ... AUTH); 0: never.
	MaxAuthFailures int
	// CreatePolicy is segment.auto_create: "admin" lets only the admin
	// user's requests create tags; "" or anything else, every client's
	// (the allocator's Options.AutoCreate turns creation off).
	CreatePolicy string
	// CreateRate bounds the tags one connection creates a second
	// (segment.create_rate); 0: no bound.
	CreateRate float64
	// CertLogin logs a TLS connection in as the user its verified client
	// certificate names in its common name (default or admin): with
	// TLS.ClientAuth verifying certificates (server.tls_client_ca).
	CertLogin bool
	// SlowlogThreshold is the time a command must take to enter SLOWLOG
	// and LATENCY's events (Redis's slowlog-log-slower-than and
	// latency-monitor-threshold): 0 is DefaultSlowlogThreshold, a
	// negative one turns both off, and 1ns logs every command.
	SlowlogThreshold time.Duration
	// ConfigFile is the configuration file read at start, shown by INFO
	// server ("" when none).
	ConfigFile string
	// Replication, when set, is how the store's database replicates as
	// last checked (persist/durability): INFO leaf and LEAF.INFO show it.
	// nil: they say unknown.
	Replication func() durability.Replication
	// StoreID, when set, is the store's identity as last read
	// (persist.Identified): INFO leaf's store_id and LEAF.NODES show it,
	// so that an operator can tell whether two servers share a store.
	// nil or "": unknown, or a store without one.
	StoreID func() string

	// The faces that Redis Cluster and Sentinel clients see
	// (cmd_cluster_face.go, cmd_sentinel.go).
	//
	// RedisCluster turns the Redis Cluster face on (server.redis_cluster):
	// INFO says cluster_enabled:1, and CLUSTER SLOTS, SHARDS, NODES and
	// INFO answer the slot map of the live servers (cluster.SlotMap).
	// Off, they answer Redis's "cluster support disabled".
	RedisCluster bool
	// AnnounceAddr is the address (host:port) clients are given for this
	// server when Cluster is nil; "" is the listener's. With Cluster set,
	// the address the node registered is given.
	AnnounceAddr string
	// SentinelMasters are the master names SENTINEL MASTERS lists; every
	// other SENTINEL command answers any name. Empty is
	// DefaultSentinelMaster.
	SentinelMasters []string
}

// DefaultCreateRate is leaf.yaml's segment.create_rate: the tags one
// connection may create a second (and at once, as a burst).
const DefaultCreateRate = 1000

// DefaultSlowlogThreshold is leaf.yaml's server.slowlog_threshold: a
// command that waited for a segment load or a lookup on a slow database.
const DefaultSlowlogThreshold = 10 * time.Millisecond

// The defaults of Options' limits, as leaf.yaml's: the connection
// layer's.
const (
	DefaultMaxClients      = resp.DefaultMaxClients
	DefaultMaxRequestBytes = resp.DefaultMaxRequestBytes
	DefaultMaxPipeline     = resp.DefaultMaxPipeline
	DefaultDatabases       = 16
)

// Server answers the Redis protocol in front of an allocator: it is the
// resp.Handler of a resp.Server, which serves the connections. Create it
// with New, run it with Serve, stop it with Shutdown.
type Server struct {
	alloc   *segment.Allocator
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	started time.Time
	pid     int
	rs      *resp.Server

	// The password's SHA-256: comparing digests in constant time hides
	// the password's length too. Zero when no password is set.
	passSum [sha256.Size]byte
	hasPass bool

	cmds   map[string]*command // immutable after New
	sorted []*command          // the same, by name, for COMMAND

	// ctx is the context of every allocator call. Shutdown cancels it when
	// its own context ends, so requests waiting on the database give up
	// and Shutdown can still return with no handler running.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	clients map[*client]struct{}

	nextID       atomic.Int64
	authFailures atomic.Int64
	// Per-command counters and histograms (stats.go, histogram.go),
	// error replies by code, commands waiting on the database.
	stats    serverStats
	errStats errorStats
	blocked  atomic.Int64
	// clock is a monotonic clock in nanoseconds, which times commands.
	clock func() int64
	// SLOWLOG, LATENCY, MONITOR and INFO's sampled figures.
	slowlog  slowlog
	latency  latencyMonitor
	monitors monitors
	// The Sentinel face's subscribers and the masters it gave
	// (cmd_pubsub.go, cmd_sentinel.go).
	subs    subscribers
	given   givenMasters
	sampler sampler
	runID   string
	// nameIdx is the sorted tag names of the listings (cmd_keys.go).
	nameIdx atomic.Pointer[nameIndex]
	// scripts are the scripts EVAL and SCRIPT LOAD compiled, luaVMs the
	// interpreters kept between runs (cmd_script.go).
	scripts scriptCache
	luaVMs  sync.Pool
	// Refused passwords, logged a few a minute (security.go); the
	// connections closed for too many.
	failLog     *ratelog.Logger
	authCutoffs atomic.Int64
}

// New returns a server in front of alloc. It does not listen: call Serve.
func New(alloc *segment.Allocator, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.ScriptTimeLimit <= 0 {
		opts.ScriptTimeLimit = DefaultScriptTimeLimit
	}
	if opts.Databases <= 0 {
		opts.Databases = DefaultDatabases
	}
	s := &Server{
		alloc:   alloc,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		started: opts.Now(),
		pid:     os.Getpid(),
		clients: map[*client]struct{}{},
	}
	if opts.Password != "" {
		s.passSum = sha256.Sum256([]byte(opts.Password))
		s.hasPass = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.cmds, s.sorted = buildCommands()
	s.initSecurity()
	s.stats.init(s.sorted)
	base := time.Now()
	s.clock = func() int64 { return int64(time.Since(base)) }
	s.slowlog.init(opts.SlowlogThreshold)
	s.runID = newRunID()
	conn := opts.Conn
	conn.Logger = opts.Logger
	// The request path's check of the lease (segment/lease.go).
	conn.Arrived = alloc.Admit
	s.rs = resp.NewServer(s, conn)
	return s
}

// Serve accepts connections on ln until Shutdown, then returns
// ErrServerClosed. With Options.Conn.TLS it speaks TLS on ln. ln may be any
// listener: when closed, its Accept must fail. Plain TCP connections go
// to an event loop (Linux), any other to a goroutine of its own.
func (s *Server) Serve(ln net.Listener) error {
	s.startSampler()
	return s.rs.Serve(ln)
}

// Addr is the address Serve listens on, nil before Serve.
func (s *Server) Addr() net.Addr { return s.rs.Addr() }

// Shutdown stops accepting connections, lets every command in flight
// finish, then closes the connections (resp.Server.Shutdown: each has
// resp.ShutdownFlush to take the replies of its commands). When it returns
// no command handler is running and none will start, so the caller may
// close the allocator (which gives unused IDs back) without a late INCR
// repeating one.
//
// If ctx ends first, requests still waiting on the database are cancelled
// (they answer TRYAGAIN), connections are cut, and Shutdown returns ctx's
// error; the guarantee above holds either way.
func (s *Server) Shutdown(ctx context.Context) error {
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	err := s.rs.Shutdown(ctx)
	s.cancel()
	return err
}

// Open registers a new connection and returns its state, which runs its
// commands (resp.Handler).
func (s *Server) Open(conn *resp.Conn) resp.Session {
	c := newClient(s, conn)
	conn.SetUnauthenticated(!c.authed)
	s.stats.add(&c.stats, conn, c.id, runtime.GOMAXPROCS(0))
	s.mu.Lock()
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	s.log.Debug("client connected", "id", c.id, "addr", c.addr)
	return c
}

// unregister removes a closed connection's client.
func (s *Server) unregister(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	s.monitors.remove(c)
	s.subs.remove(c)
}

// connectedClients is the number of open connections.
func (s *Server) connectedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// snapshotClients returns the open connections.
func (s *Server) snapshotClients() []*client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		out = append(out, c)
	}
	return out
}
