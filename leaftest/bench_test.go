package leaftest_test

import (
	"context"
	"testing"
	"time"

	"github.com/leaf-id/leaf/leaftest"
)

// BenchmarkStart: what leaftest.Start costs a test: Start itself
// (start-ms: the store, the registry joined, the port open), Start to the
// first INCR answered (first-id-ms: a tag created, a segment loaded, a
// client connected), and all of it with Close (ns/op).
func BenchmarkStart(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	var started, first time.Duration
	for b.Loop() {
		t0 := time.Now()
		srv := leaftest.Start(b)
		started += time.Since(t0)
		if err := srv.Client().Incr(ctx, "order").Err(); err != nil {
			b.Fatal(err)
		}
		first += time.Since(t0)
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(started.Microseconds())/1000/float64(b.N), "start-ms")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-id-ms")
}
