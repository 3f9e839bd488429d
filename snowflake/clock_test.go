package snowflake

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestCoarseClock: the coarse clock is never ahead of the wall clock, its
// reader stops once unused, and the next read starts it again.
func TestCoarseClock(t *testing.T) {
	c := &coarseClock{idle: 2}
	before := time.Now().UnixMilli()
	first := c.now()
	if after := time.Now().UnixMilli(); first < before || first > after {
		t.Fatalf("first read %d, want the clock's, in [%d, %d]", first, before, after)
	}
	if c.ms.Load() == 0 {
		t.Fatal("no reader started by the first read")
	}
	for c.ms.Load() != 0 { // unused for two ticks, the reader stops
		runtime.Gosched()
	}
	second := c.now()
	if after := time.Now().UnixMilli(); second < first || second > after {
		t.Fatalf("read after a stop %d, want in [%d, %d]", second, first, after)
	}
	if c.ms.Load() == 0 {
		t.Fatal("the read after a stop started no reader")
	}
	for range 1000 {
		ms := c.now()
		if now := time.Now().UnixMilli(); ms > now {
			t.Fatalf("coarse clock %d ahead of the clock %d", ms, now)
		}
	}
}

// TestStaleCoarseClock: a coarse clock stuck behind (its reader not
// scheduled) neither caps the IDs at one unit's sequence nor passes for a
// clock gone back: waits are decided on a fresh read.
func TestStaleCoarseClock(t *testing.T) {
	g := New(Options{Layout: DefaultLayout(), MaxClockBack: 5 * time.Millisecond,
		Sleep: func(context.Context, time.Duration) error {
			t.Error("waited, with the clock a second past the coarse one")
			return errors.New("no wait expected")
		}})
	g.Grant(1, 0, time.Now().Add(time.Hour).UnixMilli())
	g.clock.ms.Store(time.Now().Add(-time.Second).UnixMilli()) // no reader runs: it stays
	// The stale unit's IDs, then half a unit's on the clock: one fresh
	// unit holds them (its first sequence is below seqSpread), so nothing
	// here may wait whatever the machine's speed.
	capacity := g.l.Capacity()
	prev := int64(0)
	for range capacity + capacity/2 {
		id, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("ID %d after %d", id, prev)
		}
		prev = id
	}
	if st := g.Stats(); st.ClockWaits != 0 || st.SeqWaits != 0 || st.ClockRefusals != 0 {
		t.Fatalf("stats %+v, want no waits nor refusals", st)
	}
}
