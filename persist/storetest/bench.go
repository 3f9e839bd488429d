package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// BenchmarkTake is one Take (one transaction) per op, on one tag of s,
// which it closes: the cost of a segment load, which the allocator pays
// once per segment (a cached ID costs no database call at all). Each
// backend's BenchmarkTake calls it, so their figures compare.
func BenchmarkTake(b *testing.B, s persist.Store) {
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Create(ctx, "t", 1000, ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Take(ctx, "t", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchOptions are the options of a store under benchmark: schema
// created, a generous query timeout.
func BenchOptions() persist.Options {
	return persist.Options{CreateSchema: true, QueryTimeout: 30 * time.Second}
}
