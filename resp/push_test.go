package resp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
)

// Byte counts, turn ends, Kill and Push: what the server's monitoring
// (INFO, CLIENT KILL, MONITOR) asks of the connection layer.

// readExactly reads len(want) bytes and checks them.
func readExactly(t *testing.T, r io.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("reading %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// TestNetBytes: Stats counts every byte read and written, open
// connections included, and keeps the counts of closed ones.
func TestNetBytes(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			var in, out int
			for range 2 {
				nc := dial(t, addr)
				req := rawresp.Cmd("ECHO", "hello") + rawresp.Cmd("PING") + "PING\r\n"
				want := "$5\r\nhello\r\n+PONG\r\n+PONG\r\n"
				if _, err := io.WriteString(nc, req); err != nil {
					t.Fatal(err)
				}
				readExactly(t, nc, want)
				in, out = in+len(req), out+len(want)
				conn := h.conn(int(h.opened.Load()) - 1)
				// The server counts a write once the system call returns,
				// which may be after the client read it.
				redistest.WaitFor(t, "the count of the write", func() bool { return conn.NetOut() >= int64(len(want)) })
				if conn.NetIn() != int64(len(req)) || conn.NetOut() != int64(len(want)) {
					t.Fatalf("connection: in %d out %d, want %d %d", conn.NetIn(), conn.NetOut(), len(req), len(want))
				}
				if st := s.Stats(); st.NetIn != int64(in) || st.NetOut != int64(out) {
					t.Fatalf("open: in %d out %d, want %d %d", st.NetIn, st.NetOut, in, out)
				}
				nc.Close()
				redistest.WaitFor(t, "the close", func() bool { return s.Stats().Open == 0 })
				if st := s.Stats(); st.NetIn != int64(in) || st.NetOut != int64(out) {
					t.Fatalf("closed: in %d out %d, want %d %d", st.NetIn, st.NetOut, in, out)
				}
			}
		})
	}
}

// turnHandler is testHandler with EndTurn: it records how many commands
// had run when each turn ended.
type turnHandler struct {
	*testHandler
	ended atomic.Int64 // commands run when the last turn ended
	turns atomic.Int64
}

func (h *turnHandler) Open(c *Conn) Session {
	return &turnSession{testSession: h.testHandler.Open(c).(*testSession), h: h}
}

type turnSession struct {
	*testSession
	h *turnHandler
}

func (s *turnSession) EndTurn(c *Conn) {
	s.h.turns.Add(1)
	s.h.ended.Store(s.h.calls.Load())
}

// TestEndTurn: a turn ends, and the session is told, before its replies
// are written: a client holding a reply knows the turn that ran its
// command has ended; a command that blocks ends a turn of its own.
func TestEndTurn(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := &turnHandler{testHandler: newTestHandler()}
			_, addr := startHandler(t, h, Options{EventLoops: tr.loops})
			nc := dial(t, addr)
			r := bufio.NewReader(nc)
			for i := int64(1); i <= 20; i++ {
				io.WriteString(nc, rawresp.Cmd("PING"))
				readExactly(t, r, "+PONG\r\n")
				if got := h.ended.Load(); got != i {
					t.Fatalf("reply %d read when the last turn ended after %d commands", i, got)
				}
			}
			turns := h.turns.Load()
			go h.release("k")
			io.WriteString(nc, rawresp.Cmd("WAIT", "k"))
			readExactly(t, r, "+k\r\n")
			if got := h.ended.Load(); got != 21 {
				t.Fatalf("WAIT's reply read when the last turn ended after %d commands", got)
			}
			// The turn that stopped at WAIT (nothing run) and WAIT's own.
			if got := h.turns.Load() - turns; got < 1 || got > 2 {
				t.Fatalf("%d turns for WAIT", got)
			}
		})
	}
}

// startHandler is start for any Handler.
func startHandler(t *testing.T, h Handler, opts Options) (*Server, string) {
	t.Helper()
	s := NewServer(h, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Shutdown(t.Context())
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// wantEOF reads until the connection ends and checks that nothing came.
func wantEOF(t *testing.T, r io.Reader) {
	t.Helper()
	rest, err := io.ReadAll(r)
	if err != nil && !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("after Kill: %v", err)
	}
	if len(rest) != 0 {
		t.Fatalf("after Kill the client read %q", rest)
	}
}

// TestKill: Kill closes a connection waiting for its client at once, and
// one running a command that blocks as soon as the command ends, without
// its reply; the other connections are served on.
func TestKill(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			idle := dial(t, addr)
			io.WriteString(idle, rawresp.Cmd("PING"))
			readExactly(t, idle, "+PONG\r\n")
			busy := dial(t, addr)
			io.WriteString(busy, rawresp.Cmd("WAIT", "k"))
			<-h.waiting
			other := dial(t, addr)

			h.conn(0).Kill()
			wantEOF(t, idle)
			h.conn(1).Kill()
			h.conn(1).Kill() // twice is once
			h.release("k")
			wantEOF(t, busy)
			redistest.WaitFor(t, "the closes", func() bool { return h.closed.Load() == 2 })
			io.WriteString(other, rawresp.Cmd("PING"))
			readExactly(t, other, "+PONG\r\n")
			if st := s.Stats(); st.Open != 1 {
				t.Fatalf("%d connections open, want 1", st.Open)
			}
		})
	}
}

// TestPush: what Push queues reaches the client with no request, after
// the reply of a command running meanwhile; beyond its limit Push
// refuses, and a killed connection takes nothing more.
func TestPush(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			_, addr := start(t, h, Options{EventLoops: tr.loops})
			nc := dial(t, addr)
			r := bufio.NewReader(nc)
			io.WriteString(nc, rawresp.Cmd("PING"))
			readExactly(t, r, "+PONG\r\n")
			conn := h.conn(0)

			// Idle: written at once, as often as pushed.
			for range 3 {
				if !conn.Push([]byte("+one\r\n"), 100) {
					t.Fatal("Push refused")
				}
				readExactly(t, r, "+one\r\n")
			}
			// From many goroutines at once: every line, whole.
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						for !conn.Push([]byte("+many\r\n"), 1<<20) {
						}
					}
				}()
			}
			wg.Wait()
			readExactly(t, r, strings.Repeat("+many\r\n", 400))
			// While a command blocks: after its reply.
			io.WriteString(nc, rawresp.Cmd("WAIT", "k"))
			<-h.waiting
			if !conn.Push([]byte("+two\r\n"), 100) {
				t.Fatal("Push refused")
			}
			h.release("k")
			readExactly(t, r, "+k\r\n+two\r\n")
			// The connection still serves requests.
			io.WriteString(nc, rawresp.Cmd("PING"))
			readExactly(t, r, "+PONG\r\n")
			conn.Kill()
			if conn.Push([]byte("+late\r\n"), 100) {
				t.Fatal("Push after Kill accepted")
			}
			wantEOF(t, r)
		})
	}
}

// TestPushLimit: a client that reads nothing makes Push refuse once the
// limit is queued, rather than the server holding more.
func TestPushLimit(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			dialTight(t, s, addr)
			conn := h.conn(0)
			line := []byte("+" + strings.Repeat("x", 1000) + "\r\n")
			const limit = 64 << 10
			// The socket takes some; then the queue fills up to the limit.
			pushed := 0
			for conn.Push(line, limit) {
				if pushed++; pushed > 100_000 {
					t.Fatal("Push never refused")
				}
			}
			conn.pmu.Lock()
			queued := len(conn.pending)
			conn.pmu.Unlock()
			if queued > limit || queued+len(line) <= limit {
				t.Fatalf("%d bytes queued when Push refused, limit %d", queued, limit)
			}
		})
	}
}
