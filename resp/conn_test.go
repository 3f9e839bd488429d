package resp

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// Tests of a connection's turns: protocol errors, the bounds of a turn,
// and what a turn allocates.

// TestProtocolErrorClosesOnlyThatConnection: a malformed or oversized
// request answers Redis's protocol error, after the replies of the
// commands before it, and closes that connection only: another one, open
// since before, keeps its IDs, and a new one is served.
func TestProtocolErrorClosesOnlyThatConnection(t *testing.T) {
	pe := func(text string) string { return "-ERR " + text + "\r\n" }
	for _, tc := range []struct {
		name, send, want string
	}{
		{"unbalanced quotes", "ECHO \"a\r\n", pe(errProtoUnbalancedQuotes)},
		{"quote inside an argument", "ECHO a'b\r\n", pe(errProtoUnbalancedQuotes)},
		{"count not a number", "*x\r\n", pe(errProtoMultiBulkLength)},
		{"count zero", rawresp.Cmd("INCR", "a") + "*0\r\n", ":1\r\n" + pe(errProtoMultiBulkLength)},
		{"after a command that blocked", rawresp.Cmd("WAIT", "w") + "*x\r\n", "+w\r\n" + pe(errProtoMultiBulkLength)},
		{"bulk length", "*1\r\n$x\r\n", pe(errProtoBulkLength)},
		{"no dollar but a newline", "*1\r\n\n", pe("Protocol error: expected '$', got ' '")},
		{"count negative", "*-1\r\n", pe(errProtoMultiBulkLength)},
		{"count without CR", "*1\n$4\r\nPING\r\n", pe(errProtoMultiBulkLength)},
		{"count too big for the limit", "*1000000\r\n", pe(errProtoMultiBulkLength)},
		{"count line without end", "*" + strings.Repeat("1", DefaultMaxRequestBytes), pe(errProtoTooBigMultiBulk)},
		{"no dollar", "*1\r\n:4\r\n", pe("Protocol error: expected '$', got ':'")},
		{"nested array", "*1\r\n*1\r\n$4\r\nPING\r\n", pe("Protocol error: expected '$', got '*'")},
		{"RESP3 map from the client", "*1\r\n%1\r\n", pe("Protocol error: expected '$', got '%'")},
		{"length negative", "*1\r\n$-1\r\n", pe(errProtoBulkLength)},
		{"length not a number", "*1\r\n$four\r\n", pe(errProtoBulkLength)},
		{"bulk without CRLF", "*1\r\n$4\r\nPINGPONG\r\n", pe(errProtoBulkLength)},
		{"bulk of 1 GB announced", "*2\r\n$4\r\nINCR\r\n$1073741824\r\n", pe(errProtoBulkLength)},
		{"request over the limit", rawresp.Cmd("ECHO", strings.Repeat("x", DefaultMaxRequestBytes)), pe(errProtoBulkLength)},
		{"length line without end", "*1\r\n$" + strings.Repeat("9", DefaultMaxRequestBytes), pe(errProtoTooBigBulkCount)},
		{"inline line without end", strings.Repeat("PING ", DefaultMaxRequestBytes/5+1), pe(errProtoTooBigInline)},
	} {
		for _, tr := range transports {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				h := newTestHandler()
				h.release("w")
				_, addr := start(t, h, Options{EventLoops: tr.loops})
				other := rawresp.Dial(t, addr)
				other.Send(rawresp.Cmd("INCR", "o"))
				other.Expect(":1\r\n")
				lc := rawresp.Dial(t, addr)
				go io.WriteString(lc.NC, tc.send) // the server may stop reading it
				lc.Expect(tc.want)
				lc.ExpectClosed()
				other.Send(rawresp.Cmd("INCR", "o") + "PING\r\n")
				other.Expect(":2\r\n+PONG\r\n")
				fresh := rawresp.Dial(t, addr)
				fresh.Send(rawresp.Cmd("PING"))
				fresh.Expect("+PONG\r\n")
			})
		}
	}
}

// bufConn is a connection of s whose client sent data once.
func bufConn(s *Server, h Handler, data string) *Conn {
	c := NewConn("127.0.0.1:1", "127.0.0.1:2")
	c.srv = s
	c.rd.rd = strings.NewReader(data)
	c.rd.setLimits(s.maxRequest, false)
	c.sess = h.Open(c)
	return c
}

// TestTurns: a turn stops after MaxPipeline commands, or once flushAt
// bytes of replies wait, and the next turn continues where it stopped:
// replies are bounded per turn whatever the client sends.
func TestTurns(t *testing.T) {
	const bigReply = 7 + 1000 + 2 // "$1000\r\n", the bytes, "\r\n"
	for _, tc := range []struct {
		name     string
		pipeline int
		data     string
		total    int // commands
		perTurn  int // commands in a full turn
	}{
		{"max_pipeline", 7, strings.Repeat(rawresp.Cmd("PING"), 50), 50, 7},
		{"flushAt", 1 << 20, strings.Repeat(rawresp.Cmd("BIG", "1000"), 1000), 1000, (flushAt + bigReply - 1) / bigReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler()
			s := NewServer(h, Options{MaxPipeline: tc.pipeline})
			c := bufConn(s, h, tc.data)
			if err := c.rd.fill(); err != nil {
				t.Fatal(err)
			}
			// The reader holds at most its buffer: refill until it is all run.
			var turns []int
			for done := 0; done < tc.total; {
				before := h.calls.Load()
				c.run(false)
				n := int(h.calls.Load() - before)
				if c.hangup || c.held != nil {
					t.Fatalf("turn ended with hangup %v, held %q", c.hangup, c.held)
				}
				if n > tc.perTurn {
					t.Fatalf("turn of %d commands, want at most %d", n, tc.perTurn)
				}
				if len(c.out) > flushAt+bigReply {
					t.Fatalf("%d bytes of replies waiting", len(c.out))
				}
				turns = append(turns, n)
				done += n
				c.Reset()
				if !c.more {
					if err := c.rd.fill(); err != nil && done < tc.total {
						t.Fatalf("after %d commands: %v", done, err)
					}
				}
			}
			if !slices.Contains(turns, tc.perTurn) {
				t.Fatalf("turns %v: none full (%d)", turns, tc.perTurn)
			}
		})
	}
}

// loopConn is a net.Conn whose reads return req over and over and whose
// writes are discarded but for the last one.
type loopConn struct {
	req  []byte
	off  int
	last []byte
}

func (l *loopConn) Read(p []byte) (int, error) {
	n := copy(p, l.req[l.off:])
	l.off = (l.off + n) % len(l.req)
	return n, nil
}

func (l *loopConn) Write(p []byte) (int, error) {
	l.last = append(l.last[:0], p...)
	return len(p), nil
}

var loopAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}

func (l *loopConn) Close() error                     { return nil }
func (l *loopConn) LocalAddr() net.Addr              { return loopAddr }
func (l *loopConn) RemoteAddr() net.Addr             { return loopAddr }
func (l *loopConn) SetDeadline(time.Time) error      { return nil }
func (l *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (l *loopConn) SetWriteDeadline(time.Time) error { return nil }

// newLoopConn is a connection whose client sends depth pipelined copies
// of req, forever.
func newLoopConn(s *Server, h Handler, req string, depth int) (*Conn, *loopConn) {
	lc := &loopConn{req: []byte(strings.Repeat(req, depth))}
	c := newGoConn(lc)
	c.srv = s
	c.rd.setLimits(s.maxRequest, false)
	c.sess = h.Open(c)
	return c, lc
}

// roundTrip is one turn of serveConn: read, run, write.
func roundTrip(tb testing.TB, c *Conn) {
	if err := c.rd.fill(); err != nil {
		tb.Fatal(err)
	}
	for {
		c.run(false)
		if c.hangup || c.held != nil {
			tb.Fatal("the turn ended with hangup or a held command")
		}
		if err := c.flush(0); err != nil {
			tb.Fatal(err)
		}
		if !c.more {
			return
		}
	}
}

// TestTurnZeroAlloc: a turn of INCRs (parse, fence, command, reply, write)
// allocates nothing but what the handler does (here nothing), single or
// pipelined, in RESP or inline.
func TestTurnZeroAlloc(t *testing.T) {
	h := newTestHandler()
	h.counters["a"] = new(int64) // known: INCR a does not block
	s := NewServer(h, Options{})
	for _, tc := range []struct {
		name  string
		req   string
		depth int
	}{
		{"INCR", rawresp.Cmd("INCR", "a"), 1},
		{"INCR pipeline", rawresp.Cmd("INCR", "a"), 16},
		{"inline INCR pipeline", "INCR a\r\n", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, lc := newLoopConn(s, h, tc.req, tc.depth)
			for range 10 {
				roundTrip(t, c)
			}
			if n := testing.AllocsPerRun(1000, func() { roundTrip(t, c) }); n != 0 {
				t.Errorf("%v allocations per turn of %d commands, want 0", n, tc.depth)
			}
			if bytes.Count(lc.last, []byte("\r\n")) != tc.depth || !bytes.HasPrefix(lc.last, []byte(":")) {
				t.Errorf("last write %q: want %d integer replies", lc.last, tc.depth)
			}
		})
	}
}

// BenchmarkConnIncr is a turn of INCRs without the kernel (parse, fence,
// command, reply, one write per pipeline): one op is one INCR.
func BenchmarkConnIncr(b *testing.B) {
	h := newTestHandler()
	h.counters["bench"] = new(int64) // known: INCR bench does not block
	s := NewServer(h, Options{})
	for _, depth := range []int{1, 16, 100} {
		b.Run("pipeline="+strconv.Itoa(depth), func(b *testing.B) {
			c, _ := newLoopConn(s, h, rawresp.Cmd("INCR", "bench"), depth)
			roundTrip(b, c)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				roundTrip(b, c)
			}
		})
	}
}

// TestArrivedBeforeCommands: on both transports, Options.Arrived is told
// a clock reading taken after the request was read and before it runs:
// the reading is later than the client's send.
func TestArrivedBeforeCommands(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			var mu sync.Mutex
			var last time.Time // the last reading Arrived was told
			var sent time.Time // when the client sent the request running
			var checked atomic.Int64
			after := func(name []byte) {
				mu.Lock()
				defer mu.Unlock()
				if last.Before(sent) {
					t.Errorf("%s ran with Arrived's last reading %v before the request was sent at %v", name, last, sent)
				}
				checked.Add(1)
			}
			h.after.Store(&after)
			_, addr := start(t, h, Options{EventLoops: tr.loops, Arrived: func(now time.Time) {
				mu.Lock()
				last = now
				mu.Unlock()
			}})
			nc := dial(t, addr)
			r := bufio.NewReader(nc)
			for i := range 20 {
				mu.Lock()
				sent = time.Now()
				mu.Unlock()
				if _, err := nc.Write([]byte(rawresp.Cmd("PING"))); err != nil {
					t.Fatal(err)
				}
				if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
					t.Fatalf("PING %d: %q, %v", i, line, err)
				}
			}
			if n := checked.Load(); n != 20 {
				t.Fatalf("%d commands checked, want 20", n)
			}
		})
	}
}
