package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// Tests that need the package's insides: the zero-allocation hot path and
// the shutdown fence. (servertest imports this package, so these build
// their own allocator.)

// newAlloc starts an allocator on a SQLite file at path ("" for a new one).
func newAlloc(tb testing.TB, path string, so segment.Options, wrap func(persist.Store) persist.Store) (*segment.Allocator, string) {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "leaf.db")
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, persist.Options{CreateSchema: true})
	if err != nil {
		tb.Fatal(err)
	}
	var store persist.Store = db
	if wrap != nil {
		store = wrap(db)
	}
	a := segment.New(store, so)
	if err := a.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		a.Close(context.Background())
		db.Close()
	})
	return a, path
}

// holdTakes is newAlloc's wrap for a store whose Takes of tag ("" for
// every tag) are held by hold.
func holdTakes(hold *faultstore.Hold, tag string) func(persist.Store) persist.Store {
	return func(s persist.Store) persist.Store {
		fs := faultstore.New(s)
		fs.Inject(func(ctx context.Context, c faultstore.Call) error {
			if tag != "" && c.Tag != tag {
				return nil
			}
			return hold.Fault(ctx, c)
		}, faultstore.OpTake)
		return fs
	}
}

// serve runs s on 127.0.0.1:0 and returns the address; the server is shut
// down at cleanup unless the test did.
func serve(tb testing.TB, s *Server) string {
	tb.Helper()
	addr, _ := serveNotify(tb, s)
	return addr
}

// notifyListener closes closed when it is closed.
type notifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *notifyListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// serveNotify is serve, and also returns a channel closed when Shutdown
// closes the listener.
func serveNotify(tb testing.TB, s *Server) (string, <-chan struct{}) {
	tb.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ln := &notifyListener{Listener: tcp, closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	tb.Cleanup(func() {
		s.Shutdown(context.Background())
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			tb.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), ln.closed
}

// newConn is a connection on no socket for running commands directly.
func newConn() *resp.Conn { return resp.NewConn("127.0.0.1:1", "127.0.0.1:6380") }

// do runs one command as its connection runs it where it may block: a
// turn of its own. The replies stay in conn, but never more than 64 KiB
// of them.
func do(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if len(conn.Bytes()) > 64<<10 {
		conn.Reset()
	}
	s.dispatch(c, conn, args, true)
	c.EndTurn(conn)
}

// open registers a connection on no socket, as Serve does an accepted
// one, so its commands are counted.
func open(s *Server, conn *resp.Conn) *client { return s.Open(conn).(*client) }

// lastInt is the last reply written, an integer.
func lastInt(t *testing.T, conn *resp.Conn) int64 {
	t.Helper()
	s := strings.TrimSuffix(string(conn.Bytes()), "\r\n")
	line := s[strings.LastIndexByte(s, '\n')+1:]
	if !strings.HasPrefix(line, ":") {
		t.Fatalf("last reply %q is not an integer", line)
	}
	n, err := strconv.ParseInt(line[1:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bigStepOptions make segments of a million IDs, so no load (which
// allocates, in the allocator) happens while allocations are counted.
func bigStepOptions() segment.Options {
	so := segment.DefaultOptions()
	so.DefaultStep = 1_000_000
	return so
}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// TestIncrZeroAlloc: INCR and INCRBY on a known tag allocate nothing on the
// server path: dispatch, the tag cache, the handler, the reply, whether
// the connection may block or not. (resp's TestTurnZeroAlloc counts the
// connection's own path; TestTransportZeroAlloc the whole, over a socket.)
func TestIncrZeroAlloc(t *testing.T) {
	a, _ := newAlloc(t, "", bigStepOptions(), nil)
	s := New(a, Options{})
	conn := newConn()
	c := open(s, conn)
	incrA, incrB := args("INCR", "a"), args("incr", "b")
	incrByA := args("INCRBY", "a", "5")
	// Warm up: create both tags and let the allocator publish them.
	for range 20 {
		do(s, c, conn, incrA)
		do(s, c, conn, incrB)
	}
	first := lastInt(t, conn)
	flip := false
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"INCR same tag", func() { do(s, c, conn, incrA) }},
		{"INCR alternating tags", func() {
			if flip = !flip; flip {
				do(s, c, conn, incrA)
			} else {
				do(s, c, conn, incrB)
			}
		}},
		{"INCRBY", func() { do(s, c, conn, incrByA) }},
		{"INCR where it must not block", func() {
			if !s.dispatch(c, conn, incrA, false) {
				t.Fatal("INCR of a known tag did not run where it must not block")
			}
			c.EndTurn(conn)
			conn.Reset()
		}},
		{"INCRBY where it must not block", func() {
			if !s.dispatch(c, conn, incrByA, false) {
				t.Fatal("INCRBY of a known tag did not run where it must not block")
			}
			c.EndTurn(conn)
		}},
		{"a pipeline of INCR where it must not block", func() {
			if len(conn.Bytes()) > 64<<10 {
				conn.Reset()
			}
			for range 16 {
				if !s.dispatch(c, conn, incrA, false) {
					t.Fatal("INCR of a known tag did not run where it must not block")
				}
			}
			c.EndTurn(conn)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tc.f); n != 0 {
				t.Errorf("%v allocations per command, want 0", n)
			}
		})
	}
	if last := lastInt(t, conn); last <= first {
		t.Fatalf("the commands did not run: last reply %d, first %d", last, first)
	}
	if got := c.errors.Load(); got != 0 {
		t.Fatalf("%d error replies: %q", got, conn.Bytes())
	}
}

// BenchmarkDispatchIncr is the server path of INCR alone (no network):
// one op is one INCR. "dispatch" runs each INCR where it may block, as a
// turn of its own; "turn" runs them where they must not block, as an
// event loop does, in turns of 1 and 16 (a pipeline); commands are
// counted and timed as in serving. cpu-ns/op is the thread's CPU time
// (Linux), which a busy machine does not inflate as it does ns/op.
func BenchmarkDispatchIncr(b *testing.B) {
	a, _ := newAlloc(b, "", bigStepOptions(), nil)
	s := New(a, Options{})
	conn := newConn()
	c := open(s, conn)
	cmd := args("INCR", "bench")
	do(s, c, conn, cmd)
	b.Run("dispatch", func(b *testing.B) {
		b.ReportAllocs()
		reportCPU(b, 1, func() { do(s, c, conn, cmd) })
	})
	for _, depth := range []int{1, 16} {
		b.Run("turn="+strconv.Itoa(depth), func(b *testing.B) {
			b.ReportAllocs()
			reportCPU(b, depth, func() {
				if len(conn.Bytes()) > 64<<10 {
					conn.Reset()
				}
				for range depth {
					if !s.dispatch(c, conn, cmd, false) {
						b.Fatal("INCR did not run where it must not block")
					}
				}
				c.EndTurn(conn)
			})
		})
	}
}

// BenchmarkDispatchTx is MULTI; INCR; EXPIRE; EXEC on the server path
// alone: one op per transaction.
func BenchmarkDispatchTx(b *testing.B) {
	a, _ := newAlloc(b, "", bigStepOptions(), nil)
	s := New(a, Options{})
	conn := newConn()
	c := newClient(s, conn)
	cmds := [][][]byte{args("MULTI"), args("INCR", "bench"), args("EXPIRE", "bench", "60"), args("EXEC")}
	b.ReportAllocs()
	for b.Loop() {
		for _, cmd := range cmds {
			do(s, c, conn, cmd)
		}
	}
}

// BenchmarkDispatchEval is the "INCR, and EXPIRE if it is 1" script by
// EVALSHA on the server path alone: a fresh interpreter per run.
func BenchmarkDispatchEval(b *testing.B) {
	a, _ := newAlloc(b, "", bigStepOptions(), nil)
	s := New(a, Options{})
	conn := newConn()
	c := newClient(s, conn)
	script := "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n"
	do(s, c, conn, args("SCRIPT", "LOAD", script))
	sha := conn.Bytes()
	cmd := args("EVALSHA", string(sha[bytes.IndexByte(sha, '\n')+1:len(sha)-2]), "1", "bench", "60")
	b.ReportAllocs()
	for b.Loop() {
		do(s, c, conn, cmd)
	}
	if bytes.Contains(conn.Bytes(), []byte("-")) {
		b.Fatalf("EVALSHA: %q", conn.Bytes())
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"42", 42, true}, {"-5", -5, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"99999999999999999999", 0, false}, {"184467440737095516160", 0, false},
		{"", 0, false}, {"-", 0, false}, {"+5", 0, false}, {"07", 0, false}, {"00", 0, false},
		{"-0", 0, false}, {"-07", 0, false}, {" 5", 0, false}, {"5 ", 0, false}, {"1e3", 0, false},
		{"0x10", 0, false}, {"1_000", 0, false}, {"5\x00", 0, false},
	} {
		got, ok := parseInt([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseInt: parseInt accepts exactly the canonical decimal form of an
// int64, which is what strconv.FormatInt prints.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "+1", "01", "-0", "9223372036854775807", "-9223372036854775808", "1e3", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseInt([]byte(s))
		v, err := strconv.ParseInt(s, 10, 64)
		want := err == nil && strconv.FormatInt(v, 10) == s
		if ok != want || (ok && got != v) {
			t.Fatalf("parseInt(%q) = %d, %v; want %d, %v", s, got, ok, v, want)
		}
	})
}

// rawIncrLoop sends pipelines of n INCR tag until the connection fails, and
// returns the IDs it was answered. ready is called after 10 pipelines.
func rawIncrLoop(addr, tag string, n int, ready func()) ([]int64, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	req := strings.Repeat(rawresp.Cmd("INCR", tag), n)
	r := bufio.NewReader(nc)
	var ids []int64
	for {
		if _, err := io.WriteString(nc, req); err != nil {
			return ids, nil
		}
		for range n {
			line, err := r.ReadString('\n')
			if err != nil {
				return ids, nil // closed by Shutdown
			}
			if !strings.HasPrefix(line, ":") {
				return ids, errors.New("unexpected reply " + line)
			}
			id, err := strconv.ParseInt(strings.TrimSpace(line[1:]), 10, 64)
			if err != nil {
				return ids, err
			}
			ids = append(ids, id)
			if ready != nil && len(ids) >= 10*n {
				ready()
				ready = nil
			}
		}
	}
}

// TestShutdownFence: with clients pipelining INCR as fast as they can,
// Shutdown returns with no INCR handler running and none starts afterwards;
// the allocator then gives unused IDs back, and a restarted server hands
// out none of the IDs the clients received.
func TestShutdownFence(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testShutdownFence(t, tr.loops) })
	}
}

func testShutdownFence(t *testing.T, loops int) {
	so := segment.DefaultOptions()
	so.DefaultStep = 100 // many segment switches and loads under way
	a, path := newAlloc(t, "", so, nil)
	s := New(a, Options{Conn: resp.Options{EventLoops: loops}})

	var inflight, late, calls atomic.Int64
	var returned atomic.Bool // Shutdown returned
	fenced := returned.Load
	orig := s.cmds["incr"].fn
	s.cmds["incr"].fn = func(s *Server, c *client, conn *resp.Conn, args [][]byte) {
		inflight.Add(1)
		if fenced() {
			late.Add(1)
		}
		calls.Add(1)
		orig(s, c, conn, args)
		if fenced() {
			late.Add(1)
		}
		inflight.Add(-1)
	}
	// Where it must not block, INCR runs with try when it can.
	origTry := s.cmds["incr"].try
	s.cmds["incr"].try = func(s *Server, c *client, conn *resp.Conn, args [][]byte) bool {
		inflight.Add(1)
		if fenced() {
			late.Add(1)
		}
		ok := origTry(s, c, conn, args)
		if ok {
			calls.Add(1)
		}
		if fenced() {
			late.Add(1)
		}
		inflight.Add(-1)
		return ok
	}
	addr := serve(t, s)

	const clients = 8
	var started, done sync.WaitGroup
	received := make([][]int64, clients)
	errs := make([]error, clients)
	for i := range clients {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			received[i], errs[i] = rawIncrLoop(addr, "fence", 50, func() { once.Do(started.Done) })
			once.Do(started.Done)
		}()
	}
	started.Wait() // every client is pipelining

	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	returned.Store(true)
	if n := inflight.Load(); n != 0 {
		t.Fatalf("%d INCR handlers still running after Shutdown returned", n)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("allocator Close: %v", err)
	}
	done.Wait()
	if n := late.Load(); n != 0 {
		t.Fatalf("%d INCR handlers ran after the fence", n)
	}
	seen := map[int64]bool{}
	var highest int64
	for i, ids := range received {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d received twice", id)
			}
			seen[id] = true
			highest = max(highest, id)
		}
	}
	t.Logf("%d INCRs ran, %d replies reached the clients, highest %d", calls.Load(), len(seen), highest)

	// Restart on the same database: the given-back IDs come again, but
	// none that a client received.
	a2, _ := newAlloc(t, path, so, nil)
	s2 := New(a2, Options{Conn: resp.Options{EventLoops: loops}})
	addr2 := serve(t, s2)
	ids, err := rawIncrLoopOnce(addr2, "fence", 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("after the restart, ID %d was handed out again", id)
		}
	}
	if ids[0] <= highest {
		t.Fatalf("after the restart, first ID %d is not above the highest received %d", ids[0], highest)
	}
}

// rawIncrLoopOnce sends one pipeline of n INCR tag and returns the IDs.
func rawIncrLoopOnce(addr, tag string, n int) ([]int64, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	req := strings.Repeat(rawresp.Cmd("INCR", tag), n)
	if _, err := io.WriteString(nc, req); err != nil {
		return nil, err
	}
	r := bufio.NewReader(nc)
	ids := make([]int64, 0, n)
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			return ids, err
		}
		id, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, ":")), 10, 64)
		if err != nil {
			return ids, errors.New("reply " + line)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// TestShutdownWaitsForInflight: a command waiting on the database holds
// Shutdown until it finishes; when Shutdown's context ends first, the wait
// is cancelled and Shutdown still returns with no handler running.
func TestShutdownWaitsForInflight(t *testing.T) {
	for _, tc := range []struct {
		tr     int
		expire bool
	}{{0, false}, {0, true}, {1, false}, {1, true}} {
		tr, expire := transports[tc.tr], tc.expire
		t.Run(tr.name+"/context expires="+strconv.FormatBool(expire), func(t *testing.T) {
			hold := faultstore.NewHold()
			a, _ := newAlloc(t, "", segment.DefaultOptions(), holdTakes(hold, ""))
			s := New(a, Options{Conn: resp.Options{EventLoops: tr.loops}})
			var inflight, finished atomic.Int64
			orig := s.cmds["incr"].fn
			s.cmds["incr"].fn = func(s *Server, c *client, conn *resp.Conn, args [][]byte) {
				inflight.Add(1)
				orig(s, c, conn, args)
				finished.Add(1)
				inflight.Add(-1)
			}
			addr, stopped := serveNotify(t, s)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			io.WriteString(nc, "INCR slow\r\n")
			<-hold.Entered() // the INCR waits on the database

			ctx, cancel := context.WithCancel(context.Background())
			if expire {
				cancel()
			} else {
				defer cancel()
				// Released only once Shutdown has stopped accepting: it
				// must then wait for the INCR.
				go func() {
					<-stopped
					hold.Release()
				}()
			}
			err = s.Shutdown(ctx)
			if expire {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Shutdown = %v, want context.Canceled", err)
				}
				hold.Release()
			} else if err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if n := inflight.Load(); n != 0 {
				t.Fatalf("%d handlers running after Shutdown", n)
			}
			if n := finished.Load(); n != 1 {
				t.Fatalf("%d INCRs finished, want 1", n)
			}
		})
	}
}

// TestAllocErrorText: each allocator error, in the shapes the allocator
// formats them, gets its reply; the tag and the cause are said once.
func TestAllocErrorText(t *testing.T) {
	tag := []byte("g")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: tag %q: %w", segment.ErrUnavailable, "g", errors.New("dial tcp: refused")),
			"TRYAGAIN no cached IDs for tag 'g' and the database is unavailable: dial tcp: refused"},
		{fmt.Errorf("%w: tag %q: no segment within %s (last error: %v)", segment.ErrUnavailable, "g", "2s", "timeout"),
			"TRYAGAIN no cached IDs for tag 'g' and the database is unavailable: no segment within 2s (last error: timeout)"},
		{fmt.Errorf("%w: something else", segment.ErrUnavailable),
			"TRYAGAIN no cached IDs for tag 'g' and the database is unavailable: something else"},
		{fmt.Errorf("%w: tag %q: its cached IDs are spent; re-create the row with max_id above %d", segment.ErrTagGone, "g", 20),
			"ERR tag 'g' was deleted from the database: its cached IDs are spent; re-create the row with max_id above 20"},
		{fmt.Errorf("%w: tag %q: database gave [%d, %d), IDs up to %d are reserved; raise max_id above %d", segment.ErrGuard, "g", 1, 11, 20, 20),
			"ERR tag 'g': the database answered a range below IDs already reserved (max_id was lowered): database gave [1, 11), IDs up to 20 are reserved; raise max_id above 20"},
		{fmt.Errorf("%w: tag %q", segment.ErrOverflow, "g"), "ERR tag 'g' has exhausted the 64-bit ID space"},
		{segment.ErrClosed, "TRYAGAIN server is shutting down"},
		{fmt.Errorf("%w: %q (auto-create is off)", segment.ErrUnknownTag, "g"), "ERR unknown tag 'g' (auto-create is off)"},
		{fmt.Errorf("%w: empty", segment.ErrBadTag), "ERR invalid tag name: empty"},
		{fmt.Errorf("%w: 7 > 5", segment.ErrTooMany), "ERR count exceeds max_batch: 7 > 5"},
		{errors.New("boom"), "ERR boom"},
	} {
		if got := allocErrorText(tag, tc.err); got != tc.want {
			t.Errorf("%v:\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"": "", "ok": "ok", "a\r\nb": "a  b", "\n": " ", "x\ry": "x y"} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
