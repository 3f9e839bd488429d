package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// Many tags at once: the first INCRs of tags the server holds no IDs for,
// in one pipeline, are looked up and loaded together (the server starts
// the loads of the whole pipeline before it waits for the first), and the
// loaders take them in few store round trips.

// pipelineIncr sends one INCR of each name in one pipeline and returns the
// replies.
func pipelineIncr(tb testing.TB, c *redis.Client, names []string) []int64 {
	tb.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.Incr(ctx, name)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		tb.Fatalf("pipeline of %d INCRs: %v", len(names), err)
	}
	ids := make([]int64, len(cmds))
	for i, cmd := range cmds {
		ids[i] = cmd.Val()
	}
	return ids
}

// patientClient is a client whose reads wait as long as a busy machine needs
// for a pipeline of first touches.
func patientClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, ReadTimeout: 2 * time.Minute, WriteTimeout: time.Minute})
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// TestPipelineOfNewTags: a pipeline of 1,000 INCRs of new tags creates
// each and answers 1 for each, in order, in far fewer store round trips
// than tags; the next pipeline answers 2 for each.
func TestPipelineOfNewTags(t *testing.T) {
	so := segment.DefaultOptions()
	so.LoadTimeout = time.Minute // a busy machine's SQLite
	in := servertest.Start(t, servertest.Options{Segment: &so})
	c := patientClient(in.Addr)
	defer c.Close()
	tags := names("tenant", 1000)
	for round, want := range []int64{1, 2} {
		for i, id := range pipelineIncr(t, c, tags) {
			if id != want {
				t.Fatalf("round %d: INCR %s = %d, want %d", round, tags[i], id, want)
			}
		}
	}
	st := in.Alloc.Stats()
	if st.Tags != len(tags) || st.LoadRounds >= int64(len(tags))/2 {
		t.Fatalf("stats = %+v: want %d tags, loaded in fewer than %d store round trips", st, len(tags), len(tags)/2)
	}
	row, err := in.Store.Tag(context.Background(), tags[len(tags)-1])
	if err != nil || row.Step != so.DefaultStep {
		t.Fatalf("row of %s = %+v, %v; want created with step %d", tags[len(tags)-1], row, err, so.DefaultStep)
	}
}

// noGiveBack keeps every range at shutdown (a gap), so that a benchmark's
// server with 100,000 tags stops without 100,000 give-backs.
type noGiveBack struct{ persist.Store }

func (noGiveBack) GiveBack(context.Context, string, int64, int64) (bool, error) { return false, nil }

// BenchmarkNewTagsPipeline: one pipeline of 1,000 INCRs of new tags per
// op, on SQLite: grouped (the loaders' default) against one transaction
// per tag (MaxLoadBatch 1). ns/tag compares them in one run.
func BenchmarkNewTagsPipeline(b *testing.B) {
	for _, tc := range []struct {
		name  string
		batch int
	}{{"one-per-transaction", 1}, {"grouped", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			so := segment.DefaultOptions()
			so.LoadTimeout = time.Minute
			so.MaxLoadBatch = tc.batch
			in := servertest.Start(b, servertest.Options{Segment: &so, Wrap: func(s persist.Store) persist.Store { return noGiveBack{s} }})
			c := patientClient(in.Addr)
			defer c.Close()
			b.ReportAllocs()
			for i := range b.N {
				pipelineIncr(b, c, names(fmt.Sprintf("r%d", i), 1000))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/tag")
			b.ReportMetric(float64(in.Alloc.Stats().LoadRounds)/float64(b.N), "rounds/op")
		})
	}
}

// BenchmarkRestart100kTags: a server restarted on a SQLite file holding
// 100,000 tags serves the first INCR of each, through pipelines of 1,000;
// one op is all 100,000 (run it with -benchtime 1x).
func BenchmarkRestart100kTags(b *testing.B) {
	const tags, depth = 100_000, 1000
	path := filepath.Join(b.TempDir(), "leaf.db")
	s, err := sqlite.Open(context.Background(), path, persist.Options{CreateSchema: true, BusyTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	all := names("t", tags)
	for i := 0; i < len(all); i += persist.MaxTakeBatch {
		var reqs []persist.TakeRequest
		for _, name := range all[i:min(i+persist.MaxTakeBatch, len(all))] {
			reqs = append(reqs, persist.TakeRequest{Tag: name, Create: 1000})
		}
		for _, r := range s.TakeBatch(context.Background(), reqs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		so := segment.DefaultOptions()
		so.LoadTimeout = time.Minute
		in := servertest.Start(b, servertest.Options{Path: path, Segment: &so, Wrap: func(s persist.Store) persist.Store { return noGiveBack{s} }})
		c := patientClient(in.Addr)
		b.StartTimer()
		for i := 0; i < tags; i += depth {
			pipelineIncr(b, c, all[i:i+depth])
		}
		b.StopTimer()
		b.ReportMetric(float64(in.Alloc.Stats().LoadRounds), "rounds/op")
		c.Close()
		if err := in.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
