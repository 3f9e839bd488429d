package client

import (
	"math"
	"sync/atomic"
)

// maxID is the highest ID a generator hands out: far enough below
// math.MaxInt64 that the adds of callers racing past a lease's end can
// never wrap around.
const maxID = math.MaxInt64 - 1<<40

// lease is one range [start, last] the server gave. value is the last ID
// handed out: taking n IDs is one atomic add of n, valid while the sum stays
// at or below last. Adds past the end are harmless: those callers take the
// slow path.
type lease struct {
	value atomic.Int64 // last ID handed out; start-1 when fresh
	// value is written by every call, the fields below only read: on a
	// cache line of their own they stay shared in every core's cache.
	_       [56]byte
	last    int64 // last ID of the range
	trigger int64 // the ID whose hand-out requests the next lease
	size    int64 // IDs in the range
	_       [40]byte
}

// newLease is a fresh lease over [start, last] whose next lease is
// requested once the fraction prefetchAt of it is handed out.
func newLease(start, last int64, prefetchAt float64) *lease {
	l := &lease{last: last, size: last - start + 1}
	l.value.Store(start - 1)
	used := int64(math.Ceil(float64(l.size) * prefetchAt))
	l.trigger = start + max(1, min(used, l.size)) - 1
	return l
}

// emptyLease holds no ID: a generator's state before its first lease and
// after Close.
func emptyLease() *lease {
	return &lease{trigger: math.MaxInt64}
}

// take takes n IDs from l with one atomic add and returns the last; ok is
// false when they do not fit. crossed is true for the one caller whose add
// went past the prefetch point.
func (l *lease) take(n int64) (last int64, crossed, ok bool) {
	if n > l.size {
		return 0, false, false
	}
	last = l.value.Add(n)
	if last > l.last {
		return 0, false, false
	}
	return last, last >= l.trigger && last-n < l.trigger, true
}

// spent reports whether every ID of l was handed out.
func (l *lease) spent() bool { return l.value.Load() >= l.last }
