package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/leaf-id/leaf/segment"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Options configure a Server. The zero value serves without a password.
type Options struct {
	// Password, when not empty, is required (AUTH or HELLO ... AUTH) before
	// any command but AUTH, HELLO and QUIT, as Redis's requirepass.
	Password string
	// MaxBatch is the largest n of INCRBY. It should be the allocator's
	// max_batch; 0 leaves the check to the allocator alone.
	MaxBatch int64
	// Version is leaf's version, shown in INFO as leaf_version.
	Version string
	// Logger receives connection and shutdown events; nil discards them.
	// The password is never logged.
	Logger *slog.Logger
	// Now is the clock (uptime, connection age); nil is time.Now.
	Now func() time.Time
}

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

	cmds   map[string]*command // immutable after New
	sorted []*command          // the same, by name, for COMMAND

	// ctx is the context of every allocator call. Shutdown cancels it when
	// its own context ends, so requests waiting on the database give up
	// and Shutdown can still return with no handler running.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	rs       *redcon.Server
	ln       net.Listener
	clients  map[*client]struct{}
	closing  bool
	fenced   chan struct{} // closed once Shutdown has fenced every client
	served   chan struct{} // closed when Serve returns
	shutdown sync.Once

	nextID       atomic.Int64
	connsTotal   atomic.Int64
	authFailures atomic.Int64
	// Commands and errors of connections already closed; live ones count
	// their own (client.commands), so the hot path touches no shared line.
	doneCommands atomic.Int64
	doneErrors   atomic.Int64
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
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.cmds, s.sorted = buildCommands()
	return s
}

// Serve accepts connections on ln until Shutdown, then returns
// ErrServerClosed. ln may be any listener (TLS, limits): when closed, its
// Accept must fail.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.rs != nil {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.ln = ln
	s.rs = redcon.NewServerNetwork(ln.Addr().Network(), ln.Addr().String(), s.serveRESP, s.accept, s.closed)
	s.mu.Unlock()
	defer close(s.served)

	err := s.rs.Serve(&fenceListener{Listener: ln, s: s})
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrServerClosed
	}
	return err
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
// (they answer TRYAGAIN) and Shutdown returns ctx's error once they have
// returned; the guarantee above holds either way.
func (s *Server) Shutdown(ctx context.Context) error {
	first := false
	s.shutdown.Do(func() { first = true })
	if !first {
		<-s.fenced
		return nil
	}
	s.mu.Lock()
	s.closing = true
	rs, ln := s.rs, s.ln
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()

	if rs != nil {
		// Stop accepting. The fence listener holds redcon's accept loop
		// until the fence is up, because when that loop ends redcon closes
		// every socket, and replies of finished commands would be lost.
		rs.Close()
		ln.Close()
	}
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()

	// The fence: a command runs holding its connection's mutex, so taking
	// it waits for the one in flight, and the flag stops every later one.
	// Each connection has its own uncontended mutex: no global lock on the
	// hot path. Connections accepted after closing was set are refused.
	for _, c := range clients {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}
	close(s.fenced)
	s.log.Info("server stopped", "connections", len(clients))

	if rs != nil {
		<-s.served
	}
	s.cancel()
	return ctx.Err()
}

// fenceListener delays the error that ends redcon's accept loop until
// Shutdown has fenced every connection (see Shutdown).
type fenceListener struct {
	net.Listener
	s *Server
}

func (l *fenceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		l.s.mu.Lock()
		closing := l.s.closing
		l.s.mu.Unlock()
		if closing {
			<-l.s.fenced
			return nil, net.ErrClosed
		}
	}
	return c, err
}

// accept registers a new connection, or refuses it during shutdown.
func (s *Server) accept(conn redcon.Conn) bool {
	c := newClient(s, conn)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	s.connsTotal.Add(1)
	conn.SetContext(c)
	s.log.Debug("client connected", "id", c.id, "addr", c.addr)
	return true
}

// closed unregisters a connection when redcon has closed it.
func (s *Server) closed(conn redcon.Conn, err error) {
	c, ok := conn.Context().(*client)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	s.doneCommands.Add(c.commands.Load())
	s.doneErrors.Add(c.errors.Load())
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("client connection ended", "id", c.id, "addr", c.addr, "err", err)
	}
}

// serveRESP is redcon's handler: it runs one command of a connection.
func (s *Server) serveRESP(conn redcon.Conn, cmd redcon.Command) {
	c, ok := conn.Context().(*client)
	if !ok {
		conn.Close()
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		// Shutdown: flush the replies of the commands that did run, drop
		// the rest of the pipeline, hang up.
		conn.Close()
		return
	}
	s.dispatch(c, conn, cmd.Args)
	quit := c.quit
	c.mu.Unlock()
	if quit {
		// After the unlock: Close flushes to the socket, which may block,
		// and Shutdown must never wait on a client's network.
		conn.Close()
	}
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
