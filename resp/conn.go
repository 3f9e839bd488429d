package resp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Conn is one client connection. Its Session writes replies with the
// embedded Writer and asks the rest of the connection through the methods
// below. Whatever the client sent is read, every complete command in it
// runs, and the replies go out together, so a pipeline of n commands
// costs one read and one write; a command whose Session says it might
// block first has the replies before it written.
//
// A connection is served by an event loop (loop_linux.go) or by a
// goroutine of its own (serveConn); both run commands with run. One
// goroutine at a time uses a Conn: its loop's, the goroutine its loop
// hands it to for a command that might block, or its own.
type Conn struct {
	Writer

	srv   *Server
	sess  Session
	ender TurnEnder // sess, when it is one
	rd    reader
	addr  string // the client's address
	laddr string // the local address

	// Bytes read from and written to the socket, for the server's
	// statistics (an add per system call, on the connection's own line).
	nin, nout atomic.Int64

	// killed: Kill asked for the connection to close. pending holds what
	// Push queued (under pmu) for the connection's goroutine to write.
	killed  atomic.Bool
	pmu     sync.Mutex
	pending []byte

	// mu is held while commands run. Shutdown takes it to wait for the
	// commands in flight and sets fenced, after which none runs.
	mu     sync.Mutex
	fenced bool

	// born is when the connection was accepted (Options.AuthTimeout);
	// bornTick the same in its loop's sweeps.
	born     time.Time
	bornTick int64

	// The state of the last turn (run, runHeld), for the connection's
	// server to act on once the replies are written. hangup: close (QUIT,
	// a protocol error, Shutdown). held: a command that might block, to
	// run with mayBlock (its arguments point into rd's buffer, untouched
	// until it has run). more: commands are left in the buffer.
	hangup bool
	held   [][]byte
	more   bool

	// Goroutine mode: the socket, its descriptor (for FD), and stopping,
	// set by wake (Shutdown) before its deadlines.
	nc       net.Conn
	sysfd    int
	stopping atomic.Bool

	// Loop mode (the loop's fields): the socket, owned by the Conn; woff,
	// bytes of out already written; away, handed to a goroutine; queued,
	// in the loop's run queue; blocked, waiting to write (the socket is
	// full); gone, closed; seen, the loop's tick when the connection last
	// read a request or took a reply (the idle timeout).
	lp                          *loop
	fd                          int
	woff                        int
	away, queued, blocked, gone bool
	seen                        int64
}

// NewConn returns a Conn on no socket, for running a Session's commands
// directly (tests and benchmarks of a Handler): replies stay in its
// Writer, see Bytes and Reset.
func NewConn(remoteAddr, localAddr string) *Conn {
	return &Conn{addr: remoteAddr, laddr: localAddr, fd: -1}
}

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() string { return c.addr }

// NetIn is the number of bytes read from the client so far.
func (c *Conn) NetIn() int64 { return c.nin.Load() }

// NetOut is the number of bytes written to the client so far.
func (c *Conn) NetOut() int64 { return c.nout.Load() }

// FD is the connection's file descriptor as the system numbers it (its
// event loop's copy on a loop), -1 when it has none (NewConn).
func (c *Conn) FD() int {
	if c.nc != nil {
		return c.sysfd
	}
	return c.fd
}

// Kill closes the connection, from any goroutine: at once when it waits
// for the client or for room to write, else as soon as the command it
// runs ends; replies not yet written are dropped (CLIENT KILL, as Redis
// closes a client "as soon as possible"). A command closing its own
// connection after its reply calls Quit instead.
func (c *Conn) Kill() {
	if !c.killed.CompareAndSwap(false, true) {
		return
	}
	if c.lp != nil {
		c.lp.kill(c)
		return
	}
	if c.nc != nil {
		// After killed is set: serveConn checks it after setting its own
		// deadlines, so whichever comes last, the read or write ends.
		now := time.Now()
		c.nc.SetReadDeadline(now)
		c.nc.SetWriteDeadline(now)
	}
}

// Push queues b to be written to the client outside any reply, from any
// goroutine (a MONITOR line): the connection's own goroutine writes it
// after the replies in progress, without waiting for a request. It
// queues nothing and reports false when more than limit bytes would wait
// unwritten, so a client that does not read cannot make the server hold
// more: the caller decides what to do with it (MONITOR kills it).
func (c *Conn) Push(b []byte, limit int) bool {
	c.pmu.Lock()
	if len(c.pending)+len(b) > limit || c.killed.Load() {
		c.pmu.Unlock()
		return false
	}
	first := len(c.pending) == 0
	c.pending = append(c.pending, b...)
	c.pmu.Unlock()
	if !first {
		return true // its goroutine was told already
	}
	if c.lp != nil {
		c.lp.pushed(c)
	} else if c.nc != nil {
		c.nc.SetReadDeadline(time.Now()) // wakes serveConn's read
	}
	return true
}

// takePending moves what Push queued to the reply buffer, by the
// connection's goroutine; it reports whether there was any.
func (c *Conn) takePending() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if len(c.pending) == 0 {
		return false
	}
	c.out = append(c.out, c.pending...)
	if cap(c.pending) > maxKeptOut {
		c.pending = nil
	} else {
		c.pending = c.pending[:0]
	}
	return true
}

// LocalAddr is the address the client connected to.
func (c *Conn) LocalAddr() string { return c.laddr }

// Quit drops the commands the client sent after the current one and
// closes the connection once the replies so far are written (QUIT).
func (c *Conn) Quit() {
	c.rd.discard()
	c.hangup = true
}

// SetUnauthenticated applies, while on, Redis's caps on a client that has
// not authenticated while a password is set: a request of at most 10
// arguments of at most 16384 bytes each, so a stranger cannot make the
// server hold a large one.
func (c *Conn) SetUnauthenticated(on bool) {
	max := DefaultMaxRequestBytes
	if c.srv != nil {
		max = c.srv.maxRequest
	}
	c.rd.setLimits(max, on)
}

// run runs the complete commands in the read buffer, holding the fence
// (mu), and records what the connection does next: after MaxPipeline
// commands or once flushAt bytes of replies wait it stops with more set,
// so the replies are written and (on a loop) the other connections served
// before the rest; at a command that might block (mayBlock false) it
// stops with the command in held; QUIT, a protocol error or the fence
// set hangup.
func (c *Conn) run(mayBlock bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.endTurn()
	c.more = false
	if c.fenced {
		c.hangup = true
		return
	}
	batch := c.srv.maxPipeline
	for n := 1; ; n++ {
		args, err := c.rd.next()
		if err != nil {
			var pe *protoError
			if errors.As(err, &pe) {
				c.WriteError("ERR " + pe.Error())
				c.srv.log.Debug("protocol error: closing the connection", "addr", c.addr, "err", pe.Error())
			}
			c.hangup = true
			return
		}
		if args == nil {
			return
		}
		if !c.sess.Command(c, args, mayBlock) {
			c.held = c.preview(args)
			return
		}
		if c.hangup {
			return
		}
		if n >= batch || len(c.out) >= flushAt {
			c.more = c.rd.buffered()
			return
		}
	}
}

// preview shows the commands buffered after held, the command just
// parsed, to a Session that is a Previewer, each once (a pipeline's
// commands are not shown again at its next held command), then parses
// held again (the previewed commands reused its slices) and returns it.
func (c *Conn) preview(held [][]byte) [][]byte {
	p, ok := c.sess.(Previewer)
	r := &c.rd
	if !ok || max(r.start, r.ahead) >= r.end {
		return held
	}
	at := r.prev
	r.start = max(r.start, r.ahead)
	for range maxPreview {
		args, err := r.next()
		if err != nil || args == nil {
			break // a malformed command is met again, and answered, in turn
		}
		p.Preview(c, args)
	}
	r.ahead = max(r.ahead, r.start)
	r.start = at
	held, _ = r.next() // the same bytes: the same command, r.start after it again
	return held
}

// runHeld runs the held command where it may block, holding the fence.
func (c *Conn) runHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.endTurn()
	args := c.held
	c.held = nil
	if c.fenced {
		c.hangup = true
		return
	}
	c.sess.Command(c, args, true)
	c.more = !c.hangup && c.rd.buffered()
}

// endTurn tells a TurnEnder session that the turn is over.
func (c *Conn) endTurn() {
	if c.ender != nil {
		c.ender.EndTurn(c)
	}
}

// fence waits for the commands in flight and stops every later one.
func (c *Conn) fence() {
	c.mu.Lock()
	c.fenced = true
	c.mu.Unlock()
}

// newGoConn is a connection served by a goroutine.
func newGoConn(nc net.Conn) *Conn {
	c := &Conn{nc: nc, fd: -1, sysfd: -1, addr: nc.RemoteAddr().String(), laddr: nc.LocalAddr().String()}
	c.rd.rd = nc
	c.rd.count = &c.nin
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if sc, ok := raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { c.sysfd = int(fd) })
		}
	}
	return c
}

// serveConn runs a goroutine's connection until the client leaves, a
// protocol error, QUIT, the idle timeout, or Shutdown.
func (s *Server) serveConn(c *Conn) {
	var err error
	defer func() { s.closeGoConn(c, err) }()
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err = handshake(tc); err != nil {
			return
		}
	}
	idle := s.opts.IdleTimeout
	woken := false // a deadline was moved to wake the read (Push)
	for {
		c.run(false)
		if c.held != nil {
			// Write the replies before a command that might block, then
			// run it: they go out as they are ready.
			if err = c.flush(idle); err != nil {
				return
			}
			c.runHeld()
		}
		c.takePending()
		if err = c.flush(idle); err != nil || c.hangup {
			return
		}
		if c.more {
			continue
		}
		// The read deadline is set before these checks: wake, Kill and
		// Push set their flag or data before their own deadline, so
		// whichever comes last, the read ends or the check sees it. It is
		// the idle timeout's, or the end of the time to authenticate.
		var deadline time.Time
		if idle > 0 || s.opts.AuthTimeout > 0 {
			deadline = c.readDeadline(idle)
			c.nc.SetReadDeadline(deadline)
		} else if woken {
			c.nc.SetReadDeadline(time.Time{})
		}
		woken = false
		if c.stopping.Load() || c.killed.Load() {
			return
		}
		if c.takePending() {
			if err = c.flush(idle); err != nil {
				return
			}
		}
		if err = c.rd.fill(); err != nil {
			// A deadline that is not the idle timeout's, with no Kill or
			// Shutdown behind it, is Push's: write what it queued.
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.killed.Load() && !c.stopping.Load() &&
				(deadline.IsZero() || time.Now().Before(deadline)) {
				err, woken = nil, true
				continue
			}
			return
		}
		if arrived := s.opts.Arrived; arrived != nil {
			arrived(time.Now()) // after the read: see Options.Arrived
		}
	}
}

// handshake runs a TLS handshake within tlsHandshakeTimeout.
func handshake(tc *tls.Conn) error {
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("tls handshake: %v", err) // %v: not the idle timeout's deadline
	}
	return tc.SetDeadline(time.Time{})
}

// flush writes a goroutine's pending replies; with an idle timeout, a
// client that takes none of them for that long is cut off. Once Shutdown
// has woken the connection, its flush window bounds the write instead.
func (c *Conn) flush(idle time.Duration) error {
	if len(c.out) == 0 {
		return nil
	}
	if idle > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(idle))
	}
	if c.stopping.Load() { // after the deadline above: wake's wins
		c.nc.SetWriteDeadline(c.srv.shutdownDeadline())
	}
	if c.killed.Load() { // after the deadlines above: Kill's wins
		return errKilled
	}
	n, err := c.nc.Write(c.out)
	c.nout.Add(int64(n))
	c.sent()
	return err
}

// sent empties the reply buffer once written.
func (c *Conn) sent() {
	c.woff = 0
	if cap(c.out) > maxKeptOut {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
}

// closeSocket closes a connection that was never served.
func (c *Conn) closeSocket() {
	if c.nc != nil {
		c.nc.Close()
	} else {
		closeFD(c.fd)
	}
}

// closeGoConn closes a goroutine's connection.
func (s *Server) closeGoConn(c *Conn, err error) {
	deadline := errors.Is(err, os.ErrDeadlineExceeded) && !c.stopping.Load()
	unauthed := deadline && c.authExpired(time.Now())
	if unauthed {
		s.authTimedOut(c) // counted before the client can see the end
	}
	c.nc.Close()
	s.closed(c)
	switch {
	case deadline:
		if !unauthed {
			s.log.Debug("closing idle client", "addr", c.addr)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
		s.log.Debug("client connection ended", "addr", c.addr, "err", err)
	}
}

// wake makes a goroutine's connection leave a blocking read, and bounds
// the write of its last replies by Shutdown's flush window. (Loops close
// their connections themselves: see loop.shut.)
func (c *Conn) wake(flushBy time.Time) {
	c.stopping.Store(true)
	if c.nc == nil {
		return
	}
	c.nc.SetReadDeadline(time.Now())
	c.nc.SetWriteDeadline(flushBy)
}

// cut ends a goroutine's connection at once (Shutdown's context ended).
func (c *Conn) cut() {
	if c.nc != nil {
		c.nc.Close()
	}
}

// TLSState is the TLS state of a connection whose handshake is done;
// false for a plain connection.
func (c *Conn) TLSState() (tls.ConnectionState, bool) {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return tls.ConnectionState{}, false
	}
	st := tc.ConnectionState()
	return st, st.HandshakeComplete
}
