package server_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// BenchmarkSnowflakeIncr measures INCR over loopback through go-redis on a
// Snowflake tag and on a segment tag of one server, from one connection
// and from parallel ones in pipelines of 16. The two modes alternate, ten
// rounds each, each round starting with the other mode, so that drift on
// a shared machine hits both alike; make bench prints the median ratio of
// their rates.
func BenchmarkSnowflakeIncr(b *testing.B) {
	so := segment.DefaultOptions()
	so.DefaultStep = 100_000
	in := servertest.Start(b, servertest.Options{
		Path:    filepath.Join(b.TempDir(), "leaf.db"),
		Segment: &so,
		Cluster: nodeOptions("bench", time.Hour, time.Minute),
	})
	c := redis.NewClient(&redis.Options{Addr: in.Addr, PoolSize: 1})
	defer c.Close()
	pc := redis.NewClient(&redis.Options{Addr: in.Addr})
	defer pc.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "LEAF.CREATE", "sf", "MODE", "snowflake").Err(); err != nil {
		b.Fatal(err)
	}
	modes := []struct{ name, tag string }{{"segment", "seg"}, {"snowflake", "sf"}}
	for _, m := range modes {
		if err := c.Incr(ctx, m.tag).Err(); err != nil { // warm: the tag is known, a segment loaded
			b.Fatal(err)
		}
	}
	// Segment IDs of 19 digits, as Snowflake IDs are: the modes are
	// compared, not the length of their replies.
	if err := c.Do(ctx, "LEAF.FLOOR", "seg", int64(2e18)).Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.Incr(ctx, "seg").Err(); err != nil {
		b.Fatal(err)
	}
	for round := range 10 {
		// Each round swaps which mode runs first: a drift within a round
		// (a collection due, the machine's other work) favours neither.
		if round > 0 {
			modes[0], modes[1] = modes[1], modes[0]
		}
		for _, m := range modes {
			b.Run("round="+strconv.Itoa(round)+"/mode="+m.name+"/pipeline=1", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.Incr(ctx, m.tag).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		for _, m := range modes {
			b.Run("round="+strconv.Itoa(round)+"/mode="+m.name+"/parallel-pipeline=16", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) { incrPipelined(b, pb, pc, m.tag, 16) })
			})
		}
	}
}

// incrPipelined sends INCR tag in pipelines of depth while pb says so.
func incrPipelined(b *testing.B, pb *testing.PB, c *redis.Client, tag string, depth int) {
	ctx := context.Background()
	pipe := c.Pipeline()
	n := 0
	for pb.Next() {
		pipe.Incr(ctx, tag)
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
}
