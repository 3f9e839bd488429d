package resp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
)

// TestShutdownFlush: Shutdown lets a connection take the replies of the
// commands that ran before the fence, even when they wait for room in its
// socket, then closes it: every transport, the same rule. (The window is
// lengthened so a slow machine cannot cut it; Shutdown returns as soon as
// the replies are taken.)
func TestShutdownFlush(t *testing.T) {
	const n, size = 6, 10_000 // 60 KB of replies: one turn, far beyond the buffers
	reply := "$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("b", size) + "\r\n"
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			s.flushWindow = time.Minute
			nc, r := dialTight(t, s, addr)
			io.WriteString(nc, strings.Repeat(rawresp.Cmd("BIG", strconv.Itoa(size)), n))
			redistest.WaitFor(t, "the commands to run", func() bool { return h.calls.Load() == n+1 })

			stopped := make(chan error, 1)
			go func() { stopped <- s.Shutdown(context.Background()) }()
			got, err := io.ReadAll(r) // until the server closes
			if err != nil {
				t.Fatalf("%v after %d bytes", err, len(got))
			}
			if want := strings.Repeat(reply, n); string(got) != want {
				t.Fatalf("got %d bytes of replies, want %d", len(got), len(want))
			}
			if err := <-stopped; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		})
	}
}

// TestShutdownCut: when Shutdown's context ends, a connection that does
// not take its replies is closed at once, and Shutdown returns the
// context's error.
func TestShutdownCut(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			s, addr := start(t, h, Options{EventLoops: tr.loops})
			s.flushWindow = time.Hour
			nc, _ := dialTight(t, s, addr)
			io.WriteString(nc, strings.Repeat(rawresp.Cmd("BIG", "10000"), 6))
			redistest.WaitFor(t, "the commands to run", func() bool { return h.calls.Load() == 7 })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Shutdown = %v, want context.Canceled", err)
			}
			if n := h.closed.Load(); n != 1 {
				t.Fatalf("%d connections closed, want 1", n)
			}
		})
	}
}

// TestShutdownFence: with clients pipelining as fast as they can (some
// commands blocking), Shutdown returns with no command running, and none
// runs after; the replies the clients got are a prefix of what they sent.
func TestShutdownFence(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			h.release("w")
			s, addr := start(t, h, Options{EventLoops: tr.loops, MaxPipeline: 7})
			var returned atomic.Bool
			var late atomic.Int64
			hook := func([]byte) {
				if returned.Load() {
					late.Add(1)
				}
			}
			h.after.Store(&hook)

			const clients = 8
			var started, done sync.WaitGroup
			for i := range clients {
				started.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					var once sync.Once
					defer once.Do(started.Done)
					nc, err := net.Dial("tcp", addr)
					if err != nil {
						t.Error(err)
						return
					}
					defer nc.Close()
					r := bufio.NewReader(nc)
					req := strings.Repeat(rawresp.Cmd("INCR", "f"+strconv.Itoa(i)), 50) + rawresp.Cmd("WAIT", "w")
					for round := 0; ; round++ {
						if _, err := io.WriteString(nc, req); err != nil {
							return
						}
						for k := range 51 {
							line, err := r.ReadString('\n')
							if err != nil {
								return // closed by Shutdown
							}
							want := ":" + strconv.Itoa(round*50+k+1) + "\r\n"
							if k == 50 {
								want = "+w\r\n"
							}
							if line != want {
								t.Errorf("client %d: %q, want %q", i, line, want)
								return
							}
						}
						if round == 3 {
							once.Do(started.Done)
						}
					}
				}()
			}
			started.Wait() // every client is pipelining
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			returned.Store(true)
			if n := h.inflight.Load(); n != 0 {
				t.Fatalf("%d commands running after Shutdown returned", n)
			}
			done.Wait()
			if n := late.Load(); n != 0 {
				t.Fatalf("%d commands ran after Shutdown returned", n)
			}
			if o, c := h.opened.Load(), h.closed.Load(); o != c {
				t.Fatalf("%d connections opened, %d closed", o, c)
			}
		})
	}
}
