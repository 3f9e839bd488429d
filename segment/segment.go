package segment

import (
	"math"
	"sync/atomic"
)

// segment is one reserved range [start, last+1). value is the last ID handed
// out: taking n IDs is one atomic add of n, and the IDs are valid while the
// sum stays at or below last. Adds past the end are harmless; the caller then
// takes the slow path.
type segment struct {
	value atomic.Int64 // last ID issued; start-1 when fresh
	// value is written by every request; the fields below are read by
	// every request. On a cache line of their own they stay shared in every
	// core's cache instead of bouncing with each add (and segments of other
	// tags cannot share value's line either).
	_        [56]byte
	last     int64 // last valid ID (the range's end - 1)
	trigger  int64 // the ID whose issue starts the prefetch
	start    int64 // first ID
	size     int64 // IDs in the range
	loadedAt int64 // unix nanos of the load
	_        [24]byte
}

// newSegment returns a fresh segment over [start, end) whose prefetch fires
// once the fraction prefetchAt of it is used.
func newSegment(start, end int64, prefetchAt float64, loadedAt int64) *segment {
	s := &segment{last: end - 1, start: start, size: end - start, loadedAt: loadedAt}
	s.value.Store(start - 1)
	used := int64(math.Ceil(float64(s.size) * prefetchAt))
	used = max(1, min(used, s.size))
	s.trigger = start + used - 1
	return s
}

// emptySegment is a segment with no IDs, positioned at end: the state of a
// tag before its first load and after its segments are retired.
func emptySegment(end int64) *segment {
	s := &segment{last: end - 1, start: end, trigger: math.MaxInt64}
	s.value.Store(end - 1)
	return s
}

// end is the exclusive end of the range: the max_id the database holds when
// this segment is the highest one taken.
func (s *segment) end() int64 { return s.last + 1 }

// firstUnissued is the lowest ID not yet handed out, at most end.
func (s *segment) firstUnissued() int64 { return min(s.value.Load(), s.last) + 1 }

// used is how many IDs were handed out.
func (s *segment) used() int64 { return s.firstUnissued() - s.start }

// crossed reports whether taking IDs up to last crossed the prefetch point:
// exactly one caller sees true for each segment.
func (s *segment) crossed(last, n int64) bool { return last >= s.trigger && last-n < s.trigger }
