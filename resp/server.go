package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("resp: server closed")

// Handler serves the connections of a Server: it opens a Session for each.
type Handler interface {
	// Open is called once for each accepted connection, before any of its
	// commands; the Session it returns runs them. It must not block.
	Open(c *Conn) Session
}

// Session runs the commands of one connection. The connection calls it
// from one goroutine at a time, never two at once.
type Session interface {
	// Command runs one command: args[0] is its name, the rest its
	// arguments. They point into the connection's read buffer, valid
	// until Command returns: keep a copy of what must outlive it. Replies
	// go to c's Writer.
	//
	// With mayBlock false the caller may be an event loop, which serves
	// many connections on one goroutine: a command that might wait (on a
	// database, a network, a lock held long) must not run. Command then
	// writes nothing, changes nothing and returns false; the connection
	// writes the replies of the commands before it, then calls Command
	// again with the same arguments where waiting is fine, with mayBlock
	// true. With mayBlock true, Command runs the command and returns true.
	Command(c *Conn, args [][]byte, mayBlock bool) bool
	// Closed is called once, when the connection has closed, after its
	// last Command.
	Closed()
}

// Previewer is a Session that wants to see, before a command that might
// block runs, the complete commands the client sent after it (the rest of
// a pipeline), so that it can start, without waiting, what they will wait
// for: their waits then overlap instead of adding up. Preview must not
// block, write, nor keep args (they point into the read buffer).
type Previewer interface {
	Preview(c *Conn, args [][]byte)
}

// TurnEnder is a Session told when each turn of its connection ends: the
// commands run together (the complete ones read at once, up to
// MaxPipeline), or one command that might block. EndTurn is called by the
// goroutine that ran them, after the last one and before their replies
// are written; it must not block. (leaf's server times its commands by
// turns, which costs two clock reads per turn rather than per command.)
type TurnEnder interface {
	EndTurn(c *Conn)
}

// maxPreview bounds the commands previewed after one that might block.
const maxPreview = 4096

// Options configure a Server. The zero value has the defaults below.
type Options struct {
	// Logger receives connection events (at debug level) and errors; nil
	// discards them.
	Logger *slog.Logger
	// EventLoops is the number of event loops serving plain TCP
	// connections where the system has them (Linux, see loop_linux.go):
	// 0 is DefaultEventLoops. A negative number turns them off: every
	// connection then has a goroutine of its own, as TLS connections,
	// wrapped listeners and other systems always do.
	EventLoops int
	// MaxClients is the most connections open at once; a new connection
	// beyond it is answered "-ERR max number of clients reached" and
	// closed. 0 is DefaultMaxClients.
	MaxClients int
	// MaxRequestBytes is the largest request, one command with its
	// arguments. A larger one is answered a protocol error as soon as a
	// count or a length shows it, before the rest is read, and the
	// connection is closed, so a read buffer never grows beyond it (or
	// 64 KiB). 0 is DefaultMaxRequestBytes.
	MaxRequestBytes int
	// MaxPipeline is the most commands a connection runs in one turn;
	// then its replies are written and, on an event loop, the other
	// connections are served before it runs the rest. 0 is
	// DefaultMaxPipeline.
	MaxPipeline int
	// IdleTimeout, when positive, closes a connection that sent no
	// request and took no reply for this long, as Redis's timeout. An
	// event loop checks every quarter of it (at most every second), so a
	// connection may stay that much longer.
	IdleTimeout time.Duration
	// TLS, when not nil, makes Serve speak TLS; each TLS connection has a
	// goroutine of its own.
	TLS *tls.Config
	// AuthTimeout, when positive, closes a connection still
	// unauthenticated (Conn.SetUnauthenticated) this long after it was
	// accepted, so that strangers cannot hold MaxClients. Checked as the
	// idle timeout is: an event loop may take a quarter of it (at most a
	// second) longer.
	AuthTimeout time.Duration
	// Arrived, when set, is told a clock reading (time.Now) taken after
	// requests were read and before any of them runs: once per round of
	// an event loop, once per read of a goroutine's connection. Every
	// request about to run arrived before that reading. leaf checks
	// there that its right to serve from its cache still held when they
	// arrived (segment.Allocator.Admit): a process stopped or a machine
	// suspended wakes up with requests read and timers not yet run.
	Arrived func(now time.Time)
}

// The defaults of Options' limits.
const (
	DefaultMaxClients      = 10000
	DefaultMaxRequestBytes = 64 << 10
	DefaultMaxPipeline     = 1024
)

// DefaultEventLoops is the number of event loops when Options.EventLoops
// is 0: one per core (GOMAXPROCS) but one, at least one. The core left
// runs what is not a loop: the goroutines of commands that block, the
// allocator's loads, the garbage collector, the HTTP server. (Redis gives
// the same advice for its I/O threads.) On 2 cores, where a client shares
// the machine, a second loop cost 1.5x the CPU per request and served
// fewer (docs/performance.md).
func DefaultEventLoops() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// Replies are written when every command read so far has run, or earlier
// once this many bytes are waiting or MaxPipeline commands have run: a
// connection's reply buffer holds at most this much plus one reply, and
// nothing more is read from a client that does not take its replies.
const flushAt = 64 << 10

// maxKeptOut is the largest reply buffer kept between writes; a larger one
// (a big CLIENT LIST) is dropped once written.
const maxKeptOut = 256 << 10

// ShutdownFlush is how long Shutdown lets connections take the replies
// of the commands that ran before it fenced them (see Shutdown).
const ShutdownFlush = time.Second

// tlsHandshakeTimeout bounds a TLS handshake, so a client that connects
// and says nothing (or not TLS) holds its goroutine no longer.
const tlsHandshakeTimeout = 10 * time.Second

// maxRefusing bounds the goroutines refusing TLS connections at
// MaxClients; beyond it a refused connection is closed without a word.
const maxRefusing = 64

// Server accepts connections and runs their commands through a Handler.
// Create it with NewServer, run it with Serve, stop it with Shutdown.
type Server struct {
	h    Handler
	opts Options
	log  *slog.Logger

	// Options' limits with their defaults applied.
	maxClients, maxRequest, maxPipeline int
	// flushWindow is ShutdownFlush (tests lengthen it, so that a slow
	// machine cannot make them fail).
	flushWindow time.Duration

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*Conn]struct{}
	open     sync.WaitGroup // open connections; Add under mu, never after closing
	loops    []*loop        // made by Serve
	nextLoop int            // round robin over loops, under mu
	closing  bool
	flushBy  time.Time     // the end of Shutdown's flush window, set before closing
	served   chan struct{} // closed when Serve returns
	shutdown sync.Once
	fenced   chan struct{} // closed once Shutdown has fenced every connection

	accepted     atomic.Int64
	authTimeouts atomic.Int64 // connections closed by AuthTimeout
	rejected     atomic.Int64 // connections refused at MaxClients
	// Bytes read and written by the connections already closed; the open
	// ones count their own (Conn.NetIn, Conn.NetOut).
	doneIn, doneOut atomic.Int64
	refusing        atomic.Int64 // goroutines telling a TLS client so
}

// NewServer returns a server running h's sessions. It does not listen:
// call Serve.
func NewServer(h Handler, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		h:           h,
		opts:        opts,
		log:         opts.Logger,
		maxClients:  orDefault(opts.MaxClients, DefaultMaxClients),
		maxRequest:  orDefault(opts.MaxRequestBytes, DefaultMaxRequestBytes),
		maxPipeline: orDefault(opts.MaxPipeline, DefaultMaxPipeline),
		flushWindow: ShutdownFlush,
		conns:       map[*Conn]struct{}{},
		served:      make(chan struct{}),
		fenced:      make(chan struct{}),
	}
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// MaxClients is the most connections served at once.
func (s *Server) MaxClients() int { return s.maxClients }

// Stats are a Server's connection counts.
type Stats struct {
	Open     int   // connections open now
	Accepted int64 // connections accepted since start, refused ones not included
	Rejected int64 // connections refused at MaxClients
	// AuthTimeouts counts the connections closed for not authenticating
	// within Options.AuthTimeout.
	AuthTimeouts int64
	// Bytes read from and written to clients since start, open
	// connections included; refusals at MaxClients are not counted.
	NetIn, NetOut int64
}

// Stats returns the connection counts. It reads every open connection's
// byte counts, under the lock that accepting and closing take.
func (s *Server) Stats() Stats {
	st := Stats{Accepted: s.accepted.Load(), Rejected: s.rejected.Load(), AuthTimeouts: s.authTimeouts.Load()}
	s.mu.Lock()
	st.Open = len(s.conns)
	// The closed connections' totals are read under the lock closed
	// takes to forget a connection, so none is missed or counted twice.
	st.NetIn, st.NetOut = s.doneIn.Load(), s.doneOut.Load()
	for c := range s.conns {
		st.NetIn += c.nin.Load()
		st.NetOut += c.nout.Load()
	}
	s.mu.Unlock()
	return st
}

// Serve accepts connections on ln until Shutdown, then returns
// ErrServerClosed. With Options.TLS it speaks TLS on ln. ln may be any
// listener: when closed, its Accept must fail. Plain TCP connections go
// to an event loop where there is one, any other to a goroutine of its
// own.
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
		return errors.New("resp: Serve called twice")
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

// startLoops starts the event loops; s.mu is held.
func (s *Server) startLoops() {
	n := s.opts.EventLoops
	if !haveLoops || n < 0 || s.opts.TLS != nil {
		return
	}
	if n == 0 {
		n = DefaultEventLoops()
	}
	for i := range n {
		l, err := newLoop(s, i)
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
// of its own, or refuses it during shutdown or beyond MaxClients.
func (s *Server) accept(nc net.Conn) {
	// Only this goroutine adds connections, so the count cannot grow
	// between this check and the registration below.
	s.mu.Lock()
	full := len(s.conns) >= s.maxClients
	s.mu.Unlock()
	if full {
		s.refuse(nc)
		return
	}
	var c *Conn
	if tc, ok := nc.(*net.TCPConn); ok {
		if l := s.pickLoop(); l != nil {
			var err error
			if c, err = l.adopt(tc); err != nil {
				s.log.Warn("event loop: cannot take the connection over; it gets a goroutine", "err", err)
			}
		}
	}
	if c == nil {
		c = newGoConn(nc)
	}
	c.srv = s
	c.born = time.Now()
	c.rd.setLimits(s.maxRequest, false)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.closeSocket()
		return
	}
	s.conns[c] = struct{}{}
	s.open.Add(1)
	s.mu.Unlock()
	s.accepted.Add(1)
	c.sess = s.h.Open(c)
	c.ender, _ = c.sess.(TurnEnder)
	if c.lp != nil {
		c.lp.give(c)
		return
	}
	go s.serveConn(c)
}

// refuse answers a connection beyond MaxClients with Redis's error and
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

// closed unregisters a connection that has closed and tells its session.
func (s *Server) closed(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.doneIn.Add(c.nin.Load())
	s.doneOut.Add(c.nout.Load())
	s.mu.Unlock()
	c.sess.Closed()
	s.open.Done()
}

// Shutdown stops accepting connections, lets the commands in flight
// finish, then closes the connections. When it returns no Command is
// running and none will start.
//
// The fence: each connection runs its commands holding a mutex of its
// own, which Shutdown takes in turn, waiting for the commands in flight,
// and marks the connection fenced, so it runs no command after. Every
// connection, on an event loop or a goroutine, then has the same window
// to take the replies of the commands that ran: until they are written,
// at most ShutdownFlush after the fence, or until ctx ends if sooner;
// then it is closed. Commands buffered but not run get no reply.
//
// If ctx ends first, connections are cut at once and Shutdown returns
// ctx's error once no Command runs; a Command waiting then is the
// Handler's to cancel (leaf's server cancels its database calls with
// ctx).
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
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	loops := s.loops
	s.mu.Unlock()

	if ln != nil {
		ln.Close() // stop accepting
	}
	for _, c := range conns {
		c.fence()
	}
	flushBy := time.Now().Add(s.flushWindow)
	if d, ok := ctx.Deadline(); ok && d.Before(flushBy) {
		flushBy = d
	}
	s.mu.Lock()
	s.flushBy = flushBy
	s.mu.Unlock()
	close(s.fenced)
	s.log.Info("server stopped", "connections", len(conns))

	for _, c := range conns {
		c.wake(flushBy)
	}
	for _, l := range loops {
		l.shut(flushBy)
	}
	done := make(chan struct{})
	go func() {
		s.open.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range conns {
			c.cut()
		}
		for _, l := range loops {
			l.cut()
		}
		<-done
	}
	for _, l := range loops {
		l.stop()
	}
	if ln != nil {
		<-s.served
	}
	return ctx.Err()
}

// shutdownDeadline is the end of Shutdown's flush window.
func (s *Server) shutdownDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushBy
}
