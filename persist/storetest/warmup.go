package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
)

// NoWaitsAfterWarmup checks a backend's latency against the allocator's
// prefetch: IDs of one tag taken at a steady 200,000 a second from an
// allocator on s; once the adaptive step has grown to the rate, the next
// segment is always loaded before the current one runs out, so no request
// waits on the store. The assertion is on the allocator's count of waits;
// the pace is at most the rate, and a slower machine only makes waits
// less likely. s is closed by t.Cleanup.
func NoWaitsAfterWarmup(t *testing.T, s persist.Store) {
	t.Helper()
	const (
		rate    = 200_000 // IDs per second
		maxStep = 64_000  // 0.32 s of IDs at the rate: six segments measured
		measure = 400_000 // IDs after the warm-up
		tag     = "steady"
	)
	ctx := context.Background()
	closeOnCleanup(t, s)
	if _, err := s.Create(ctx, tag, 1000, ""); err != nil {
		t.Fatal(err)
	}
	so := segment.DefaultOptions() // prefetch at 10%
	so.MaxStep = maxStep
	a := segment.New(s, so)
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	// paced takes n IDs at the rate at most and returns the rate it kept.
	// Each turn takes the IDs of the time since the last, up to 2 ms of
	// them: after a stall (the test descheduled on a busy machine) the
	// pace resumes rather than catching up in a burst far above the rate,
	// which no prefetch is sized for.
	paced := func(n int) float64 {
		t.Helper()
		begin := time.Now()
		last := begin
		for i := 0; i < n; {
			now := time.Now()
			k := min(n-i, max(1, int(now.Sub(last).Seconds()*rate)), rate/500)
			last = now
			for range k {
				if _, err := a.Next(ctx, tag); err != nil {
					t.Fatalf("Next: %v", err)
				}
			}
			i += k
			time.Sleep(200 * time.Microsecond)
		}
		return float64(n) / time.Since(begin).Seconds()
	}
	// Warm-up: from the table's step, doubling per segment up to maxStep.
	warm := 0
	for {
		in, err := a.Info(tag)
		if err == nil && in.Step >= maxStep && in.NextReady {
			break
		}
		if warm >= 10*maxStep {
			t.Fatalf("the step did not grow to %d after %d IDs: %+v, %v", maxStep, warm, in, err)
		}
		paced(10_000)
		warm += 10_000
	}
	before := a.Stats().Waits
	got := paced(measure)
	after := a.Stats().Waits
	t.Logf("warm-up: %d IDs, %d waits; then %d IDs at %.0f IDs/s: %d waits", warm, before, measure, got, after-before)
	if after != before {
		t.Errorf("%d requests waited on the store after the warm-up, want 0", after-before)
	}
}
