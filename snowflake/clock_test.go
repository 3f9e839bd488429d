package snowflake

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestCoarseClock: the coarse clock is never ahead of the wall clock; it
// runs a reader only from markBusy until it has gone two ticks without.
func TestCoarseClock(t *testing.T) {
	c := &coarseClock{idle: 2}
	before := time.Now().UnixMilli()
	first := c.now()
	if after := time.Now().UnixMilli(); first < before || first > after {
		t.Fatalf("first read %d, want the clock's, in [%d, %d]", first, before, after)
	}
	if c.ms.Load() != 0 {
		t.Fatal("a reader started without the busy rate")
	}
	for range 2 {
		c.markBusy()
		if c.ms.Load() == 0 {
			t.Fatal("markBusy started no reader")
		}
		for range 1000 {
			ms := c.now()
			if now := time.Now().UnixMilli(); ms > now || ms < first {
				t.Fatalf("coarse clock %d outside [%d, %d]", ms, first, now)
			}
		}
		for c.ms.Load() != 0 { // two ticks without markBusy stop the reader
			runtime.Gosched()
		}
	}
}

// TestCoarseClockWhenBusy: the generator starts the reader once a time
// unit holds coarseBusy IDs, not before, and not again at the same rate
// once it stopped.
func TestCoarseClockWhenBusy(t *testing.T) {
	l := DefaultLayout()
	l.Unit = time.Hour // the test crosses one unit boundary at most
	g := New(Options{Layout: l, MaxClockBack: 5 * time.Millisecond})
	g.clock.idle = 2
	g.Grant(1, 0, time.Now().Add(3*time.Hour).UnixMilli())
	for range coarseBusy - 1 {
		if _, err := g.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if g.clock.ms.Load() != 0 {
		t.Fatalf("reader started after %d IDs", coarseBusy-1)
	}
	// Within twice busySeq+1 IDs one unit reaches busySeq.
	for i := 0; g.clock.ms.Load() == 0; i++ {
		if i == 2*(busySeq+1) {
			t.Fatalf("no reader after %d IDs", coarseBusy-1+i)
		}
		if _, err := g.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for g.clock.ms.Load() != 0 {
		runtime.Gosched()
	}
	for range 10 { // above busySeq in the same unit: no new start
		if _, err := g.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if g.clock.ms.Load() != 0 {
		t.Fatal("reader started again below the busy rate")
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
