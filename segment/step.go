package segment

import (
	"math"
	"time"
)

// loadMargin is how many load times of IDs, at the rate the tag is used
// now, the part of a segment after its prefetch point must hold: the
// prefetch then ends before the segment runs out even when the next load
// takes twice as long as the last.
const loadMargin = 2

// burstHeadroom is how many times the rate measured at an idle tag's
// probe a burst is assumed to reach: the first IDs of a burst come while
// its clients still connect (a tenth of the rate, measured with
// redis-benchmark's 50 connections), and a segment sized for them would
// run out before the next load. Sizing for more costs IDs only if the
// server stops (the adaptive step halves it again); sizing for less
// costs a wait.
const burstHeadroom = 16

// stepPolicy is Leaf's adaptive step: the segment size follows the rate of
// use so that a segment lasts about segmentDuration.
type stepPolicy struct {
	segmentDuration time.Duration
	maxStep         int64
}

// next returns the size of the next segment given the current step, the
// table's step (the floor) and how long the last segment lasted:
// shorter than segmentDuration doubles (unless that passes maxStep), shorter
// than twice that keeps, longer halves (unless that goes below the floor).
// The result is never below the floor, even if the table's step was raised.
func (p stepPolicy) next(step, floor int64, lasted time.Duration) int64 {
	switch {
	case lasted < p.segmentDuration:
		if step*2 <= p.maxStep {
			step *= 2
		}
	case lasted < 2*p.segmentDuration:
	default:
		if step/2 >= floor {
			step /= 2
		}
	}
	return max(step, floor)
}

// cover is the smallest segment whose part after the prefetch point (the
// fraction 1-prefetchAt of it) lasts loadMargin load times at the rate
// the current segment is used (used IDs in elapsed nanoseconds), at most
// maxStep; 0 when nothing is known yet. It lets a tag that meets a burst
// reach a sufficient step in one load, where doubling would take one
// load, and one wait on a slow database, per doubling.
func (p stepPolicy) cover(used, elapsed, load int64, prefetchAt float64) int64 {
	if used <= 0 || elapsed <= 0 || load <= 0 {
		return 0
	}
	after := max(1-prefetchAt, 0.01)
	need := float64(used) / float64(elapsed) * float64(load) * loadMargin / after
	if need >= float64(p.maxStep) {
		return p.maxStep
	}
	return int64(math.Ceil(need))
}

// setStepLocked applies a step changed by an operator: the floor of the
// adaptive step from now on, and the size of the next load at least.
func (t *Tag) setStepLocked(step int64) {
	t.minStep = step
	t.step = max(t.step, step)
	t.steps++
}

// tableStepLocked takes the step a load read from the table, unless an
// operator changed it since the load was planned: the load may have read
// the row before the change, and the change must not be undone.
func (t *Tag) tableStepLocked(step, s0 int64) {
	if t.steps == s0 {
		t.minStep = step
	}
}

// nextStepLocked is the size the next load would take: Leaf's adaptive
// step, or more when that would not last the time a load takes at the
// rate the current segment is used (cover).
func (t *Tag) nextStepLocked(now int64) int64 {
	step := t.a.policy.next(t.step, t.minStep, time.Duration(now-t.lastLoad))
	if t.switchedAt > 0 {
		cur := t.cur.Load()
		used := cur.issued()
		need := t.a.policy.cover(used, now-t.switchedAt, t.loadNanos, t.a.opts.PrefetchAt)
		if t.markSeg == cur {
			// Since the probe: a burst after an idle time is measured
			// at its own rate. One four times the rate since the switch
			// or more is such a burst, perhaps still growing.
			probed, elapsed := used-t.markUsed, now-t.markAt
			if float64(probed)*float64(now-t.switchedAt) >= 4*float64(used)*float64(elapsed) {
				probed *= burstHeadroom
			}
			need = max(need, t.a.policy.cover(probed, elapsed, t.loadNanos, t.a.opts.PrefetchAt))
		}
		step = t.a.policy.climb(step, need)
	}
	return step
}

// climb is step doubled until it reaches need, in one jump: the sizes stay
// those doubling alone would reach (the table's step times a power of two,
// so that later doublings end at max_step as before), but the last may be
// max_step itself when need is beyond the last doubling below it.
func (p stepPolicy) climb(step, need int64) int64 {
	for step < need {
		if step > p.maxStep/2 {
			return max(step, p.maxStep)
		}
		step *= 2
	}
	return step
}
