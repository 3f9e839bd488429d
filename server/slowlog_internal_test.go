package server

import (
	"testing"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// stepClock is a clock for Server.clock that moves only when told.
type stepClock struct{ now int64 }

func (c *stepClock) read() int64             { return c.now }
func (c *stepClock) advance(d time.Duration) { c.now += int64(d) }

// timedTurn runs commands on c as a connection's turns do, the clock
// moving d while each runs: where they must not block until one might,
// which ends the turn and runs in a turn of its own.
func timedTurn(s *Server, c *client, conn *resp.Conn, clk *stepClock, d time.Duration, cmds ...[][]byte) {
	for _, cmd := range cmds {
		if !s.dispatch(c, conn, cmd, false) {
			c.EndTurn(conn)
			s.dispatch(c, conn, cmd, true)
		}
		clk.advance(d)
	}
	c.EndTurn(conn)
}

// TestRunTiming: commands are timed by runs: a run of the same command in
// a turn is charged its average, a different command starts a new run, a
// run at least as slow as the threshold is logged once with its first
// command's arguments and the average, and the histogram and usec add up.
func TestRunTiming(t *testing.T) {
	a, _ := newAlloc(t, "", bigStepOptions(), nil)
	s := New(a, Options{}) // the default threshold, 10 ms
	clk := &stepClock{now: 1}
	s.clock = clk.read
	conn := newConn()
	c := open(s, conn)
	do(s, c, conn, args("INCR", "a")) // loads the tag: not timed below
	base := statsByName(s)["incr"]

	// Four INCRs of 5 ms each, one turn: 20 ms in all, 5 ms each: none slow.
	timedTurn(s, c, conn, clk, 5*time.Millisecond, args("INCR", "a"), args("INCR", "a"), args("INCR", "a"), args("INCR", "a"))
	// A PING of 2 ms then an ECHO of 30 ms, one turn: two runs, the ECHO slow.
	timedTurn(s, c, conn, clk, 0, args("PING"))
	clk.advance(2 * time.Millisecond)
	timedTurn(s, c, conn, clk, 30*time.Millisecond, args("ECHO", "slow"))
	// INCR a then INCR b, 12 ms each: b is new, so its INCR may block and
	// runs in a turn of its own: two slow runs.
	timedTurn(s, c, conn, clk, 12*time.Millisecond, args("INCR", "a"), args("INCR", "b"))

	incr := statsByName(s)["incr"]
	if got, want := incr.Calls-base.Calls, int64(6); got != want {
		t.Errorf("INCR calls %d, want %d", got, want)
	}
	if got, want := incr.Time-base.Time, 44*time.Millisecond; got != want {
		t.Errorf("INCR time %v, want %v", got, want)
	}
	if got, want := incr.Fast-base.Fast, int64(5); got != want {
		t.Errorf("INCR answered from memory %d, want %d (the INCR of b loads b)", got, want)
	}
	if got := statsByName(s)["echo"].Time; got != 30*time.Millisecond {
		t.Errorf("ECHO time %v, want 30ms", got)
	}
	s.slowlog.mu.Lock()
	entries := append([]slowlogEntry(nil), s.slowlog.entries...)
	s.slowlog.mu.Unlock()
	if len(entries) != 3 {
		t.Fatalf("%d slow entries, want 3: %+v", len(entries), entries)
	}
	for i, want := range []struct {
		args   string
		micros int64
	}{{"ECHO slow", 30000}, {"INCR a", 12000}, {"INCR b", 12000}} {
		if got := entries[i]; joinArgs(got.args) != want.args || got.micros != want.micros {
			t.Errorf("entry %d: %q %d us, want %q %d us", i, got.args, got.micros, want.args, want.micros)
		}
	}
	hist := s.stats.histograms()[s.cmds["incr"].stat]
	if hist == nil || hist.total() != 6+1 {
		t.Fatalf("INCR histogram counts %v, want 7", hist)
	}
	if p50 := hist.percentile(50); p50 < int64(5*time.Millisecond) || p50 > int64(5*time.Millisecond)*17/16 {
		t.Errorf("INCR p50 %d ns, want 5 ms within 1/16", p50)
	}
}

// statsByName indexes CommandStats.
func statsByName(s *Server) map[string]CommandStat {
	out := map[string]CommandStat{}
	for _, st := range s.CommandStats() {
		out[st.Name] = st
	}
	return out
}

func joinArgs(a []string) string {
	out := ""
	for i, s := range a {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out
}

// TestBuckets: every duration falls in the bucket whose top is at or
// above it and whose predecessor's top is below it, tops grow, and the
// last top is the largest duration kept apart.
func TestBuckets(t *testing.T) {
	prev := int64(0)
	for i := range histBuckets {
		top := bucketTop(i)
		if top <= prev {
			t.Fatalf("bucket %d: top %d after %d", i, top, prev)
		}
		for _, d := range []int64{prev + 1, (prev + top) / 2, top} {
			if i == 0 && d < 1 {
				continue
			}
			if got := bucketOf(d); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d (tops %d..%d]", d, got, i, prev, top)
			}
		}
		if i > 0 && float64(top-prev)/float64(prev) > 1.0/16+1e-9 {
			t.Fatalf("bucket %d: (%d, %d] wider than 1/16", i, prev, top)
		}
		prev = top
	}
	if prev != 1<<histMaxShift || bucketOf(1<<40) != histBuckets-1 || bucketOf(0) != 0 {
		t.Fatalf("last top %d; bucketOf(2^40) = %d; bucketOf(0) = %d", prev, bucketOf(1<<40), bucketOf(0))
	}
}
