package snowflake

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"
)

// coarseIdle is how many ticks without an ID stop a coarse clock's reader.
const coarseIdle = 1000

// coarseClock is the wall clock in Unix milliseconds as a goroutine reads
// it once a millisecond while IDs are being made, so that an ID costs a
// load instead of a clock read (a vDSO call at best, a system call on some
// virtual machines: more than the rest of the ID). It runs only while used:
// after coarseIdle ticks without an ID it stops, and the next ID reads the
// clock itself and starts it again.
//
// Its value may lag the wall clock by a tick, or by however long the
// reader waits to be scheduled on a busy machine: the IDs then carry an
// earlier time, which is safe. It is never ahead of the clock, and a clock
// set back reaches the generator as it would through time.Now, a
// millisecond later.
type coarseClock struct {
	ms   atomic.Int64 // 0 while no reader runs
	used atomic.Bool  // an ID was made since the reader's last tick
	mu   sync.Mutex   // starts and stops the reader
	idle int          // ticks without an ID that stop the reader; 0: coarseIdle
}

// now is the coarse wall clock in Unix milliseconds.
func (c *coarseClock) now() int64 {
	if ms := c.ms.Load(); ms != 0 {
		if !c.used.Load() { // a store only once per tick
			c.used.Store(true)
		}
		return ms
	}
	return c.start()
}

// start reads the clock and starts the reader, unless one runs.
func (c *coarseClock) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms := c.ms.Load(); ms != 0 {
		return ms
	}
	ms := time.Now().UnixMilli()
	c.ms.Store(ms)
	c.used.Store(true)
	go c.run()
	return ms
}

// run reads the clock every millisecond until it has not been used for
// coarseIdle ticks.
func (c *coarseClock) run() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	limit := cmp.Or(c.idle, coarseIdle)
	idle := 0
	for range t.C {
		c.ms.Store(time.Now().UnixMilli())
		if c.used.Swap(false) {
			idle = 0
		} else if idle++; idle == limit {
			c.mu.Lock()
			c.ms.Store(0)
			c.mu.Unlock()
			return
		}
	}
}
