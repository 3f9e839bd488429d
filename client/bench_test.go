package client_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/client"
)

// BenchmarkIDs: an ID from a Generator against an ID from INCR over the
// wire (go-redis, one round trip per ID), both from the same leaf server in
// this process, from one goroutine and from GOMAXPROCS at once; ns/op is
// wall time per ID. make bench prints the ratios. The generator's leases
// grow to MaxLease within the first milliseconds; "waits" counts the calls
// that still found no ID cached and waited for a lease.
func BenchmarkIDs(b *testing.B) {
	addr := startLeaf(b)
	ctx := context.Background()
	gen := func(b *testing.B) *client.Generator {
		g := newGen(b, newRedis(b, addr), "bench_gen", client.Options{})
		if _, err := g.Next(ctx); err != nil { // the first lease
			b.Fatal(err)
		}
		return g
	}
	waits := func(b *testing.B, g *client.Generator, before int64) {
		b.ReportMetric(float64(g.Stats().Waits-before), "waits")
	}
	b.Run("Next/serial", func(b *testing.B) {
		g := gen(b)
		w := g.Stats().Waits
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		waits(b, g, w)
	})
	b.Run("Next/parallel", func(b *testing.B) {
		g := gen(b)
		w := g.Stats().Waits
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		waits(b, g, w)
	})
	incr := func(rdb *redis.Client) error { return rdb.Incr(ctx, "bench_incr").Err() }
	b.Run("INCR/serial", func(b *testing.B) {
		rdb := newRedis(b, addr)
		b.ReportAllocs()
		for b.Loop() {
			if err := incr(rdb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("INCR/parallel", func(b *testing.B) {
		rdb := newRedis(b, addr)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := incr(rdb); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
