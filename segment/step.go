package segment

import "time"

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

// nextStepLocked is the size the next load would take.
func (t *Tag) nextStepLocked(now int64) int64 {
	return t.a.policy.next(t.step, t.minStep, time.Duration(now-t.lastLoad))
}
