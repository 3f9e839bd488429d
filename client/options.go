package client

import (
	"fmt"
	"time"
)

// Defaults of Options.
const (
	// DefaultMinLease is the first lease's size and the smallest.
	DefaultMinLease = 100
	// DefaultMaxLease is leaf's default segment.max_batch: the largest
	// INCRBY a leaf server accepts unless configured otherwise.
	DefaultMaxLease = 100_000
	// DefaultLeaseDuration is how long a lease should last.
	DefaultLeaseDuration = time.Second
	// DefaultPrefetchAt is the fraction of a lease handed out when the next
	// one is requested.
	DefaultPrefetchAt = 0.5
)

// Options configure a Generator. The zero value means the defaults.
type Options struct {
	// MinLease is the size of the first lease and the smallest one
	// (DefaultMinLease).
	MinLease int64
	// MaxLease is the largest lease, and the largest n of NextN
	// (DefaultMaxLease). Keep it at or below the server's
	// segment.max_batch: a larger INCRBY is refused (ErrRefused).
	MaxLease int64
	// LeaseDuration is the time a lease should last at the current rate
	// (DefaultLeaseDuration). A lease that lasted less doubles the next one
	// (up to MaxLease); one that lasted more than twice as long halves it
	// (down to MinLease); in between the size stays.
	LeaseDuration time.Duration
	// PrefetchAt is the fraction of a lease handed out when the next lease
	// is requested in the background, in (0, 1] (DefaultPrefetchAt). Lower
	// gives the request more time to arrive; the cost is that more IDs are
	// leased ahead, and lost if the process exits.
	PrefetchAt float64
	// Now is the clock the lease size is adapted with (time.Now); tests
	// inject their own.
	Now func() time.Time
}

// withDefaults fills the zero fields and checks the others.
func (o Options) withDefaults() (Options, error) {
	if o.MinLease == 0 {
		o.MinLease = DefaultMinLease
		if o.MaxLease > 0 {
			o.MinLease = min(o.MinLease, o.MaxLease)
		}
	}
	if o.MaxLease == 0 {
		o.MaxLease = max(DefaultMaxLease, o.MinLease)
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.PrefetchAt == 0 {
		o.PrefetchAt = DefaultPrefetchAt
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.MinLease < 1:
		return o, fmt.Errorf("client: MinLease must be >= 1, got %d", o.MinLease)
	case o.MaxLease < o.MinLease:
		return o, fmt.Errorf("client: MaxLease (%d) must be >= MinLease (%d)", o.MaxLease, o.MinLease)
	case o.LeaseDuration < 0:
		return o, fmt.Errorf("client: LeaseDuration must be positive, got %v", o.LeaseDuration)
	case !(o.PrefetchAt > 0 && o.PrefetchAt <= 1):
		return o, fmt.Errorf("client: PrefetchAt must be in (0, 1], got %v", o.PrefetchAt)
	}
	return o, nil
}

// nextLease is the size of the next lease, given the size of the last one
// and how long ago it was requested (Leaf's adaptive step).
func (o Options) nextLease(size int64, lasted time.Duration) int64 {
	switch {
	case lasted < o.LeaseDuration:
		size *= 2
	case lasted < 2*o.LeaseDuration:
	default:
		size /= 2
	}
	return min(max(size, o.MinLease), o.MaxLease)
}
