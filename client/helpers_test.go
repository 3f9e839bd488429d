package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/client"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// backend is a server the generators lease from: a leaf server in this
// process (on a fresh SQLite file) or a throwaway redis-server.
type backend struct {
	name  string
	start func(tb testing.TB) string // the server's host:port
}

var backends = []backend{
	{"leaf", startLeaf},
	{"redis", redistest.Start},
}

// startLeaf serves on segments of a million IDs, so that the ranges of
// consecutive INCRBYs follow each other without a gap.
func startLeaf(tb testing.TB) string {
	tb.Helper()
	so := segment.DefaultOptions()
	so.DefaultStep = 1_000_000
	return servertest.Start(tb, servertest.Options{Segment: &so}).Addr
}

// forEachBackend runs f against each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, addr string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.start(t)) })
	}
}

// newRedis is a go-redis client of addr, closed at cleanup. Reads wait
// a minute: the tests bound their waits with contexts, not with the
// machine's speed. No retries: every failure shows.
func newRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newGen is a generator closed at cleanup.
func newGen(t testing.TB, rdb redis.UniversalClient, tag string, o client.Options) *client.Generator {
	t.Helper()
	g, err := client.New(rdb, tag, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// patient is a context for calls that must succeed: its deadline is a hang
// guard, not a timing assertion.
func patient(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func next(t testing.TB, g *client.Generator) int64 {
	t.Helper()
	id, err := g.Next(patient(t))
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}

// leaseLog records the n of every INCRBY a client sends, through a
// go-redis hook.
type leaseLog struct {
	mu    sync.Mutex
	sizes []int64
}

func logLeases(rdb redis.UniversalClient) *leaseLog {
	l := &leaseLog{}
	rdb.AddHook(l)
	return l
}

func (l *leaseLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *leaseLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (l *leaseLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "incrby" {
			n, _ := cmd.Args()[2].(int64)
			l.mu.Lock()
			l.sizes = append(l.sizes, n)
			l.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// Sizes is the n of each INCRBY sent so far.
func (l *leaseLog) Sizes() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes)
}

// scriptedClock answers the i-th call with the i-th time of a script (and
// the last one after the script ends). A generator reads its clock once per
// lease request, so the script sets how long each lease lasted.
type scriptedClock struct {
	mu    sync.Mutex
	times []time.Time
	calls int
}

// newScriptedClock starts at an arbitrary instant and adds gaps[i] before
// the i-th call (the first gap is ignored: nothing came before).
func newScriptedClock(gaps ...time.Duration) *scriptedClock {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &scriptedClock{}
	for _, g := range gaps {
		now = now.Add(g)
		c.times = append(c.times, now)
	}
	return c
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := min(c.calls, len(c.times)-1)
	c.calls++
	return c.times[i]
}

// gate is a TCP proxy to a server that can hold the replies back: while
// held, the server looks alive (connections open, requests arrive) but
// answers nothing.
type gate struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	closed bool
	conns  []net.Conn
}

func newGate(t testing.TB, backend string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, backend: backend}
	g.cond = sync.NewCond(&g.mu)
	go g.serve()
	t.Cleanup(g.close)
	return g
}

func (g *gate) Addr() string { return g.ln.Addr().String() }

func (g *gate) hold() { g.mu.Lock(); g.held = true; g.mu.Unlock() }

func (g *gate) release() { g.mu.Lock(); g.held = false; g.cond.Broadcast(); g.mu.Unlock() }

func (g *gate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", g.backend)
		if err != nil {
			c.Close()
			continue
		}
		if !g.track(c, s) {
			return
		}
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go g.replies(c, s)
	}
}

// track remembers the pair for close; false when the gate is closed.
func (g *gate) track(c, s net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		c.Close()
		s.Close()
		return false
	}
	g.conns = append(g.conns, c, s)
	return true
}

// replies copies the server's replies to the client, waiting while held.
func (g *gate) replies(c, s net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			g.mu.Lock()
			for g.held && !g.closed {
				g.cond.Wait()
			}
			g.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *gate) close() {
	g.ln.Close()
	g.mu.Lock()
	g.closed = true
	for _, c := range g.conns {
		c.Close()
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}

// silentServer accepts connections, reads what they send and never
// answers: a server hung in the middle of the network. It counts the
// connections; they are closed at cleanup.
type silentServer struct {
	ln       net.Listener
	accepted chan struct{} // a token per connection
	mu       sync.Mutex
	conns    []net.Conn
}

func newSilentServer(t testing.TB) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln, accepted: make(chan struct{}, 1000)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.accepted <- struct{}{}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *silentServer) Addr() string { return s.ln.Addr().String() }

// Conns is how many connections were accepted.
func (s *silentServer) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// wantIs fails unless err matches every target.
func wantIs(t testing.TB, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Errorf("error %v: not %v", err, target)
		}
	}
}
