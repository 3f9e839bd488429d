package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/segment"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

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
	// Logger receives connection and shutdown events; nil discards them.
	// The password is never logged.
	Logger *slog.Logger
	// Now is the clock (uptime, connection age); nil is time.Now.
	Now func() time.Time
	// EventLoops is the number of event loops serving plain TCP
	// connections on Linux (loop_linux.go); 0 is one. A negative number
	// turns them off: every connection then has a goroutine of its own,
	// as TLS connections and any other system always do.
	EventLoops int

	// MaxClients is the most connections open at once; a new connection
	// beyond it is answered Redis's "-ERR max number of clients reached"
	// and closed. 0 is DefaultMaxClients. (FitFileLimit lowers it to what
	// the process's open-file limit allows.)
	MaxClients int
	// MaxRequestBytes is the largest request, one command with its
	// arguments, a client may send. A larger one is answered with a
	// protocol error ("-ERR Protocol error: invalid bulk length", ...) as
	// soon as a count or a length shows it, before the rest is read, and
	// the connection is closed: a connection's read buffer never grows
	// beyond it (or 64 KiB). 0 is DefaultMaxRequestBytes.
	MaxRequestBytes int
	// IdleTimeout, when positive, closes a connection that sent no
	// request and took no reply for this long, as Redis's timeout. An
	// event loop checks every quarter of it (at most every second), so a
	// connection may stay that much longer.
	IdleTimeout time.Duration
	// MaxPipeline is the most commands a connection runs in one turn:
	// then its replies are written and, on an event loop, the other
	// connections are served before it runs the rest. 0 is
	// DefaultMaxPipeline.
	MaxPipeline int
	// TLS, when not nil, makes Serve speak TLS (see LoadTLS); each TLS
	// connection has a goroutine of its own.
	TLS *tls.Config
}

// The defaults of Options' limits, as leaf.yaml's.
const (
	DefaultMaxClients      = 10000
	DefaultMaxRequestBytes = 64 << 10
	DefaultMaxPipeline     = 1024
)

// Server answers the Redis protocol in front of an allocator. Create it
// with New, run it with Serve, stop it with Shutdown.
type Server struct {
	alloc   *segment.Allocator
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	started time.Time
	pid     int

	// The password's SHA-256: comparing digests in constant time hides
	// the password's length too. Zero when no password is set.
	passSum [sha256.Size]byte
	hasPass bool

	// Options' limits with their defaults applied.
	maxClients, maxRequest, maxPipeline int

	cmds   map[string]*command // immutable after New
	sorted []*command          // the same, by name, for COMMAND

	// ctx is the context of every allocator call. Shutdown cancels it when
	// its own context ends, so requests waiting on the database give up
	// and Shutdown can still return with no handler running.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	ln       net.Listener
	clients  map[*client]struct{}
	conns    sync.WaitGroup // open connections; Add under mu, never after closing
	loops    []*loop        // event loops, made by Serve
	nextLoop int            // round robin over loops, under mu
	closing  bool
	fenced   chan struct{} // closed once Shutdown has fenced every client
	served   chan struct{} // closed when Serve returns
	shutdown sync.Once

	nextID       atomic.Int64
	connsTotal   atomic.Int64
	authFailures atomic.Int64
	rejected     atomic.Int64 // connections refused at max_clients
	refusing     atomic.Int64 // goroutines telling a TLS client so
	// Commands and errors of connections already closed; live ones count
	// their own (client.commands), so the hot path touches no shared line.
	doneCommands atomic.Int64
	doneErrors   atomic.Int64
	// Per-command counters for CommandStats (stats.go).
	stats serverStats
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
	s := &Server{
		alloc:   alloc,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		started: opts.Now(),
		pid:     os.Getpid(),
		clients: map[*client]struct{}{},
		fenced:  make(chan struct{}),
		served:  make(chan struct{}),
	}
	if opts.Password != "" {
		s.passSum = sha256.Sum256([]byte(opts.Password))
		s.hasPass = true
	}
	s.maxClients = orDefault(opts.MaxClients, DefaultMaxClients)
	s.maxRequest = orDefault(opts.MaxRequestBytes, DefaultMaxRequestBytes)
	s.maxPipeline = orDefault(opts.MaxPipeline, DefaultMaxPipeline)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.cmds, s.sorted = buildCommands()
	s.stats.init(s.sorted)
	return s
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Serve accepts connections on ln until Shutdown, then returns
// ErrServerClosed. With Options.TLS it speaks TLS on ln. ln may be any
// listener: when closed, its Accept must fail. Plain TCP connections go
// to an event loop (Linux), any other to a goroutine of its own.
func (s *Server) Serve(ln net.Listener) error {
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.ln = ln
	s.startLoops()
	s.mu.Unlock()
	defer close(s.served)

	var delay time.Duration // backoff on accept errors, as net/http
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.accept(nc)
	}
}

// Addr is the address Serve listens on, nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections, lets every command in flight
// finish, then closes the connections. When it returns no command handler
// is running and none will start, so the caller may close the allocator
// (which gives unused IDs back) without a late INCR repeating one.
//
// If ctx ends first, requests still waiting on the database are cancelled
// (they answer TRYAGAIN), connections still writing are cut, and Shutdown
// returns ctx's error; the guarantee above holds either way.
func (s *Server) Shutdown(ctx context.Context) error {
	first := false
	s.shutdown.Do(func() { first = true })
	if !first {
		<-s.fenced
		return nil
	}
	s.mu.Lock()
	s.closing = true
	ln := s.ln
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()

	if ln != nil {
		ln.Close() // stop accepting
	}
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()

	// The fence: a connection runs its commands holding its client's
	// mutex, so taking it waits for the command in flight, and the flag
	// stops every later one. Each connection has its own uncontended
	// mutex: no global lock on the hot path. Connections accepted after
	// closing was set are refused.
	for _, c := range clients {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}
	close(s.fenced)
	s.log.Info("server stopped", "connections", len(clients))

	// Each connection writes the replies of the commands that ran, then
	// closes; wake the ones waiting for a request. Loops close theirs.
	for _, c := range clients {
		c.cn.wake()
	}
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	for _, l := range loops {
		l.shut()
	}
	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range clients {
			if c.cn.nc != nil {
				c.cn.nc.Close()
			}
		}
		<-done // no handler runs any more: only reads and writes, now cut
	}
	for _, l := range loops {
		l.stop()
	}
	if ln != nil {
		<-s.served
	}
	s.cancel()
	return ctx.Err()
}

// startLoops starts the event loops; s.mu is held.
func (s *Server) startLoops() {
	n := s.opts.EventLoops
	if !haveLoops || n < 0 {
		return
	}
	for range max(n, 1) {
		l, err := newLoop(s)
		if err != nil {
			s.log.Warn("no event loop: every connection gets a goroutine", "err", err)
			return
		}
		s.loops = append(s.loops, l)
	}
}

// pickLoop is the loop for a new connection, nil when there is none.
func (s *Server) pickLoop() *loop {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.loops) == 0 || s.closing {
		return nil
	}
	s.nextLoop = (s.nextLoop + 1) % len(s.loops)
	return s.loops[s.nextLoop]
}

// accept registers a new connection and gives it to a loop or a goroutine
// of its own, or refuses it during shutdown or beyond max_clients.
func (s *Server) accept(nc net.Conn) {
	// Only this goroutine adds clients, so the count cannot grow between
	// this check and the registration below.
	s.mu.Lock()
	full := len(s.clients) >= s.maxClients
	s.mu.Unlock()
	if full {
		s.refuse(nc)
		return
	}
	var cn *conn
	if tc, ok := nc.(*net.TCPConn); ok {
		if l := s.pickLoop(); l != nil {
			var err error
			if cn, err = l.adopt(tc); err != nil {
				s.log.Warn("event loop: cannot take the connection over; it gets a goroutine", "err", err)
			}
		}
	}
	if cn == nil {
		cn = newConn(nc)
	}
	c := newClient(s, cn)
	cn.rd.setLimits(s.maxRequest, !c.authed)
	c.cn = cn
	cn.ctx = c
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		cn.closeSocket()
		return
	}
	s.clients[c] = struct{}{}
	s.conns.Add(1)
	s.mu.Unlock()
	s.stats.add(&c.stats)
	s.connsTotal.Add(1)
	s.log.Debug("client connected", "id", c.id, "addr", c.addr)
	if cn.lp != nil {
		cn.lp.add(cn)
		return
	}
	go s.serveConn(cn, c)
}

// maxRefusing bounds the goroutines refusing TLS connections at
// max_clients; beyond it a refused connection is closed without a word.
const maxRefusing = 64

// refuse answers a connection beyond max_clients with Redis's error and
// closes it, as Redis's acceptCommonHandler does. A plain socket takes the
// few bytes at once; a TLS connection needs a handshake first, so a
// goroutine (a bounded number of them) does it.
func (s *Server) refuse(nc net.Conn) {
	s.rejected.Add(1)
	s.log.Debug("connection refused: max number of clients reached", "addr", nc.RemoteAddr().String(), "max_clients", s.maxClients)
	msg := []byte("-" + errMaxClients + "\r\n")
	if _, ok := nc.(*net.TCPConn); ok {
		nc.SetWriteDeadline(time.Now().Add(time.Second)) // a safety net: a new socket's buffer is empty
		nc.Write(msg)
		nc.Close()
		return
	}
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		nc.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		nc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		nc.Write(msg)
		nc.Close()
	}()
}

// unregister removes a closed connection's client.
func (s *Server) unregister(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	s.doneCommands.Add(c.commands.Load())
	s.doneErrors.Add(c.errors.Load())
	s.stats.remove(&c.stats)
	s.conns.Done()
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

// totals are the commands and error replies of every connection so far.
func (s *Server) totals() (commands, errs int64) {
	commands, errs = s.doneCommands.Load(), s.doneErrors.Load()
	for _, c := range s.snapshotClients() {
		commands += c.commands.Load()
		errs += c.errors.Load()
	}
	return commands, errs
}
