package server_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// BenchmarkServerIncr measures INCR through go-redis over loopback, one op
// per INCR, in pipelines of 1, 16 and 100, from one connection and from
// parallel ones. Allocations count both sides (client and server run in
// this process); BenchmarkDispatchIncr measures the server path alone.
// The allocator serves under a lease, as with the cluster registry on, so
// every event loop round checks it (segment.Allocator.Admit).
func BenchmarkServerIncr(b *testing.B) {
	so := segment.DefaultOptions()
	so.DefaultStep = 100_000
	in := servertest.Start(b, servertest.Options{Segment: &so})
	in.Alloc.Serve(time.Now().Add(24*time.Hour), errors.New("lease over"))
	for _, depth := range []int{1, 16, 100} {
		b.Run("pipeline="+strconv.Itoa(depth), func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: in.Addr, PoolSize: 1})
			defer c.Close()
			b.ReportAllocs()
			runIncr(b, c, depth, b.N)
		})
		b.Run("parallel/pipeline="+strconv.Itoa(depth), func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: in.Addr})
			defer c.Close()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				pipe := c.Pipeline()
				n := 0
				for pb.Next() {
					pipe.Incr(ctx, "bench")
					if n++; n == depth {
						if _, err := pipe.Exec(ctx); err != nil {
							b.Error(err)
							return
						}
						n = 0
					}
				}
				if n > 0 {
					if _, err := pipe.Exec(ctx); err != nil {
						b.Error(err)
					}
				}
			})
		})
	}
}

// runIncr sends total INCRs in pipelines of depth.
func runIncr(b *testing.B, c *redis.Client, depth, total int) {
	ctx := context.Background()
	if depth == 1 {
		for range total {
			if err := c.Incr(ctx, "bench").Err(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	pipe := c.Pipeline()
	for sent := 0; sent < total; {
		n := min(depth, total-sent)
		for range n {
			pipe.Incr(ctx, "bench")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		sent += n
	}
}
