//go:build linux

package server

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Event loops serve plain TCP connections the way redis-server does: one
// goroutine waits in epoll_wait for all of its connections, reads each
// ready one once, runs its complete commands and writes their replies.
// A connection then costs no goroutine wake-up per request and no read
// that finds nothing, which a goroutine per connection cannot avoid (Go's
// poller reads first and parks on EAGAIN); at one request per round trip
// that is what separates the two (README.md, Performance).
//
// A loop never blocks but in epoll_wait. A command that might (the
// database, a segment load, anything not in inline.go) is handed with its
// connection to a goroutine, which runs the connection's buffered commands
// and gives the connection back; the loop then writes the replies and
// watches the socket again.
//
// A connection belongs to one goroutine at a time: its loop, or the
// goroutine the loop handed it to (away). The loop alone reads and writes
// its sockets, with non-blocking calls; a reply that does not fit the
// socket is kept and written when epoll says it is writable, and the
// connection reads nothing more until then.
//
// Limits on clients, request size and commands per batch live in the code
// both kinds of connection share (accept, reader, runCommands). A
// connection that stops at max_pipeline with commands left in its buffer
// is queued and runs its next batch on the loop's next round, after the
// other ready connections, so a deep pipeline cannot starve them.
//
// The idle timeout, which a goroutine's connection gets from read
// deadlines, is a coarse sweep here: a ticker wakes the loop every quarter
// of the timeout, the loop advances its tick and closes the connections
// whose last read (or reply taken) is older than the timeout in ticks. A
// read only stores the current tick: no clock, no system call.

// haveLoops reports whether this system has event loops.
const haveLoops = true

// errAgain is a non-blocking read that found nothing.
var errAgain = errors.New("server: nothing to read")

// fdReader reads a non-blocking socket.
type fdReader struct{ fd int }

func (r *fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errAgain
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// loop is one event loop.
type loop struct {
	s      *Server
	epfd   int
	wakeR  int // a pipe: a byte written to wakeW wakes the loop
	wakeW  int
	events []syscall.EpollEvent
	ev     syscall.EpollEvent // argument of epoll_ctl, kept off the heap
	conns  map[int]*conn      // by descriptor, away ones included
	spare  []*conn
	// pending are the connections with replies to write at the end of
	// this round of events: writing them together, as redis-server does,
	// lets clients read many replies per wake-up.
	pending []*conn
	// backlog are the connections that stopped at max_pipeline with
	// commands in their buffer (conn.queued): each runs one more batch on
	// the next round. ready is the previous round's backlog, being run.
	backlog, ready []*conn

	// The idle timeout (Options.IdleTimeout): tick counts the sweeps,
	// idleTicks is the age in ticks at which a connection is closed; 0
	// when there is no timeout.
	tick, idleTicks int64

	mu      sync.Mutex
	queue   []*conn // new connections, and connections back from a goroutine
	closing bool    // Shutdown: close every connection
	exit    bool    // Shutdown, once no connection is left: end
	sweep   bool    // the ticker's: time to close idle connections
	done    chan struct{}
}

// sweepEvery is the period of the idle sweep for an idle timeout d, and
// the timeout in sweeps: a connection is closed between d and d plus one
// period after its last read.
func sweepEvery(d time.Duration) (period time.Duration, ticks int64) {
	period = min(max(d/4, time.Millisecond), time.Second)
	return period, int64((d+period-1)/period) + 1
}

// newLoop starts an event loop.
func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("pipe2", err)
	}
	l := &loop{
		s:      s,
		epfd:   epfd,
		wakeR:  p[0],
		wakeW:  p[1],
		events: make([]syscall.EpollEvent, 256),
		conns:  map[int]*conn{},
		done:   make(chan struct{}),
	}
	if err := l.ctl(syscall.EPOLL_CTL_ADD, l.wakeR, syscall.EPOLLIN); err != nil {
		l.release()
		return nil, err
	}
	go l.run()
	if d := s.opts.IdleTimeout; d > 0 {
		var period time.Duration
		period, l.idleTicks = sweepEvery(d)
		go l.ticker(period)
	}
	return l, nil
}

// ticker asks the loop for an idle sweep every period, until it ends.
func (l *loop) ticker(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.mu.Lock()
			l.sweep = true
			l.mu.Unlock()
			l.wake()
		}
	}
}

// release closes the loop's descriptors.
func (l *loop) release() {
	syscall.Close(l.epfd)
	syscall.Close(l.wakeR)
	syscall.Close(l.wakeW)
}

func (l *loop) ctl(op, fd int, events uint32) error {
	l.ev = syscall.EpollEvent{Events: events, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, op, fd, &l.ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// adopt takes a TCP connection over: the loop keeps a duplicate of its
// descriptor and closes the net.Conn, so Go's poller forgets the socket.
func (l *loop) adopt(tc *net.TCPConn) (*conn, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	err = rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			dupErr = os.NewSyscallError("fcntl", e)
			return
		}
		fd = int(r)
	})
	if err == nil {
		err = dupErr
	}
	if err != nil {
		return nil, err
	}
	// The duplicate shares the socket's open file, so it is non-blocking
	// too, as Go made it.
	cn := &conn{lp: l, fd: fd, addr: tc.RemoteAddr().String(), laddr: tc.LocalAddr().String()}
	cn.rd.rd = &fdReader{fd: fd}
	cn.rd.setLimits(0, false) // accept sets the server's
	tc.Close()
	return cn, nil
}

// add gives the loop a connection: a new one, or one back from a goroutine.
func (l *loop) add(cn *conn) {
	l.mu.Lock()
	l.queue = append(l.queue, cn)
	l.mu.Unlock()
	l.wake()
}

// shut makes the loop close every connection, now and as they come.
func (l *loop) shut() {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.wake()
}

// stop ends the loop (once it has no connection) and waits for it.
func (l *loop) stop() {
	l.mu.Lock()
	l.exit = true
	l.mu.Unlock()
	l.wake()
	<-l.done
}

func (l *loop) wake() {
	var b = [1]byte{1}
	// EAGAIN: the pipe is full, so the loop is awake anyway.
	syscall.Write(l.wakeW, b[:])
}

// run is the loop's goroutine.
func (l *loop) run() {
	defer close(l.done)
	defer l.release()
	for {
		// The connections queued last round run this round, after the
		// events: so with a backlog the loop only polls.
		l.ready, l.backlog = l.backlog, l.ready[:0]
		var n int
		if len(l.ready) > 0 {
			n = l.poll()
		} else if n = l.spin(); n == 0 {
			var err error
			n, err = syscall.EpollWait(l.epfd, l.events, -1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				panic("server: epoll_wait: " + err.Error()) // only a bug gets here
			}
		}
		for i := range n {
			ev := &l.events[i]
			fd := int(ev.Fd)
			if fd == l.wakeR {
				if l.drain() {
					return
				}
				continue
			}
			cn := l.conns[fd]
			if cn == nil {
				continue // closed earlier in this batch
			}
			if cn.woff < len(cn.out) {
				l.resume(cn) // writable (or failed): write the rest
				continue
			}
			if cn.queued {
				continue // commands wait in its buffer: it runs below
			}
			switch err := cn.rd.fill(); {
			case err == nil:
				cn.seen = l.tick
				l.process(cn)
			case errors.Is(err, errAgain):
			default:
				l.close(cn, err)
			}
		}
		for i, cn := range l.ready {
			l.ready[i] = nil
			cn.queued = false
			// Closed, away, or waiting to write: resume or the goroutine
			// runs the rest.
			if !cn.gone && !cn.away && cn.woff == len(cn.out) {
				l.process(cn)
			}
		}
		for i, cn := range l.pending {
			l.pending[i] = nil
			if !cn.gone {
				l.flush(cn)
			}
		}
		l.pending = l.pending[:0]
	}
}

// spinFor is how long a loop with nothing to do polls before it sleeps.
// Sleeping in epoll_wait costs a thread wake-up and Go's bookkeeping of a
// blocking system call on the next request; a client that sends its next
// request as soon as it has the reply sends it within microseconds, and
// polling for that long answers it sooner: on a 2-core machine, +10% to
// +15% of requests per second at one request per round trip (and lower
// latency), for a busier core while requests flow. An idle server polls
// once per request, 20 µs, then sleeps.
const spinFor = 20 * time.Microsecond

// spin polls for ready events, without waiting, for up to spinFor; it
// returns their number, 0 when none came. The calls are raw: a call that
// cannot block needs none of the scheduler's bookkeeping.
func (l *loop) spin() int {
	start := time.Now()
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
		if e == 0 && r > 0 {
			return int(r)
		}
		if time.Since(start) >= spinFor {
			return 0
		}
	}
}

// poll returns the ready events without waiting (0 when none).
func (l *loop) poll() int {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(r)
}

// drain handles the loop's queue, the idle sweep and Shutdown's requests;
// it reports whether the loop is to end.
func (l *loop) drain() bool {
	var b [64]byte
	for {
		if n, _ := syscall.Read(l.wakeR, b[:]); n < len(b) {
			break
		}
	}
	l.mu.Lock()
	queue := l.queue
	l.queue = l.spare[:0]
	closing, exit, sweep := l.closing, l.exit, l.sweep
	l.sweep = false
	l.mu.Unlock()
	for i, cn := range queue {
		queue[i] = nil
		_, back := l.conns[cn.fd] // back from a goroutine, with replies to write
		l.conns[cn.fd] = cn
		cn.away = false
		cn.seen = l.tick
		if closing {
			continue // closed below
		}
		if err := l.ctl(syscall.EPOLL_CTL_ADD, cn.fd, syscall.EPOLLIN); err != nil {
			l.close(cn, err)
			continue
		}
		if back {
			l.flushThen(cn)
		}
	}
	l.spare = queue[:0]
	if sweep && !closing {
		l.sweepIdle()
	}
	if closing {
		for _, cn := range l.conns {
			if !cn.away {
				cn.writeSome() // the replies of the last commands, if they fit
				l.close(cn, nil)
			}
		}
	}
	return exit && len(l.conns) == 0
}

// sweepIdle advances the tick and closes the connections idle for the
// timeout. A connection away on a goroutine is running a command: not idle.
func (l *loop) sweepIdle() {
	l.tick++
	for _, cn := range l.conns {
		if !cn.away && l.tick-cn.seen >= l.idleTicks {
			l.s.log.Debug("closing idle client", "id", cn.ctx.(*client).id, "addr", cn.addr)
			l.close(cn, nil)
		}
	}
}

// process runs a batch of the connection's buffered commands: until none
// is left, one goes to a goroutine, or the batch reaches max_pipeline
// commands (or flushAt bytes of replies), when the connection is queued to
// run the rest on the next round. The replies are written at the end of
// the round.
func (l *loop) process(cn *conn) {
	c := cn.ctx.(*client)
	more, stop, handoff := l.s.runCommands(cn, c, true)
	if handoff {
		l.handoff(cn, c)
		return
	}
	if stop {
		cn.hangup = true
	}
	if more && !cn.queued {
		cn.queued = true
		l.backlog = append(l.backlog, cn)
	}
	if len(cn.out) > 0 || cn.hangup {
		l.pending = append(l.pending, cn)
	}
}

// flush writes the pending replies. It reports false when the connection
// was closed or its socket is full (the loop then waits until it is
// writable).
func (l *loop) flush(cn *conn) bool {
	done, err := cn.writeSome()
	switch {
	case err != nil:
		l.close(cn, err)
		return false
	case !done:
		if err := l.ctl(syscall.EPOLL_CTL_MOD, cn.fd, syscall.EPOLLOUT); err != nil {
			l.close(cn, err)
		}
		return false
	case cn.hangup:
		l.close(cn, nil)
		return false
	}
	return true
}

// flushThen writes the pending replies and runs the commands that wait in
// the buffer.
func (l *loop) flushThen(cn *conn) {
	if l.flush(cn) && cn.rd.buffered() {
		l.process(cn)
	}
}

// resume writes the rest of a reply once the socket is writable, then
// reads again.
func (l *loop) resume(cn *conn) {
	done, err := cn.writeSome()
	cn.seen = l.tick // the client takes its replies: not idle
	switch {
	case err != nil:
		l.close(cn, err)
	case !done:
	case cn.hangup:
		l.close(cn, nil)
	default:
		if err := l.ctl(syscall.EPOLL_CTL_MOD, cn.fd, syscall.EPOLLIN); err != nil {
			l.close(cn, err)
			return
		}
		if cn.rd.buffered() {
			l.process(cn)
		}
	}
}

// handoff gives the connection to a goroutine for a command that might
// block; the goroutine runs the buffered commands and gives it back.
func (l *loop) handoff(cn *conn, c *client) {
	if err := l.ctl(syscall.EPOLL_CTL_DEL, cn.fd, 0); err != nil {
		l.close(cn, err)
		return
	}
	cn.away = true
	go func() {
		_, stop, _ := l.s.runCommands(cn, c, false)
		if stop {
			cn.hangup = true
		}
		l.add(cn)
	}()
}

// close closes a connection of the loop and unregisters its client.
func (l *loop) close(cn *conn, err error) {
	cn.gone = true
	delete(l.conns, cn.fd)
	syscall.Close(cn.fd) // also takes it out of the epoll set
	l.s.unregister(cn.ctx.(*client))
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		l.s.log.Debug("client connection ended", "addr", cn.addr, "err", err)
	}
}

func closeFD(fd int) { syscall.Close(fd) }

// writeSome writes the pending replies without blocking; done reports
// that nothing is left.
func (cn *conn) writeSome() (done bool, err error) {
	for cn.woff < len(cn.out) {
		n, err := syscall.Write(cn.fd, cn.out[cn.woff:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false, nil
		case err != nil:
			return false, os.NewSyscallError("write", err)
		}
		cn.woff += n
	}
	cn.woff = 0
	if cap(cn.out) > maxKeptOut {
		cn.out = nil
	} else {
		cn.out = cn.out[:0]
	}
	return true, nil
}
