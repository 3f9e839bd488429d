package snowflake

import (
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
