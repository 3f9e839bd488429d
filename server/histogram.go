package server

import (
	"math/bits"
	"sync/atomic"
)

// Latency histograms of commands: INFO latencystats and LATENCY
// HISTOGRAM. Buckets are log-linear over nanoseconds, as HdrHistogram's
// (which Redis uses): every power of two is cut in histSub equal parts,
// so a bucket is at most 1/16 of its values wide and a percentile read
// as a bucket's upper edge is at most 6.25% above the true one. Durations
// up to 1.024 us share the first bucket (Redis's floor is 1 us), and
// those beyond 2^35 ns (34 s) the last.
const (
	histMinShift = 10 // the first bucket: up to 2^10 ns
	histMaxShift = 35
	histSubShift = 4
	histSub      = 1 << histSubShift
	histBuckets  = 1 + (histMaxShift-histMinShift)*histSub
)

// bucketOf is the bucket of a duration of d nanoseconds.
func bucketOf(d int64) int {
	if d <= 1<<histMinShift {
		return 0
	}
	d = min(d, 1<<histMaxShift)
	v := uint64(d - 1)
	o := bits.Len64(v) // d is in (2^(o-1), 2^o]
	sub := int(v>>(o-1-histSubShift)) & (histSub - 1)
	return 1 + (o-histMinShift-1)*histSub + sub
}

// bucketTop is the largest duration, in nanoseconds, of bucket i.
func bucketTop(i int) int64 {
	if i == 0 {
		return 1 << histMinShift
	}
	o := (i-1)/histSub + histMinShift + 1
	sub := (i - 1) % histSub
	return 1<<(o-1) + int64(sub+1)<<(o-1-histSubShift)
}

// histogram counts one command's durations.
type histogram struct {
	b [histBuckets]atomic.Int64
}

// histCounts are one command's bucket counts, summed over the shards.
type histCounts [histBuckets]int64

// total is the number of durations counted.
func (h *histCounts) total() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// percentile is the upper edge, in nanoseconds, of the bucket holding the
// p-th percentile (0 < p <= 100) of the durations, 0 when there is none.
func (h *histCounts) percentile(p float64) int64 {
	total := h.total()
	if total == 0 {
		return 0
	}
	// The rank of the percentile, as HdrHistogram's: the smallest count
	// of which at least p% are at or below it.
	rank := int64(p/100*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i, c := range h {
		if seen += c; seen >= rank {
			return bucketTop(i)
		}
	}
	return bucketTop(histBuckets - 1)
}

// histograms sums each command's histograms over the shards, by
// command index; nil where no call of a command was timed.
func (st *serverStats) histograms() []*histCounts {
	out := make([]*histCounts, len(st.names))
	for i, t := range st.sums(true) {
		if t.hist != nil && t.hist.total() > 0 {
			out[i] = t.hist
		}
	}
	return out
}
