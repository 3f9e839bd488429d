package resp

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// Tests of the connection layer on real sockets, on both transports:
// pipelines whatever their size and however they are cut, replies in
// order around commands that block, fairness, back-pressure and
// Shutdown.

// TestPipelines: replies come in order and exact when commands that run
// at once and commands that block (a new key, WAIT) alternate in one
// pipeline, sent at once or byte by byte, with max_pipeline 1, 3 or the
// default: a connection that stops at max_pipeline runs the rest later
// and must keep its replies whole and in order. QUIT after a command that
// blocked still drops the rest.
func TestPipelines(t *testing.T) {
	h := newTestHandler()
	h.release("w")
	var pipeline, want strings.Builder
	n := 0
	for i := 1; i <= 300; i++ {
		key := "k"
		if i%50 == 0 {
			key = "new" + strconv.Itoa(i) // blocks: never seen
			pipeline.WriteString(rawresp.Cmd("INCR", key) + rawresp.Cmd("WAIT", "w") + "PING\r\n")
			want.WriteString(":1\r\n+w\r\n+PONG\r\n")
			continue
		}
		n++
		pipeline.WriteString(rawresp.Cmd("INCR", key))
		want.WriteString(":" + strconv.Itoa(n) + "\r\n")
	}
	for _, tr := range transports {
		for _, batch := range []int{1, 3, 0} {
			for _, chunk := range []int{pipeline.Len(), 7} {
				t.Run(tr.name+"/max_pipeline="+strconv.Itoa(batch)+"/chunk="+strconv.Itoa(chunk), func(t *testing.T) {
					h.mu.Lock()
					clear(h.counters)
					h.mu.Unlock()
					_, addr := start(t, h, Options{EventLoops: tr.loops, MaxPipeline: batch})
					nc := dial(t, addr)
					go func() {
						p := pipeline.String()
						for i := 0; i < len(p); i += chunk {
							if _, err := io.WriteString(nc, p[i:min(i+chunk, len(p))]); err != nil {
								return
							}
						}
					}()
					got := make([]byte, want.Len())
					if k, err := io.ReadFull(nc, got); err != nil {
						t.Fatalf("%v after %q", err, got[:k])
					}
					if string(got) != want.String() {
						t.Fatalf("got  %q\nwant %q", got, want.String())
					}

					lc := rawresp.Dial(t, addr)
					lc.Send(rawresp.Cmd("INCR", "q"+strconv.Itoa(batch)+strconv.Itoa(chunk)) + rawresp.Cmd("QUIT") + rawresp.Cmd("INCR", "k"))
					lc.Expect(":1\r\n+OK\r\n")
					lc.ExpectClosed()
				})
			}
		}
	}
}

// TestBackpressure: a client that writes 300,000 INCRs before it reads a
// reply gets them all, in order, with small socket buffers on both sides:
// the server's writes find the socket full, it stops reading while its
// replies wait for room, and resumes.
func TestBackpressure(t *testing.T) {
	const n = 300_000
	var want []byte
	for id := int64(1); id <= n; id++ {
		want = append(strconv.AppendInt(append(want, ':'), id, 10), '\r', '\n')
	}
	req := []byte(strings.Repeat(rawresp.Cmd("INCR", "bp"), n))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			nc := dial(t, addr)
			nc.(*net.TCPConn).SetReadBuffer(32 << 10)
			io.WriteString(nc, rawresp.Cmd("PING"))
			if _, err := io.ReadFull(nc, make([]byte, 7)); err != nil {
				t.Fatal(err)
			}
			setSendBuffers(t, s, 8<<10)
			// The first megabyte is written before any reply is read; the
			// rest while they are.
			const first = 1 << 20
			if _, err := nc.Write(req[:first]); err != nil {
				t.Fatal(err)
			}
			sent := make(chan error, 1)
			go func() {
				_, err := nc.Write(req[first:])
				sent <- err
			}()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(nc, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && got[i] == want[i] {
					i++
				}
				t.Fatalf("replies differ at byte %d: %q", i, got[max(0, i-20):min(len(got), i+20)])
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoStallSmallBuffers: a client pipelining with max_pipeline 1, the
// server's send buffer and the client's receive buffer at the kernel's
// minimum, gets every reply, round after round. Each round's first INCR
// is of a new key, so it blocks and runs off the event loop; the rest run
// in it, one per turn, and their replies keep finding the socket full.
func TestNoStallSmallBuffers(t *testing.T) {
	const rounds, depth = 2000, 120
	want := ints(1, depth)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, addr := start(t, newTestHandler(), Options{EventLoops: tr.loops, MaxPipeline: 1})
			nc, r := dialTight(t, s, addr)
			got := make([]byte, len(want))
			for round := range rounds {
				req := strings.Repeat(rawresp.Cmd("INCR", "r"+strconv.Itoa(round)), depth)
				if _, err := io.WriteString(nc, req); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if n, err := io.ReadFull(r, got); err != nil {
					t.Fatalf("round %d: %v after %d of %d reply bytes", round, err, n, len(got))
				}
				if string(got) != want {
					t.Fatalf("round %d: replies %q", round, got)
				}
			}
		})
	}
}

// TestRepliesBeforeBlocking: the replies of the commands before one that
// blocks are written before it blocks; its reply and the rest follow in
// order once it has run. The client reads the first replies while the
// WAIT is still held (its gate opens only after), so a server that kept
// them until the end of the batch would never send them.
func TestRepliesBeforeBlocking(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			_, addr := start(t, h, Options{EventLoops: tr.loops})
			lc := rawresp.Dial(t, addr)
			lc.Send(rawresp.Cmd("INCR", "k"))
			lc.Expect(":1\r\n")
			// One write: one batch.
			lc.Send(rawresp.Cmd("INCR", "k") + rawresp.Cmd("INCR", "k") + "PING\r\n" + rawresp.Cmd("WAIT", "g") + rawresp.Cmd("INCR", "k") + rawresp.Cmd("INCR", "k"))
			lc.Expect(":2\r\n:3\r\n+PONG\r\n")
			if key := <-h.waiting; key != "g" { // WAIT is running, and held
				t.Fatalf("waiting on %q", key)
			}
			h.release("g")
			lc.Expect("+g\r\n:4\r\n:5\r\n")
		})
	}
}

// TestMaxPipelineFairness: a connection with a deep pipeline runs at most
// max_pipeline commands per turn, and between two of its turns the other
// ready connections are served. The other connection's PING is sent from
// within the deep pipeline's first command (the handler's hook), so it is
// ready by the end of that turn; it must run long before the deep
// pipeline's first read buffer is done, let alone the pipeline.
func TestMaxPipelineFairness(t *testing.T) {
	const n, batch = 20_000, 10
	h := newTestHandler()
	s, addr := start(t, h, Options{EventLoops: 1, MaxPipeline: batch})
	deep := rawresp.Dial(t, addr)
	deep.Send(rawresp.Cmd("INCR", "d"))
	deep.Expect(":1\r\n")
	s.mu.Lock()
	loops := len(s.loops)
	s.mu.Unlock()
	if loops != 1 {
		t.Skip("no event loop on this system")
	}
	other := rawresp.Dial(t, addr)
	other.Send("PING\r\n")
	other.Expect("+PONG\r\n")

	var once sync.Once
	atPing := make(chan int64, 1)
	hook := func(name []byte) {
		switch string(name) {
		case "INCR":
			once.Do(func() { io.WriteString(other.NC, "PING\r\n") })
		case "PING":
			atPing <- h.count("d")
		}
	}
	h.after.Store(&hook)
	defer h.after.Store(nil)
	deep.Send(strings.Repeat(rawresp.Cmd("INCR", "d"), n))
	other.Expect("+PONG\r\n")
	deep.Expect(ints(2, n+1))
	got := <-atPing - 1
	t.Logf("the other connection's PING ran after %d INCRs of the deep pipeline", got)
	if got > 100*batch {
		t.Fatalf("the other connection's PING waited for %d INCRs of the deep pipeline (max_pipeline %d)", got, batch)
	}
}
