package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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

// BenchmarkGiveBackBatch: one op is a batched give-back of batch tags
// among tags rows (persist.BatchGiver), as a server shutting down sends
// them; each op's tags took a range first, so that every give-back
// matches. tags/s = batch / (ns/op) * 1e9.
// With fenced, through GiveBackBatchAfter, as a server of a cluster.
func BenchmarkGiveBackBatch(b *testing.B, s persist.Store, tags, batch int, fenced bool) {
	defer s.Close()
	ctx := context.Background()
	g, ok := s.(persist.BatchGiver)
	if !ok {
		b.Skipf("%T gives back tag by tag only", s)
	}
	reqs := make([]persist.TakeRequest, tags)
	for i := range reqs {
		reqs[i] = persist.TakeRequest{Tag: fmt.Sprintf("gb:%07d", i), Create: 1000}
	}
	// Created in no particular order, as clients create them: the rows
	// of one batch (in the order of names) lie all over the table.
	created := slices.Clone(reqs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(created), func(i, j int) { created[i], created[j] = created[j], created[i] })
	for from := 0; from < tags; from += 1000 {
		for _, r := range s.TakeBatch(ctx, created[from:min(from+1000, tags)]) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	next := 0
	back := make([]persist.GiveBackRequest, batch)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for i, r := range s.TakeBatch(ctx, reqs[next:next+batch]) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			back[i] = persist.GiveBackRequest{Tag: reqs[next+i].Tag, From: r.Range.End, To: r.Range.Start}
		}
		b.StartTimer()
		give := g.GiveBackBatch
		if fenced {
			give = func(ctx context.Context, reqs []persist.GiveBackRequest) ([]bool, error) {
				return g.GiveBackBatchAfter(ctx, reqs, 0)
			}
		}
		matched, err := give(ctx, back)
		if err != nil {
			b.Fatal(err)
		}
		for i, m := range matched {
			if !m {
				b.Fatalf("%s not matched", back[i].Tag)
			}
		}
		if next += batch; next+batch > tags {
			next = 0
		}
	}
}
