package snowflake

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// coarseBusy is the IDs in one time unit that start a coarse clock's
	// reader: at a lower rate reading the clock for each ID costs less
	// than the reader's thousand wake-ups a second.
	coarseBusy = 64
	// busySeq is the sequence number that, reached within one time unit,
	// shows at least coarseBusy IDs in it (the first is below seqSpread).
	busySeq = seqSpread + coarseBusy - 1
	// coarseIdle is how many ticks below the busy rate stop the reader.
	coarseIdle = 100
)

// coarseClock is the wall clock in Unix milliseconds. While IDs come at
// the busy rate (coarseBusy in a time unit, markBusy) a goroutine reads
// the clock once a millisecond, so that an ID costs a load instead of a
// clock read (a vDSO call at best, a system call on some virtual machines:
// more than the rest of the ID); after coarseIdle ticks below that rate it
// stops, and each ID reads the clock again.
//
// A reader's value may lag the wall clock by a tick, or by however long
// the reader waits to be scheduled on a busy machine: the IDs then carry
// an earlier time, which is safe. It is never ahead of the clock, and a
// clock set back reaches the generator as it would through time.Now, a
// millisecond later.
type coarseClock struct {
	ms   atomic.Int64 // 0 while no reader runs
	busy atomic.Bool  // the busy rate was seen since the reader's last tick
	mu   sync.Mutex   // starts and stops the reader
	idle int          // ticks below the busy rate that stop the reader; 0: coarseIdle
}

// now is the wall clock in Unix milliseconds: the reader's while one
// runs, else read now.
func (c *coarseClock) now() int64 {
	if ms := c.ms.Load(); ms != 0 {
		return ms
	}
	return time.Now().UnixMilli()
}

// markBusy says that IDs come at the busy rate: it starts the reader
// unless one runs, and keeps it running.
func (c *coarseClock) markBusy() {
	if c.ms.Load() != 0 {
		c.busy.Store(true)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ms.Load() != 0 {
		return
	}
	c.ms.Store(time.Now().UnixMilli())
	c.busy.Store(true)
	go c.run()
}

// run reads the clock every millisecond until the rate has stayed below
// the busy one for coarseIdle ticks.
func (c *coarseClock) run() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	limit := cmp.Or(c.idle, coarseIdle)
	idle := 0
	for range t.C {
		c.ms.Store(time.Now().UnixMilli())
		if c.busy.Swap(false) {
			idle = 0
		} else if idle++; idle == limit {
			c.mu.Lock()
			c.ms.Store(0)
			c.mu.Unlock()
			return
		}
	}
}
