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
	probe    int64 // the ID half-way to trigger, whose issue marks the time (Tag.markRate)
	start    int64 // first ID
	size     int64 // IDs in the range
	loadedAt int64 // unix nanos of the load
	// A floor raised past IDs of this segment skips them (Tag.skipTo):
	// skipped counts them, and lastReal is the last ID handed out before
	// the latest skip, which ended at skipEnd. Guarded by the tag's mu;
	// written rarely, so they may share the read-mostly line.
	skipped, lastReal, skipEnd int64
}

// newSegment returns a fresh segment over [start, end) whose prefetch fires
// once the fraction prefetchAt of it is used.
func newSegment(start, end int64, prefetchAt float64, loadedAt int64) *segment {
	s := &segment{last: end - 1, start: start, size: end - start, loadedAt: loadedAt}
	s.value.Store(start - 1)
	used := int64(math.Ceil(float64(s.size) * prefetchAt))
	used = max(1, min(used, s.size))
	s.trigger = start + used - 1
	s.probe = math.MaxInt64
	if used >= 2 {
		s.probe = start + used/2 - 1
	}
	return s
}

// emptySegment is a segment with no IDs, positioned at end: the state of a
// tag before its first load and after its segments are retired.
func emptySegment(end int64) *segment {
	s := &segment{last: end - 1, start: end, trigger: math.MaxInt64, probe: math.MaxInt64}
	s.value.Store(end - 1)
	return s
}

// end is the exclusive end of the range: the max_id the database holds when
// this segment is the highest one taken.
func (s *segment) end() int64 { return s.last + 1 }

// firstUnissued is the lowest ID not yet handed out, at most end.
func (s *segment) firstUnissued() int64 { return min(s.value.Load(), s.last) + 1 }

// used is how many IDs were taken from the range: handed out or skipped.
func (s *segment) used() int64 { return s.firstUnissued() - s.start }

// issued is how many IDs were handed out, skipped ones not counted. The
// tag's mu must be held.
func (s *segment) issued() int64 { return max(s.used()-s.skipped, 0) }

// lastIssued is the highest ID handed out from the range, and false when
// none was. The tag's mu must be held.
func (s *segment) lastIssued() (int64, bool) {
	v := min(s.value.Load(), s.last)
	if s.skipped > 0 && v <= s.skipEnd {
		// Nothing was handed out since the latest skip.
		v = s.lastReal
	}
	return v, v >= s.start
}

// skip moves the segment past n, as a floor at n requires, and returns how
// many of its IDs that skipped. The tag's mu must be held.
func (s *segment) skip(n int64) int64 {
	v := s.value.Load()
	for v < n && !s.value.CompareAndSwap(v, n) {
		v = s.value.Load()
	}
	if v >= n || v >= s.last {
		return 0 // already past n, or used up
	}
	if s.skipped == 0 || v > s.skipEnd {
		s.lastReal = v // IDs were handed out since the last skip, if any
	}
	k := min(n, s.last) - v
	s.skipped += k
	s.skipEnd = n
	return k
}

// probed reports whether taking IDs up to last, n of them, crossed the
// probe: exactly one caller sees true for each segment.
func (s *segment) probed(last, n int64) bool { return last >= s.probe && last-n < s.probe }
