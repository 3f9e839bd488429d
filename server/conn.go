package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Replies are written when every command read so far has run, or earlier
// once this many bytes are waiting or server.max_pipeline commands have
// run: a connection's reply buffer holds at most this much plus one reply.
const flushAt = 64 << 10

// maxKeptOut is the largest reply buffer kept between writes; a larger one
// (a big CLIENT LIST) is dropped once written.
const maxKeptOut = 256 << 10

// shutdownFlush bounds how long Shutdown lets a connection write the
// replies of the commands that ran before the fence.
const shutdownFlush = time.Second

// tlsHandshakeTimeout bounds a TLS handshake, so a client that connects
// and says nothing (or not TLS) holds its goroutine no longer.
const tlsHandshakeTimeout = 10 * time.Second

// conn is one client connection: whatever the client sent is read, every
// complete command in it runs, and all their replies are written with one
// write call, so a pipeline of n commands costs one read and one write, and
// a command allocates nothing on the way. A plain TCP connection on Linux
// is served by an event loop (loop_linux.go), any other (TLS, a wrapped
// listener, another system) by a goroutine of its own (serveConn); both
// run commands with runCommands.
//
// conn implements redcon.Conn, the interface handlers write replies
// through; replies are appended to out. One goroutine at a time uses a
// conn: its own, or its loop's, or the goroutine the loop hands it to for
// a command that might block; Shutdown only calls wake.
type conn struct {
	nc    net.Conn // goroutine mode; nil in loop mode
	lp    *loop    // loop mode; nil in goroutine mode
	fd    int      // loop mode: the socket, owned by the conn
	addr  string   // the client's address
	laddr string   // the local address
	ctx   any      // the *client, as redcon.Conn's Context
	rd    reader
	out   []byte // replies not yet written
	woff  int    // loop mode: bytes of out already written
	away  bool   // loop mode: handed to a goroutine (the loop's field)
	gone  bool   // loop mode: closed (the loop's field)
	// hangup: a handler called Close, or a protocol error was answered:
	// write what is pending and close.
	hangup bool
	// stopping is set by wake (Shutdown), before its deadlines.
	stopping atomic.Bool
	// Loop mode (the loop's fields): queued, the connection stopped at
	// max_pipeline with commands left in its buffer and runs them on the
	// loop's next round; seen, the loop's tick when the connection last
	// read a request or took a reply (the idle timeout).
	queued bool
	seen   int64
}

var _ redcon.Conn = (*conn)(nil)

// newConn is a connection served by a goroutine.
func newConn(nc net.Conn) *conn {
	cn := &conn{nc: nc, fd: -1, addr: nc.RemoteAddr().String(), laddr: nc.LocalAddr().String()}
	cn.rd.rd = nc
	cn.rd.setLimits(0, false) // accept sets the server's
	return cn
}

// serveConn runs a connection until the client leaves, a protocol error,
// QUIT, the idle timeout, or Shutdown.
func (s *Server) serveConn(cn *conn, c *client) {
	var err error
	defer func() { s.closeConn(cn, c, err) }()
	if tc, ok := cn.nc.(*tls.Conn); ok {
		if err = handshake(tc); err != nil {
			return
		}
	}
	idle := s.opts.IdleTimeout
	for {
		more, stop, _ := s.runCommands(cn, c, false)
		if err = cn.flush(idle); err != nil || stop {
			return
		}
		if more {
			continue
		}
		// The idle timeout's read deadline is set before this check: wake
		// sets stopping before its own deadline, so whichever comes last,
		// the read ends.
		if idle > 0 {
			cn.nc.SetReadDeadline(time.Now().Add(idle))
		}
		if cn.stopping.Load() {
			return
		}
		if err = cn.rd.fill(); err != nil {
			return
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

// runCommands runs the complete commands in the read buffer, holding the
// client's mutex: that is the Shutdown fence (see Shutdown). It stops early,
// reporting more, after max_pipeline commands or once flushAt bytes of
// replies wait: the caller writes them before running the rest (an event
// loop first serves its other connections), so one client's long pipeline
// neither starves the others nor piles up replies. stop means the
// connection is done (QUIT, a protocol error, Shutdown). In an event loop
// (inLoop) it stops at a command that might block, leaving it unread, and
// reports handoff.
func (s *Server) runCommands(cn *conn, c *client, inLoop bool) (more, stop, handoff bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, true, false
	}
	c.inLoop = inLoop
	batch := s.maxPipeline
	for n := 1; ; n++ {
		args, err := cn.rd.next()
		if err != nil {
			var pe *protoError
			if errors.As(err, &pe) {
				cn.WriteError("ERR " + sanitize(pe.Error()))
				s.log.Debug("protocol error: closing the connection", "id", c.id, "addr", c.addr, "err", pe.Error())
			}
			return false, true, false
		}
		if args == nil {
			return false, false, false
		}
		s.dispatch(c, cn, args)
		if cn.rd.unauth && c.authed { // AUTH or HELLO ... AUTH succeeded: Redis's caps end
			cn.rd.setLimits(s.maxRequest, false)
		}
		if c.handoff {
			c.handoff = false
			cn.rd.unread()
			return false, false, true
		}
		if c.quit || cn.hangup {
			return false, true, false
		}
		if n >= batch || len(cn.out) >= flushAt {
			return cn.rd.buffered(), false, false
		}
	}
}

// flush writes the pending replies; with an idle timeout, a client that
// takes none of them for that long is cut off.
func (cn *conn) flush(idle time.Duration) error {
	if len(cn.out) == 0 {
		return nil
	}
	if idle > 0 && !cn.stopping.Load() {
		cn.nc.SetWriteDeadline(time.Now().Add(idle))
	}
	_, err := cn.nc.Write(cn.out)
	if cap(cn.out) > maxKeptOut {
		cn.out = nil
	} else {
		cn.out = cn.out[:0]
	}
	return err
}

// closeSocket closes a connection that was never served.
func (cn *conn) closeSocket() {
	if cn.nc != nil {
		cn.nc.Close()
	} else {
		closeFD(cn.fd)
	}
}

// closeConn closes a goroutine's connection and unregisters its client.
func (s *Server) closeConn(cn *conn, c *client, err error) {
	cn.nc.Close()
	s.unregister(c)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if !cn.stopping.Load() {
			s.log.Debug("closing idle client", "id", c.id, "addr", c.addr)
		}
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
		s.log.Debug("client connection ended", "id", c.id, "addr", c.addr, "err", err)
	}
}

// wake makes a connection's goroutine leave a blocking read, and bounds
// the write of its last replies; Shutdown calls it after the fence. (Loops
// close their connections themselves: see loop.stop.)
func (cn *conn) wake() {
	cn.stopping.Store(true)
	if cn.nc == nil {
		return
	}
	now := time.Now()
	cn.nc.SetReadDeadline(now)
	cn.nc.SetWriteDeadline(now.Add(shutdownFlush))
}

// The redcon.Conn interface, for handlers.

// RemoteAddr is the client's address.
func (cn *conn) RemoteAddr() string { return cn.addr }

// Close asks to close the connection once the pending replies are
// written (after the current command). It is safe only on the conn's own
// goroutine, as every method of redcon.Conn.
func (cn *conn) Close() error {
	cn.hangup = true
	return nil
}

func (cn *conn) WriteError(msg string)       { cn.out = redcon.AppendError(cn.out, msg) }
func (cn *conn) WriteString(str string)      { cn.out = redcon.AppendString(cn.out, str) }
func (cn *conn) WriteBulk(bulk []byte)       { cn.out = redcon.AppendBulk(cn.out, bulk) }
func (cn *conn) WriteBulkString(bulk string) { cn.out = redcon.AppendBulkString(cn.out, bulk) }
func (cn *conn) WriteInt(num int)            { cn.out = redcon.AppendInt(cn.out, int64(num)) }
func (cn *conn) WriteInt64(num int64)        { cn.out = redcon.AppendInt(cn.out, num) }
func (cn *conn) WriteUint64(num uint64)      { cn.out = redcon.AppendUint(cn.out, num) }
func (cn *conn) WriteArray(count int)        { cn.out = redcon.AppendArray(cn.out, count) }
func (cn *conn) WriteNull()                  { cn.out = redcon.AppendNull(cn.out) }
func (cn *conn) WriteRaw(data []byte)        { cn.out = append(cn.out, data...) }
func (cn *conn) WriteAny(v any)              { cn.out = redcon.AppendAny(cn.out, v) }

// WriteBulkFrom writes a bulk string of the (up to) n bytes read from rb.
func (cn *conn) WriteBulkFrom(n int64, rb io.Reader) {
	data, _ := io.ReadAll(io.LimitReader(rb, n))
	cn.out = redcon.AppendBulk(cn.out, data)
}

// Context is the connection's *client.
func (cn *conn) Context() any { return cn.ctx }

// SetContext sets what Context returns.
func (cn *conn) SetContext(v any) { cn.ctx = v }

// SetReadBuffer does nothing: the read buffer adapts by itself.
func (cn *conn) SetReadBuffer(int) {}

// Detach is not supported: leaf has no command that takes a connection
// over (no pub/sub).
func (cn *conn) Detach() redcon.DetachedConn { panic("server: Detach is not supported") }

// ReadPipeline drops the commands the client sent after the current one
// (QUIT). It returns nil: commands are parsed one at a time, in place.
func (cn *conn) ReadPipeline() []redcon.Command {
	cn.rd.discard()
	return nil
}

// PeekPipeline returns nil: commands are parsed one at a time, in place.
func (cn *conn) PeekPipeline() []redcon.Command { return nil }

// NetConn is the underlying connection; nil when an event loop serves it
// (the loop owns the socket's descriptor).
func (cn *conn) NetConn() net.Conn { return cn.nc }
