package segment

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of the allocator's hot path next to the hardware's limit, a
// bare atomic add: Tag.Next is one atomic add on the current segment plus
// two compares, so it should cost about the same (make bench prints the
// ratio). The store is in memory and segments are 16M IDs, so a segment
// lasts long enough at these rates (up to a billion IDs a second) for its
// successor to load in the background; the waits metric shows whether a
// request waited anyway.

// paddedInt64 keeps the baseline's counter on a cache line of its own, as a
// segment's value effectively is.
type paddedInt64 struct {
	_ [64]byte
	v atomic.Int64
	_ [64]byte
}

const benchStep = 1 << 24

// benchAllocator is an allocator over an in-memory store whose tags take
// 16M IDs per segment.
func benchAllocator(b *testing.B, tags ...string) *Allocator {
	b.Helper()
	rows := map[string]int64{}
	for _, t := range tags {
		rows[t] = benchStep
	}
	o := DefaultOptions()
	o.DefaultStep = benchStep
	o.MaxStep = benchStep
	a := New(newFakeStore(rows), o)
	if err := a.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	return a
}

func benchTag(b *testing.B, a *Allocator, name string) *Tag {
	b.Helper()
	t, err := a.Lookup(context.Background(), []byte(name))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := t.Next(context.Background()); err != nil { // first load
		b.Fatal(err)
	}
	return t
}

// reportWaits reports the requests that waited on the store during the
// benchmark.
func reportWaits(b *testing.B, a *Allocator, before int64) {
	b.ReportMetric(float64(a.Stats().Waits-before), "waits")
}

// BenchmarkNext is one goroutine taking IDs one at a time.
func BenchmarkNext(b *testing.B) {
	ctx := context.Background()
	b.Run("atomic.Int64.Add", func(b *testing.B) {
		var c paddedInt64
		b.ReportAllocs()
		for b.Loop() {
			c.v.Add(1)
		}
	})
	b.Run("Tag.Next", func(b *testing.B) {
		a := benchAllocator(b, "bench")
		t := benchTag(b, a, "bench")
		w := a.Stats().Waits
		b.ReportAllocs()
		for b.Loop() {
			if _, err := t.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		reportWaits(b, a, w)
	})
	b.Run("Tag.NextN-10", func(b *testing.B) {
		a := benchAllocator(b, "bench")
		t := benchTag(b, a, "bench")
		w := a.Stats().Waits
		b.ReportAllocs()
		for b.Loop() {
			if _, err := t.NextN(ctx, 10); err != nil {
				b.Fatal(err)
			}
		}
		reportWaits(b, a, w)
	})
	b.Run("Allocator.Next", func(b *testing.B) {
		// By name: a map lookup, then Tag.Next.
		a := benchAllocator(b, "bench")
		benchTag(b, a, "bench")
		w := a.Stats().Waits
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Next(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		reportWaits(b, a, w)
	})
}

// BenchmarkNextParallel is GOMAXPROCS goroutines taking IDs at once, ns/op
// being wall time per ID. On one tag every ID is an add on one shared
// counter, so its cache line moves between cores: compare with the same
// adds on a bare shared atomic, the hardware's limit. With a tag per
// goroutine nothing is shared and the cost per ID divides by the cores.
func BenchmarkNextParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("atomic.Int64.Add", func(b *testing.B) {
		var c paddedInt64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.v.Add(1)
			}
		})
	})
	b.Run("Tag.Next-one-tag", func(b *testing.B) {
		a := benchAllocator(b, "bench")
		t := benchTag(b, a, "bench")
		w := a.Stats().Waits
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := t.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportWaits(b, a, w)
	})
	b.Run("Tag.Next-tag-per-goroutine", func(b *testing.B) {
		names := make([]string, 64)
		for i := range names {
			names[i] = "bench" + strconv.Itoa(i)
		}
		a := benchAllocator(b, names...)
		tags := make([]*Tag, len(names))
		for i, n := range names {
			tags[i] = benchTag(b, a, n)
		}
		var next atomic.Int64
		w := a.Stats().Waits
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			t := tags[int(next.Add(1)-1)%len(tags)]
			for pb.Next() {
				if _, err := t.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportWaits(b, a, w)
	})
}

// BenchmarkAdmit is what the request path's lease check adds to an event
// loop round: Admit on a current lease, and the clock reading it needs.
// The loop reads time.Now once a round where it read time.Since before
// (for its yield), so a round costs their difference plus Admit.
func BenchmarkAdmit(b *testing.B) {
	a := benchAllocator(b, "bench")
	a.Serve(time.Now().Add(time.Hour), errors.New("lease over"))
	start := time.Now()
	b.Run("Admit", func(b *testing.B) {
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			a.Admit(now)
		}
	})
	b.Run("time.Since", func(b *testing.B) { // the round's clock read before
		for b.Loop() {
			_ = time.Since(start)
		}
	})
	b.Run("time.Now+Admit", func(b *testing.B) { // the round's clock read and check now
		b.ReportAllocs()
		for b.Loop() {
			a.Admit(time.Now())
		}
	})
	if a.Held() != nil {
		b.Fatalf("held under a current lease: %v", a.Held())
	}
}
