package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// The connection layer's tests run a small Handler (testHandler) on real
// sockets, on both transports: an event loop (where the system has one)
// and a goroutine per connection.

// transports are the two ways a connection is served.
var transports = []struct {
	name  string
	loops int // Options.EventLoops
}{{"event loop", 0}, {"goroutine", -1}}

// testHandler runs the commands the tests need:
//
//	PING               +PONG
//	ECHO x             x, as a bulk string
//	INCR key           the key's next value, from 1, shared by every
//	                   connection; the first INCR of a key blocks (it runs
//	                   only with mayBlock), as leaf's INCR of a new tag
//	                   loads it from the database
//	WAIT key           blocks until the test opens the key's gate
//	                   (release), then +key
//	BIG n              a bulk string of n bytes
//	AUTH pw            +OK when pw is the password: the caps on requests
//	                   before AUTH end (SetUnauthenticated)
//	QUIT               +OK, then the connection closes
//
// Anything else is -ERR unknown. It counts the commands it ran and the
// ones running.
type testHandler struct {
	password string // "" for none

	mu       sync.Mutex
	counters map[string]*int64
	gates    map[string]chan struct{}

	waiting  chan string // WAIT sends its key when it starts to wait, while there is room
	calls    atomic.Int64
	inflight atomic.Int64
	opened   atomic.Int64
	closed   atomic.Int64
	// after, when set, is called after every command with its name.
	after atomic.Pointer[func(name []byte)]
	// conns are the connections opened, in order (under mu).
	conns []*Conn
}

func newTestHandler() *testHandler {
	return &testHandler{
		counters: map[string]*int64{},
		gates:    map[string]chan struct{}{},
		waiting:  make(chan string, 100),
	}
}

// gate is the channel WAIT key waits on.
func (h *testHandler) gate(key string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[key]
	if g == nil {
		g = make(chan struct{})
		h.gates[key] = g
	}
	return g
}

// count is the value of key's counter.
func (h *testHandler) count(key string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.counters[key]; n != nil {
		return *n
	}
	return 0
}

// conn is the i-th connection opened (from 0), nil when not yet open.
func (h *testHandler) conn(i int) *Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i >= len(h.conns) {
		return nil
	}
	return h.conns[i]
}

// release lets WAIT key answer.
func (h *testHandler) release(key string) { close(h.gate(key)) }

func (h *testHandler) Open(c *Conn) Session {
	h.opened.Add(1)
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	c.SetUnauthenticated(h.password != "")
	return &testSession{h: h, authed: h.password == ""}
}

type testSession struct {
	h      *testHandler
	authed bool
}

func (s *testSession) Closed() { s.h.closed.Add(1) }

// Command runs a command without allocating (but for a new key, a WAIT,
// BIG and errors), so the connection's own allocations can be counted.
func (s *testSession) Command(c *Conn, args [][]byte, mayBlock bool) bool {
	h := s.h
	h.inflight.Add(1)
	defer h.inflight.Add(-1)
	is := func(name string) bool { return bytes.EqualFold(args[0], []byte(name)) }
	if !s.authed && !is("AUTH") && !is("QUIT") {
		c.WriteError("NOAUTH Authentication required.")
		h.calls.Add(1)
		return true
	}
	switch {
	case is("PING"):
		c.WriteString("PONG")
	case is("ECHO") && len(args) == 2:
		c.WriteBulk(args[1])
	case is("INCR") && len(args) == 2:
		h.mu.Lock()
		n := h.counters[string(args[1])]
		if n == nil {
			if !mayBlock {
				h.mu.Unlock()
				return false
			}
			n = new(int64)
			h.counters[string(args[1])] = n
		}
		*n++
		v := *n
		h.mu.Unlock()
		c.WriteInt64(v)
	case is("WAIT") && len(args) == 2:
		if !mayBlock {
			return false
		}
		key := string(args[1])
		select {
		case h.waiting <- key:
		default: // nobody is counting
		}
		<-h.gate(key)
		c.WriteString(key)
	case is("BIG") && len(args) == 2:
		n, _ := strconv.Atoi(string(args[1]))
		c.WriteBulkString(strings.Repeat("b", n))
	case is("AUTH") && len(args) == 2:
		if string(args[1]) != h.password {
			c.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
			break
		}
		s.authed = true
		c.SetUnauthenticated(false)
		c.WriteString("OK")
	case is("QUIT"):
		c.WriteString("OK")
		c.Quit()
	default:
		c.WriteError("ERR unknown")
	}
	h.calls.Add(1)
	if f := h.after.Load(); f != nil {
		(*f)(args[0])
	}
	return true
}

// start serves h with opts on 127.0.0.1:0 until the test ends (unless it
// shuts the server down first) and returns the server and its address.
func start(t *testing.T, h *testHandler, opts Options) (*Server, string) {
	t.Helper()
	s := NewServer(h, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// dial connects to addr, closed at cleanup, with a deadline as a safety
// net against a hung test (not an assertion on time).
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(time.Minute))
	return nc
}

// dialTight connects to s, the only connection, with both buffers its
// replies go through at the kernel's minimum: the client's receive buffer
// (set before connecting, so the window is small from the start) and the
// server's send buffer. Replies soon wait for room. It returns the
// connection and a reader on it.
func dialTight(t *testing.T, s *Server, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 0)
		})
		return err
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(nc)
	io.WriteString(nc, rawresp.Cmd("PING")) // answered once the server holds the connection
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	setSendBuffers(t, s, 0)
	return nc, r
}

// setSendBuffers sets the send buffer of every connection of s to n bytes
// (0: the kernel's minimum), on the server's side.
func setSendBuffers(t *testing.T, s *Server, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		t.Fatal("no connection")
	}
	for c := range s.conns {
		var err error
		if c.nc != nil {
			err = c.nc.(*net.TCPConn).SetWriteBuffer(n)
		} else {
			err = syscall.SetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, n)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ints is the replies :from\r\n up to :to\r\n.
func ints(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(":" + strconv.Itoa(i) + "\r\n")
	}
	return b.String()
}
