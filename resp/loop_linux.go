//go:build linux

package resp

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Event loops serve plain TCP connections the way redis-server does: one
// goroutine waits in epoll_wait for all of its connections, reads each
// ready one once, runs its complete commands and writes their replies. A
// connection then costs no goroutine wake-up per request and no read that
// finds nothing, which a goroutine per connection cannot avoid (Go's
// poller reads first and parks on EAGAIN). There is one loop per core by
// default; a new connection goes to the next loop in turn.
//
// A loop blocks only in epoll_wait. A command that might block (its
// Session says so) is handed with its connection to a goroutine, once the
// replies before it are written; the goroutine runs that one command and
// gives the connection back, and the loop writes its reply and runs the
// rest.
//
// A connection belongs to one goroutine at a time: its loop, or the
// goroutine the loop handed it to (away, out of the epoll set). The loop
// alone reads and writes its sockets, with non-blocking calls. A round of
// the loop first handles the events: a readable connection reads once and
// joins the run queue; a blocked one (replies that did not fit the
// socket) writes the rest. Then every connection in the run queue runs
// one turn: at most MaxPipeline commands (or flushAt bytes of replies),
// whose replies are written at once. A connection's next step depends
// only on its state once its replies are written (next): close it, hand
// its held command to a goroutine, queue it again (commands left in its
// buffer: it runs again next round, after the other ready connections,
// so a deep pipeline cannot starve them), or wait for the client. While
// replies wait for room the loop watches only writability, so nothing
// more is read from a client that does not take its replies.
//
// The idle timeout, which a goroutine's connection gets from read
// deadlines, is a coarse sweep here: a ticker wakes the loop every quarter
// of the timeout, the loop advances its tick and closes the connections
// whose last read (or reply taken) is older than the timeout in ticks. A
// read only stores the current tick: no clock, no system call.
//
// A loop yields to Go's scheduler once a round has ended yieldEvery or
// more after its last yield. Go's monitor thread takes a goroutine that
// has not passed through the scheduler for 10 ms for a runaway: it signals
// it, takes its P away in the middle of a system call, and then wakes
// every 20 us for a millisecond to watch. A loop that only ever makes
// system calls looked like one, a hundred times a second, and the
// monitor's wake-ups took the core the clients needed; leaf's p99 at -P 1
// was 1.5 to 2 times redis-server's. A yield costs about 0.1 us.

// haveLoops reports whether this system has event loops.
const haveLoops = true

// yieldEvery is how often a busy loop passes through Go's scheduler: well
// inside the 10 ms after which Go preempts a goroutine.
const yieldEvery = 2 * time.Millisecond

// errAgain is a non-blocking read that found nothing.
var errAgain = errors.New("resp: nothing to read")

// fdReader reads a non-blocking socket.
type fdReader struct{ fd int }

func (r *fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(r.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
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
	idx    int // the loop's number, from 0 (Conn.Loop)
	epfd   int
	wakefd int // an eventfd: a write wakes the loop
	events []unix.EpollEvent
	conns  map[int]*Conn // by descriptor, away ones included
	// runq holds the connections with commands to run this round, cur
	// the ones of the round being run (reused).
	runq, cur []*Conn

	// The idle timeout (Options.IdleTimeout): tick counts the sweeps,
	// idleTicks is the age in ticks at which a connection is closed; 0
	// when there is no timeout.
	tick, idleTicks int64
	// authTicks is Options.AuthTimeout in sweeps; 0 when there is none.
	authTicks int64

	// closing: Shutdown fenced the connections; each is closed once its
	// replies are written (drain copies closeReq).
	closing bool

	// Requests to the loop, under mu; wake makes it read them.
	mu       sync.Mutex
	inbox    []*Conn // new connections, and connections back from a goroutine
	spare    []*Conn
	closeReq bool    // Shutdown: close each connection once its replies are written
	cutReq   bool    // Shutdown's flush window is over: close them all now
	killq    []*Conn // Kill: connections to close now
	pushq    []*Conn // Push: connections with data to write
	exitReq  bool    // Shutdown, once no connection is left: end
	sweepReq bool    // the ticker's: time to close idle connections
	ended    bool    // the loop has ended: its descriptors are closed
	done     chan struct{}
}

// sweepEvery is the period of the idle sweep for an idle timeout d, and
// the timeout in sweeps: a connection is closed between d and d plus one
// period after its last read.
func sweepEvery(d time.Duration) (period time.Duration, ticks int64) {
	period = min(max(d/4, time.Millisecond), time.Second)
	return period, int64((d+period-1)/period) + 1
}

// newLoop starts an event loop.
func newLoop(s *Server, idx int) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &loop{
		s:      s,
		idx:    idx,
		epfd:   epfd,
		wakefd: wakefd,
		events: make([]unix.EpollEvent, 256),
		conns:  map[int]*Conn{},
		done:   make(chan struct{}),
	}
	if err := l.ctl(unix.EPOLL_CTL_ADD, wakefd, unix.EPOLLIN); err != nil {
		l.end()
		return nil, err
	}
	go l.run()
	if period, idle, auth := sweepPlan(s.opts.IdleTimeout, s.opts.AuthTimeout); period > 0 {
		l.idleTicks, l.authTicks = idle, auth
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
			l.sweepReq = true
			l.wake()
			l.mu.Unlock()
		}
	}
}

// wake makes the loop read its requests; l.mu is held. Once the loop has
// ended it does nothing: the eventfd is closed, and its number may be
// another file's by now.
func (l *loop) wake() {
	if l.ended {
		return
	}
	var one = [8]byte{1}
	// EAGAIN: the counter is full, so the loop is awake anyway.
	unix.Write(l.wakefd, one[:])
}

// end marks the loop ended, closes the connections still in its inbox
// and its descriptors.
func (l *loop) end() {
	l.mu.Lock()
	l.ended = true
	left := l.inbox
	l.inbox = nil
	l.mu.Unlock()
	for _, c := range left {
		unix.Close(c.fd)
		l.s.closed(c)
	}
	unix.Close(l.epfd)
	unix.Close(l.wakefd)
}

func (l *loop) ctl(op, fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(l.epfd, op, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// adopt takes a TCP connection over: the loop keeps a duplicate of its
// descriptor and closes the net.Conn, so Go's poller forgets the socket.
func (l *loop) adopt(tc *net.TCPConn) (*Conn, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	err = rc.Control(func(s uintptr) {
		fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
		if dupErr != nil {
			dupErr = os.NewSyscallError("fcntl", dupErr)
		}
	})
	if err == nil {
		err = dupErr
	}
	if err != nil {
		return nil, err
	}
	// The duplicate shares the socket's open file, so it is non-blocking
	// too, as Go made it.
	c := &Conn{lp: l, fd: fd, addr: tc.RemoteAddr().String(), laddr: tc.LocalAddr().String()}
	c.rd.rd = &fdReader{fd: fd}
	c.rd.count = &c.nin
	tc.Close()
	return c, nil
}

// give hands the loop a connection: a new one, or one back from a
// goroutine. A loop that has ended (it failed) closes it.
func (l *loop) give(c *Conn) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		unix.Close(c.fd)
		l.s.closed(c)
		return
	}
	l.inbox = append(l.inbox, c)
	l.wake()
	l.mu.Unlock()
}

// kill makes the loop close c now (Conn.Kill).
func (l *loop) kill(c *Conn) {
	l.mu.Lock()
	l.killq = append(l.killq, c)
	l.wake()
	l.mu.Unlock()
}

// pushed makes the loop write what Push queued for c.
func (l *loop) pushed(c *Conn) {
	l.mu.Lock()
	l.pushq = append(l.pushq, c)
	l.wake()
	l.mu.Unlock()
}

// shut makes the loop close every connection once its replies are
// written, and all of them at flushBy.
func (l *loop) shut(flushBy time.Time) {
	l.mu.Lock()
	l.closeReq = true
	l.wake()
	l.mu.Unlock()
	time.AfterFunc(time.Until(flushBy), l.cut)
}

// cut makes the loop close every connection now.
func (l *loop) cut() {
	l.mu.Lock()
	l.closeReq, l.cutReq = true, true
	l.wake()
	l.mu.Unlock()
}

// stop ends the loop (once it has no connection) and waits for it.
func (l *loop) stop() {
	l.mu.Lock()
	l.exitReq = true
	l.wake()
	l.mu.Unlock()
	<-l.done
}

// run is the loop's goroutine.
func (l *loop) run() {
	defer close(l.done)
	defer l.end()
	arrived := l.s.opts.Arrived
	yielded := time.Now()
	for {
		// With connections queued, only poll: they run this round.
		timeout := -1
		if len(l.runq) > 0 {
			timeout = 0
		}
		n, err := unix.EpollWait(l.epfd, l.events, timeout)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			// Only a bug gets here (EBADF, EFAULT, EINVAL): say so, and
			// let the connections go rather than hang them.
			l.s.log.Error("event loop failed: closing its connections", "err", os.NewSyscallError("epoll_wait", err))
			l.fail()
			return
		}
		for i := range n {
			ev := &l.events[i]
			fd := int(ev.Fd)
			if fd == l.wakefd {
				if l.drain() {
					return
				}
				continue
			}
			c := l.conns[fd]
			switch {
			case c == nil || c.away || c.gone:
				// Closed earlier in this round, or handed off since.
			case c.killed.Load():
				l.close(c, nil)
			case c.blocked:
				l.writeRest(c) // writable, or failed
			case c.queued:
				// Commands wait in its buffer: it runs this round.
			default:
				switch err := c.rd.fill(); {
				case err == nil:
					c.seen = l.tick
					l.enqueue(c)
				case errors.Is(err, errAgain):
				default:
					l.close(c, err)
				}
			}
		}
		if len(l.runq) > 0 {
			// One clock reading a round, after its reads: every command
			// about to run arrived before it (Options.Arrived), and the
			// yield is timed on it.
			now := time.Now()
			if arrived != nil {
				arrived(now)
			}
			if now.Sub(yielded) >= yieldEvery {
				runtime.Gosched()
				yielded = now
			}
		}
		l.cur, l.runq = l.runq, l.cur[:0]
		for i, c := range l.cur {
			l.cur[i] = nil
			c.queued = false
			switch {
			case c.gone || c.away || c.blocked:
			case c.killed.Load():
				l.close(c, nil)
			default:
				c.run(false)
				l.flush(c)
			}
		}
	}
}

// enqueue puts c in the run queue: it runs one turn at the end of this
// round (or the next one, when this round's are running).
func (l *loop) enqueue(c *Conn) {
	if !c.queued {
		c.queued = true
		l.runq = append(l.runq, c)
	}
}

// flush writes c's replies, then moves it on (next); when the socket is
// full, the loop watches it for room instead.
func (l *loop) flush(c *Conn) {
	done, err := c.writeSome()
	switch {
	case err != nil:
		l.close(c, err)
	case !done:
		if err := l.ctl(unix.EPOLL_CTL_MOD, c.fd, unix.EPOLLOUT); err != nil {
			l.close(c, err)
			return
		}
		c.blocked = true
	default:
		l.next(c)
	}
}

// writeRest writes more of a blocked connection's replies now that the
// socket has room; once all are written it reads again and moves on.
func (l *loop) writeRest(c *Conn) {
	done, err := c.writeSome()
	c.seen = l.tick // the client takes its replies: not idle
	switch {
	case err != nil:
		l.close(c, err)
	case done:
		if err := l.ctl(unix.EPOLL_CTL_MOD, c.fd, unix.EPOLLIN); err != nil {
			l.close(c, err)
			return
		}
		c.blocked = false
		if c.takePending() {
			l.flush(c)
			return
		}
		l.next(c)
	}
}

// next moves a connection on once its replies are written: close it, hand
// its held command to a goroutine, run the commands left in its buffer
// next round, or wait for the client.
func (l *loop) next(c *Conn) {
	switch {
	case c.hangup || l.closing || c.killed.Load():
		l.close(c, nil)
	case c.held != nil:
		l.handoff(c)
	case c.more:
		l.enqueue(c)
	}
}

// handoff gives the connection to a goroutine, which runs its held
// command where it may block and gives it back.
func (l *loop) handoff(c *Conn) {
	if err := l.ctl(unix.EPOLL_CTL_DEL, c.fd, 0); err != nil {
		l.close(c, err)
		return
	}
	c.away = true
	go func() {
		c.runHeld()
		l.give(c)
	}()
}

// drain handles the loop's inbox, the idle sweep and Shutdown's requests;
// it reports whether the loop is to end.
func (l *loop) drain() bool {
	var b [8]byte
	unix.Read(l.wakefd, b[:])
	l.mu.Lock()
	inbox := l.inbox
	l.inbox = l.spare[:0]
	cut, exit, sweep := l.cutReq, l.exitReq, l.sweepReq
	l.closing = l.closeReq
	l.sweepReq = false
	kills, pushes := l.killq, l.pushq
	l.killq, l.pushq = nil, nil
	l.mu.Unlock()
	for i, c := range inbox {
		inbox[i] = nil
		_, back := l.conns[c.fd] // back from a goroutine, with a reply to write
		l.conns[c.fd] = c
		c.away = false
		c.seen = l.tick
		if !back {
			c.bornTick = l.tick
		}
		if err := l.ctl(unix.EPOLL_CTL_ADD, c.fd, unix.EPOLLIN); err != nil {
			l.close(c, err)
			continue
		}
		if c.killed.Load() {
			l.close(c, nil)
			continue
		}
		if back {
			c.takePending()
			l.flush(c)
		}
	}
	l.spare = inbox[:0]
	// A connection away on a goroutine is closed, or written to, when it
	// comes back (above).
	for _, c := range kills {
		if !c.gone && !c.away && l.conns[c.fd] == c {
			l.close(c, nil)
		}
	}
	// A connection waiting for room to write takes them once its replies
	// are written (writeRest), so Push's limit bounds what it holds.
	for _, c := range pushes {
		if c.gone || c.away || c.blocked || l.conns[c.fd] != c || !c.takePending() {
			continue
		}
		c.seen = l.tick // a monitor that takes its lines is not idle
		l.flush(c)
	}
	switch {
	case cut:
		for _, c := range l.conns {
			if !c.away {
				l.close(c, nil)
			}
		}
	case l.closing:
		for _, c := range l.conns {
			if !c.away && !c.blocked {
				l.close(c, nil)
			}
		}
	case sweep:
		l.sweepIdle()
	}
	return exit && len(l.conns) == 0
}

// sweepIdle advances the tick and closes the connections idle for the
// timeout. A connection away on a goroutine is running a command: not idle.
func (l *loop) sweepIdle() {
	l.tick++
	for _, c := range l.conns {
		switch {
		case c.away:
		case l.authTicks > 0 && c.rd.unauth && l.tick-c.bornTick >= l.authTicks:
			l.s.authTimedOut(c)
			l.close(c, nil)
		case l.idleTicks > 0 && l.tick-c.seen >= l.idleTicks:
			l.s.log.Debug("closing idle client", "addr", c.addr)
			l.close(c, nil)
		}
	}
}

// close closes a connection of the loop and unregisters it.
func (l *loop) close(c *Conn, err error) {
	c.gone = true
	delete(l.conns, c.fd)
	unix.Close(c.fd) // also takes it out of the epoll set
	l.s.closed(c)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) && !errors.Is(err, unix.EPIPE) {
		l.s.log.Debug("client connection ended", "addr", c.addr, "err", err)
	}
}

// fail closes the connections of a loop that cannot go on; the ones away
// are closed as they come back (give).
func (l *loop) fail() {
	for _, c := range l.conns {
		if !c.away {
			l.close(c, nil)
		}
	}
}

func closeFD(fd int) { unix.Close(fd) }

// writeSome writes the pending replies without blocking; done reports
// that nothing is left.
func (c *Conn) writeSome() (done bool, err error) {
	for c.woff < len(c.out) {
		n, err := unix.Write(c.fd, c.out[c.woff:])
		if n > 0 {
			c.nout.Add(int64(n))
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false, nil
		case err != nil:
			return false, os.NewSyscallError("write", err)
		}
		c.woff += n
	}
	c.sent()
	return true, nil
}

// Loop is the number of the event loop serving the connection, from 0,
// or -1 when a goroutine of its own serves it.
func (c *Conn) Loop() int {
	if c.lp == nil {
		return -1
	}
	return c.lp.idx
}
