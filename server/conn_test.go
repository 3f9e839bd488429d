package server

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// Tests of the server on both transports: the whole INCR path allocates
// nothing, and replies stay in order around commands that block.

// transports are the two ways a connection is served; the transport's
// tests run in both. (Elsewhere than Linux both are goroutines.)
var transports = []struct {
	name  string
	loops int // Options.Conn.EventLoops
}{{"event loop", 0}, {"goroutine", -1}}

// dialTest connects to addr, closed at cleanup, with a deadline as a
// safety net against a hung test (not an assertion on time).
func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	return nc
}

// TestTransportZeroAlloc: INCR pipelines over a real socket allocate
// nothing on the server, in both transports: the client side reads and
// writes buffers it reuses, so any allocation would be the server's.
func TestTransportZeroAlloc(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, _ := newAlloc(t, "", bigStepOptions(), nil)
			s := New(a, Options{Conn: resp.Options{EventLoops: tr.loops}})
			nc := dialTest(t, serve(t, s))
			req := []byte(strings.Repeat(rawresp.Cmd("INCR", "z"), 16))
			buf := make([]byte, 4096)
			trip := func() {
				if _, err := nc.Write(req); err != nil {
					t.Fatal(err)
				}
				for lines := 0; lines < 16; {
					n, err := nc.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					if buf[0] != ':' {
						t.Fatalf("reply %q", buf[:n])
					}
					lines += bytes.Count(buf[:n], []byte{'\n'})
				}
			}
			for range 50 {
				trip()
			}
			if n := testing.AllocsPerRun(200, trip); n != 0 {
				t.Errorf("%v allocations per pipeline of 16 INCRs, want 0", n)
			}
		})
	}
}

// TestTransportPipelines: replies come in order and exact when commands
// that run in the event loop and commands it hands to a goroutine (a tag
// the connection has not used last, COMMAND INFO, LEAF.INFO) alternate in
// one pipeline, sent at once or byte by byte; QUIT after a handed-off
// command still drops the rest.
func TestTransportPipelines(t *testing.T) {
	pipeline := rawresp.Cmd("INCR", "t1") + rawresp.Cmd("INCR", "t1") + "INCR t1\r\n" + rawresp.Cmd("INCR", "t1") +
		rawresp.Cmd("COMMAND", "INFO", "nosuch") + rawresp.Cmd("INCRBY", "t1", "5") + rawresp.Cmd("PING") + rawresp.Cmd("LEAF.INFO", "nosuch") +
		rawresp.Cmd("INCR", "t2") + rawresp.Cmd("INCR", "t1") + rawresp.Cmd("ECHO", "x")
	want := ":1\r\n:2\r\n:3\r\n:4\r\n*1\r\n$-1\r\n:9\r\n+PONG\r\n-ERR unknown tag 'nosuch'\r\n" +
		":1\r\n:10\r\n$1\r\nx\r\n"
	for _, tr := range transports {
		for _, chunk := range []int{len(pipeline), 1} {
			t.Run(tr.name+"/chunk="+strconv.Itoa(chunk), func(t *testing.T) {
				a, _ := newAlloc(t, "", segment.DefaultOptions(), nil)
				s := New(a, Options{Conn: resp.Options{EventLoops: tr.loops}})
				addr := serve(t, s)
				nc := dialTest(t, addr)
				for i := 0; i < len(pipeline); i += chunk {
					if _, err := io.WriteString(nc, pipeline[i:min(i+chunk, len(pipeline))]); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]byte, len(want))
				if _, err := io.ReadFull(nc, got); err != nil {
					t.Fatalf("%v after %q", err, got)
				}
				if string(got) != want {
					t.Fatalf("got  %q\nwant %q", got, want)
				}

				nc2 := dialTest(t, addr)
				io.WriteString(nc2, rawresp.Cmd("COMMAND", "INFO", "nosuch")+rawresp.Cmd("QUIT")+rawresp.Cmd("INCR", "t1"))
				rest, err := io.ReadAll(nc2)
				if err != nil {
					t.Fatal(err)
				}
				if string(rest) != "*1\r\n$-1\r\n+OK\r\n" {
					t.Fatalf("COMMAND INFO, QUIT, INCR: %q", rest)
				}
			})
		}
	}
}

// TestRepliesBeforeLoad: the replies of the INCRs before one that waits
// on the database reach the client while it waits (its load is held until
// they are read), and its reply and the rest follow in order.
func TestRepliesBeforeLoad(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			hold := faultstore.NewHold()
			a, _ := newAlloc(t, "", segment.DefaultOptions(), holdTakes(hold, "slow"))
			lc := rawresp.Dial(t, serve(t, New(a, Options{Conn: resp.Options{EventLoops: tr.loops}})))
			lc.Send(rawresp.Cmd("INCR", "k"))
			lc.Expect(":1\r\n")
			lc.Send(rawresp.Cmd("INCR", "k") + rawresp.Cmd("INCR", "k") + rawresp.Cmd("INCR", "slow") + rawresp.Cmd("INCR", "k"))
			lc.Expect(":2\r\n:3\r\n")
			select {
			case <-hold.Entered(): // the load is held: INCR slow waits
			case <-time.After(time.Minute): // a safety net
				t.Fatal("INCR slow never reached the database")
			}
			hold.Release()
			lc.Expect(":1\r\n:4\r\n")
		})
	}
}
