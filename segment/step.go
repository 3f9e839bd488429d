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
