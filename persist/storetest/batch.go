package storetest

// TakeBatch: many tags' ranges in one transaction, each exactly what Take
// would have answered, one request's failure its own, and, across batches
// of several handles racing deletions and repairs, never an overlap.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/persist"
)

// batchTests are the suite's TakeBatch tests on a fresh store.
var batchTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"BatchMixed", testBatchMixed},
	{"BatchOddNames", testBatchOddNames},
	{"BatchOverflow", testBatchOverflow},
	{"BatchLarge", testBatchLarge},
	{"BatchCancelledContext", testBatchCancelledContext},
	{"BatchMatchesModel", testBatchMatchesModel},
	{"BatchConcurrentTwoHandles", testBatchConcurrent},
}

// batchGuardTests change the database behind leaf's back.
var batchGuardTests = []struct {
	name string
	fn   func(t *testing.T, db *DB)
}{
	{"BatchGuardRepairs", testBatchGuardRepairs},
	{"BatchDeletedRow", testBatchDeletedRow},
	{"BatchRacingDeletes", testBatchRacingDeletes},
	{"BatchGuardTableMissing", testBatchGuardTableMissing},
}

// want is what one request of a batch must get: a range and whether it
// created the row, or an error.
type want struct {
	r       persist.Range
	created bool
	err     error
}

func mustBatch(t *testing.T, s persist.Store, reqs []persist.TakeRequest) []persist.TakeResult {
	t.Helper()
	res := s.TakeBatch(t.Context(), reqs)
	if len(res) != len(reqs) {
		t.Fatalf("TakeBatch of %d requests gave %d results", len(reqs), len(res))
	}
	return res
}

// wantBatch runs one batch and checks every result.
func wantBatch(t *testing.T, s persist.Store, reqs []persist.TakeRequest, wants []want) {
	t.Helper()
	res := mustBatch(t, s, reqs)
	for i, w := range wants {
		g := res[i]
		switch {
		case w.err != nil:
			if !errors.Is(g.Err, w.err) || g.Range != (persist.Range{}) {
				t.Errorf("request %d %+v: got %+v, want error %v", i, reqs[i], g, w.err)
			}
		case g.Err != nil || g.Range != w.r || g.Created != w.created:
			t.Errorf("request %d %+v: got %+v, want range %+v created=%v", i, reqs[i], g, w.r, w.created)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// testBatchMixed: existing tags, tags created by the batch, a tag asked
// twice, missing rows and invalid requests in one batch; each gets what
// Take (after Create) would have given, and nothing else changes.
func testBatchMixed(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "old", 10, "kept")
	mustTake(t, s, "old", 0) // max_id 11
	mustCreate(t, s, "fresh", 5, "")
	long := strings.Repeat("x", persist.MaxTagLen+1)
	reqs := []persist.TakeRequest{
		{Tag: "old", Size: 0},
		{Tag: "new", Size: 0, Create: 7},
		{Tag: "missing", Size: 3},
		{Tag: "old", Size: 4, Create: 99}, // exists: Create changes nothing
		{Tag: "", Size: 1},
		{Tag: "fresh", Size: 2},
		{Tag: "bad\xff", Size: 1, Create: 5},
		{Tag: long, Size: 1},
		{Tag: "badstep", Size: 1, Create: persist.MaxStep + 1},
		{Tag: "negstep", Size: 1, Create: -1},
		{Tag: "new", Size: 0, Create: 7}, // the second request of the tag it created
		{Tag: "sized", Size: 100, Create: 3},
		{Tag: "fresh", Size: -1},
	}
	wants := []want{
		{r: persist.Range{Start: 11, End: 21, Step: 10}},
		{r: persist.Range{Start: 1, End: 8, Step: 7}, created: true},
		{err: persist.ErrNotFound},
		{r: persist.Range{Start: 21, End: 25, Step: 10}},
		{err: persist.ErrInvalid},
		{r: persist.Range{Start: 1, End: 3, Step: 5}},
		{err: persist.ErrInvalid},
		{err: persist.ErrInvalid},
		{err: persist.ErrInvalid},
		{err: persist.ErrInvalid},
		{r: persist.Range{Start: 8, End: 15, Step: 7}},
		{r: persist.Range{Start: 1, End: 101, Step: 3}, created: true},
		{r: persist.Range{Start: 3, End: 8, Step: 5}},
	}
	wantBatch(t, s, reqs, wants)
	wantRow(t, s, "old", 25, 10)
	wantRow(t, s, "new", 15, 7)
	wantRow(t, s, "fresh", 8, 5)
	wantRow(t, s, "sized", 101, 3)
	if d := mustTag(t, s, "old").Description; d != "kept" {
		t.Fatalf("description of old = %q, want kept", d)
	}
	tags, err := s.Tags(t.Context())
	if err != nil || len(tags) != 4 {
		t.Fatalf("Tags() = %+v, %v; want old, new, fresh and sized only", tags, err)
	}
	// A batch of one, and an empty batch.
	wantBatch(t, s, []persist.TakeRequest{{Tag: "old"}}, []want{{r: persist.Range{Start: 25, End: 35, Step: 10}}})
	if res := s.TakeBatch(t.Context(), nil); len(res) != 0 {
		t.Fatalf("TakeBatch(nil) = %+v, want no result", res)
	}
}

// testBatchOddNames: names that quoting, wildcards or folding would
// confuse, all in one batch with a size of their own: every row moves by
// its own size, and names that would match another are missing.
func testBatchOddNames(t *testing.T, open Opener) {
	s := open(t)
	names := oddNames()
	var reqs []persist.TakeRequest
	var wants []want
	for i, name := range names {
		mustCreate(t, s, name, int64(i+1), "")
		reqs = append(reqs, persist.TakeRequest{Tag: name, Size: int64(i + 1)})
		wants = append(wants, want{r: persist.Range{Start: 1, End: int64(i + 2), Step: int64(i + 1)}})
	}
	for _, missing := range []string{"a%c", "aXc", "Abc", "%%", "cafe", "CAFÉ", "x"} {
		reqs = append(reqs, persist.TakeRequest{Tag: missing, Size: 1})
		wants = append(wants, want{err: persist.ErrNotFound})
	}
	wantBatch(t, s, reqs, wants)
	for i, name := range names {
		wantRow(t, s, name, int64(i+2), int64(i+1))
	}
}

// testBatchOverflow: a request that would pass math.MaxInt64 fails alone;
// the requests after it, of the same tag and of others, are served.
func testBatchOverflow(t *testing.T, open Opener) {
	s := open(t)
	const maxInt = math.MaxInt64
	mustCreate(t, s, "edge", 10, "")
	mustCreate(t, s, "other", 10, "")
	mustCreate(t, s, "zero", 10, "")
	if _, _, err := admin(t, s).RaiseFloor(t.Context(), "edge", maxInt-21); err != nil {
		t.Fatal(err)
	}
	reqs := []persist.TakeRequest{
		{Tag: "edge", Size: 10},
		{Tag: "other", Size: 0},
		{Tag: "edge", Size: 15},      // max_id maxInt-10: does not fit
		{Tag: "edge", Size: 0},       // fits exactly
		{Tag: "edge", Size: 1},       // max_id maxInt
		{Tag: "other", Size: maxInt}, // does not fit
		{Tag: "zero", Size: maxInt - 1},
	}
	wants := []want{
		{r: persist.Range{Start: maxInt - 20, End: maxInt - 10, Step: 10}},
		{r: persist.Range{Start: 1, End: 11, Step: 10}},
		{err: persist.ErrOverflow},
		{r: persist.Range{Start: maxInt - 10, End: maxInt, Step: 10}},
		{err: persist.ErrOverflow},
		{err: persist.ErrOverflow},
		{r: persist.Range{Start: 1, End: maxInt, Step: 10}},
	}
	wantBatch(t, s, reqs, wants)
	wantRow(t, s, "edge", maxInt, 10)
	wantRow(t, s, "other", 11, 10)
	wantRow(t, s, "zero", maxInt, 10)
}

// testBatchLarge: a batch of more than MaxTakeBatch requests, every one a
// new tag, all created and served.
func testBatchLarge(t *testing.T, open Opener) {
	s := open(t)
	n := 2*persist.MaxTakeBatch + 7
	reqs := make([]persist.TakeRequest, n)
	wants := make([]want, n)
	for i := range reqs {
		reqs[i] = persist.TakeRequest{Tag: fmt.Sprintf("tenant-%04d", i), Create: int64(i%5 + 1)}
		wants[i] = want{r: persist.Range{Start: 1, End: int64(i%5 + 2), Step: int64(i%5 + 1)}, created: true}
	}
	wantBatch(t, s, reqs, wants)
	// Again: the rows exist now, and continue.
	for i := range wants {
		step := int64(i%5 + 1)
		wants[i] = want{r: persist.Range{Start: step + 1, End: 2*step + 1, Step: step}}
	}
	wantBatch(t, s, reqs, wants)
	tags, err := s.Tags(t.Context())
	if err != nil || len(tags) != n {
		t.Fatalf("Tags() = %d rows, %v; want %d", len(tags), err, n)
	}
}

// testBatchCancelledContext: every request fails with the context's error
// as ErrUnavailable, and nothing is created or taken.
func testBatchCancelledContext(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "t", 10, "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := s.TakeBatch(ctx, []persist.TakeRequest{{Tag: "t"}, {Tag: "new", Create: 5}, {Tag: "t", Size: 3}})
	for i, r := range res {
		if !errors.Is(r.Err, persist.ErrUnavailable) || !errors.Is(r.Err, context.Canceled) {
			t.Errorf("request %d: %+v, want ErrUnavailable and context.Canceled", i, r)
		}
	}
	wantRow(t, s, "t", 1, 10)
	if _, err := s.Tag(t.Context(), "new"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("a cancelled batch created a row: %v", err)
	}
}

// testBatchMatchesModel: random batches (repeated tags, creates, missing
// rows, explicit and step sizes) against a model of the table: every
// result is exactly the model's, which is Take's semantics one request
// after the other, and the rows end as the model's.
func testBatchMatchesModel(t *testing.T, open Opener) {
	s := open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	type row struct{ maxID, step int64 }
	model := map[string]*row{}
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("m%02d", i)
		if i%3 != 0 { // a third start missing
			mustCreate(t, s, names[i], int64(i+1), "")
			model[names[i]] = &row{1, int64(i + 1)}
		}
	}
	for round := range 30 {
		n := 1 + rng.IntN(20)
		reqs := make([]persist.TakeRequest, n)
		wants := make([]want, n)
		for i := range reqs {
			q := persist.TakeRequest{Tag: names[rng.IntN(len(names))]}
			switch rng.IntN(4) {
			case 0:
				q.Size = 0
			case 1:
				q.Size = -1
			default:
				q.Size = 1 + rng.Int64N(50)
			}
			if rng.IntN(3) == 0 {
				q.Create = 1 + rng.Int64N(9)
			}
			reqs[i] = q
			// The rows asked for are created first, by the first request
			// that asks.
			if model[q.Tag] == nil && q.Create > 0 {
				model[q.Tag] = &row{1, q.Create}
				wants[i].created = true
			}
		}
		for i, q := range reqs {
			r := model[q.Tag]
			if r == nil {
				wants[i] = want{err: persist.ErrNotFound}
				continue
			}
			size := q.Size
			if size <= 0 {
				size = r.step
			}
			wants[i] = want{r: persist.Range{Start: r.maxID, End: r.maxID + size, Step: r.step}, created: wants[i].created}
			r.maxID += size
		}
		t.Run(fmt.Sprint("round", round), func(t *testing.T) { wantBatch(t, s, reqs, wants) })
	}
	for name, r := range model {
		wantRow(t, s, name, r.maxID, r.step)
	}
}

// testBatchConcurrent: workers on two handles send batches of random tags
// (some twice in one batch) and single Takes at once; per tag, the ranges
// handed out tile [1, max_id) exactly: disjoint and contiguous.
func testBatchConcurrent(t *testing.T, open Opener) {
	stores := []persist.Store{open(t), open(t)}
	const (
		tags    = 16
		workers = 12
		batches = 40
	)
	names := make([]string, tags)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i)
		if i%2 == 0 { // the others are created by the batches
			mustCreate(t, stores[0], names[i], step, "")
		}
	}
	var mu sync.Mutex
	got := map[string][]taken{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for b := range batches {
				if b%5 == 4 { // now and then a single Take
					name := names[rng.IntN(tags)]
					size := sizeFor(w, b)
					r, err := s.Take(t.Context(), name, size)
					if errors.Is(err, persist.ErrNotFound) {
						continue // not created yet
					}
					if err != nil {
						t.Errorf("worker %d: Take(%q): %v", w, name, err)
						return
					}
					mu.Lock()
					got[name] = append(got[name], taken{size, r})
					mu.Unlock()
					continue
				}
				reqs := make([]persist.TakeRequest, 1+rng.IntN(2*tags))
				for i := range reqs {
					reqs[i] = persist.TakeRequest{Tag: names[rng.IntN(tags)], Size: sizeFor(w, b+i), Create: step}
				}
				res := s.TakeBatch(t.Context(), reqs)
				mu.Lock()
				for i, r := range res {
					if r.Err != nil {
						t.Errorf("worker %d: batch request %+v: %v", w, reqs[i], r.Err)
						continue
					}
					got[reqs[i].Tag] = append(got[reqs[i].Tag], taken{reqs[i].Size, r.Range})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, name := range names {
		checkTiling(t, got[name], step, mustTag(t, stores[1], name).MaxID)
	}
}

// testBatchGuardRepairs: tags lowered in different ways, new tags and
// untouched ones in one batch: each lowered tag is repaired above the
// ranges handed out before, its second request follows the repaired one,
// and max_id and the guard end at the last range.
func testBatchGuardRepairs(t *testing.T, db *DB) {
	s := db.Open(t)
	lower := map[string]func(t *testing.T, tag string){
		"untouched": func(*testing.T, string) {},
		"recreated": func(t *testing.T, tag string) { recreate(t, db, tag, 10) },
		"lowered":   func(t *testing.T, tag string) { db.raw.SetMaxID(t, tag, 15) },
		"raised":    func(t *testing.T, tag string) { db.raw.SetMaxID(t, tag, 100) },
		"deleted":   func(t *testing.T, tag string) { db.raw.Delete(t, tag) },
	}
	for tag, fn := range lower {
		mustCreate(t, s, tag, 10, "")
		for range 3 {
			mustTake(t, s, tag, 0) // [1,11) [11,21) [21,31)
		}
		fn(t, tag)
	}
	reqs := []persist.TakeRequest{
		{Tag: "recreated"},
		{Tag: "lowered", Size: 5},
		{Tag: "untouched"},
		{Tag: "raised"},
		{Tag: "deleted", Create: 10}, // re-created by the batch itself
		{Tag: "new", Create: 10},
		{Tag: "recreated", Size: 2},
		{Tag: "lowered"},
	}
	wants := []want{
		{r: persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 1}},
		{r: persist.Range{Start: 31, End: 36, Step: 10, Repaired: true, Answered: 15}},
		{r: persist.Range{Start: 31, End: 41, Step: 10}},
		{r: persist.Range{Start: 100, End: 110, Step: 10}},
		{r: persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 1}, created: true},
		{r: persist.Range{Start: 1, End: 11, Step: 10}, created: true},
		{r: persist.Range{Start: 41, End: 43, Step: 10}},
		{r: persist.Range{Start: 36, End: 46, Step: 10}},
	}
	wantBatch(t, s, reqs, wants)
	for tag, end := range map[string]int64{"recreated": 43, "lowered": 46, "untouched": 41, "raised": 110, "deleted": 41, "new": 11} {
		wantRow(t, s, tag, end, 10)
		wantGuard(t, db, tag, end)
	}
	// A repair that would pass math.MaxInt64 fails alone, changing nothing.
	mustCreate(t, s, "edge", 10, "")
	if _, _, err := admin(t, s).RaiseFloor(t.Context(), "edge", math.MaxInt64-11); err != nil {
		t.Fatal(err)
	}
	mustTake(t, s, "edge", 10) // guard at MaxInt64
	recreate(t, db, "edge", 10)
	wantBatch(t, s, []persist.TakeRequest{{Tag: "edge"}, {Tag: "new"}},
		[]want{{err: persist.ErrOverflow}, {r: persist.Range{Start: 11, End: 21, Step: 10}}})
	wantRow(t, s, "edge", 1, 10)
	wantGuard(t, db, "edge", math.MaxInt64)
}

// testBatchDeletedRow: a row deleted between two batches is missing for
// its requests alone; asked to be created, it is re-created and repaired
// above the IDs handed out before.
func testBatchDeletedRow(t *testing.T, db *DB) {
	s := db.Open(t)
	mustCreate(t, s, "a", 10, "")
	mustCreate(t, s, "b", 10, "")
	wantBatch(t, s, []persist.TakeRequest{{Tag: "a"}, {Tag: "b"}},
		[]want{{r: persist.Range{Start: 1, End: 11, Step: 10}}, {r: persist.Range{Start: 1, End: 11, Step: 10}}})
	db.raw.Delete(t, "a")
	wantBatch(t, s, []persist.TakeRequest{{Tag: "a"}, {Tag: "b"}},
		[]want{{err: persist.ErrNotFound}, {r: persist.Range{Start: 11, End: 21, Step: 10}}})
	wantBatch(t, s, []persist.TakeRequest{{Tag: "b"}, {Tag: "a", Create: 4}},
		[]want{{r: persist.Range{Start: 21, End: 31, Step: 10}}, {r: persist.Range{Start: 11, End: 15, Step: 4, Repaired: true, Answered: 1}, created: true}})
	wantGuard(t, db, "a", 15)
}

// testBatchRacingDeletes: batches on two handles while one row is deleted
// and created again at max_id 1, again and again: the ranges of that tag never
// overlap (the guard repairs them), the other tags' still tile.
func testBatchRacingDeletes(t *testing.T, db *DB) {
	stores := []persist.Store{db.Open(t), db.Open(t)}
	names := []string{"hot", "x", "y", "z"}
	for _, name := range names {
		mustCreate(t, stores[0], name, step, "")
	}
	const (
		workers = 6
		batches = 20
		deletes = 25
	)
	// One range of hot before the race: its guard exists whatever the
	// race leaves (on a busy machine every batch may meet hot deleted),
	// so the last Take below is always a repair.
	got := map[string][]taken{"hot": {{0, mustTake(t, stores[0], "hot", 0)}}}
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for b := range batches {
				var reqs []persist.TakeRequest
				for i, name := range names {
					reqs = append(reqs, persist.TakeRequest{Tag: name, Size: sizeFor(w, b+i)})
				}
				reqs = append(reqs, persist.TakeRequest{Tag: "hot", Size: sizeFor(w+1, b)})
				res := s.TakeBatch(t.Context(), reqs)
				mu.Lock()
				for i, r := range res {
					switch {
					case r.Err == nil:
						got[reqs[i].Tag] = append(got[reqs[i].Tag], taken{reqs[i].Size, r.Range})
					case reqs[i].Tag == "hot" && errors.Is(r.Err, persist.ErrNotFound):
						// between a DELETE and its INSERT
					default:
						t.Errorf("worker %d: %+v: %v", w, reqs[i], r.Err)
					}
				}
				mu.Unlock()
			}
		})
	}
	go func() {
		defer close(done)
		for range deletes {
			if t.Failed() {
				return
			}
			// Re-created through the store, whose statements are retried
			// when the database picks them to break a deadlock; a plain
			// INSERT racing the batches' locks might be picked.
			db.raw.Delete(t, "hot")
			if _, err := stores[0].Create(t.Context(), "hot", step, ""); err != nil {
				t.Errorf("re-create: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if t.Failed() {
		return
	}
	checkDisjoint(t, got["hot"], step)
	for _, name := range names[1:] {
		checkTiling(t, got[name], step, mustTag(t, stores[0], name).MaxID)
	}
	high, _ := db.raw.Guard(t, "hot")
	recreate(t, db, "hot", step)
	wantBatch(t, stores[1], []persist.TakeRequest{{Tag: "hot"}},
		[]want{{r: persist.Range{Start: high, End: high + step, Step: step, Repaired: true, Answered: 1}}})
}

// testBatchGuardTableMissing: without leaf_guard, batches are taken as
// without the guard. A backend whose guard cannot be missing (no
// GuardDropper) has nothing to test here.
func testBatchGuardTableMissing(t *testing.T, db *DB) {
	dropper, ok := db.raw.(GuardDropper)
	if !ok {
		return
	}
	first := db.Open(t)
	mustCreate(t, first, "t", 10, "")
	mustTake(t, first, "t", 0)
	dropper.DropGuard(t)
	s := db.OpenWith(t, func(o *persist.Options) { o.CreateSchema = false })
	if guardOf(t, s) {
		t.Fatal("GuardEnabled() = true without the leaf_guard table")
	}
	wantBatch(t, s, []persist.TakeRequest{{Tag: "t"}, {Tag: "n", Create: 3}, {Tag: "t", Size: 2}}, []want{
		{r: persist.Range{Start: 11, End: 21, Step: 10}},
		{r: persist.Range{Start: 1, End: 4, Step: 3}, created: true},
		{r: persist.Range{Start: 21, End: 23, Step: 10}},
	})
	recreate(t, db, "t", 10)
	wantBatch(t, s, []persist.TakeRequest{{Tag: "t"}}, []want{{r: persist.Range{Start: 1, End: 11, Step: 10}}})
}

// BenchmarkTakeBatch takes the ranges of n tags per op, as the loads
// after a restart (existing tags) or the first touches of new tags are,
// with one Take per tag (one transaction each; a new tag's Create is one
// more) and with one TakeBatch; the ns/tag metrics compare them in one
// run. Each backend's benchmark calls it with a fresh store, which it
// closes.
func BenchmarkTakeBatch(b *testing.B, s persist.Store, n int) {
	defer s.Close()
	ctx := context.Background()
	round := 0
	names := func() []string {
		round++
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("r%d-t%05d", round, i)
		}
		return out
	}
	perTag := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/tag")
	}
	b.Run("new/Take", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, name := range names() {
				if _, err := s.Create(ctx, name, 1000, ""); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Take(ctx, name, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		perTag(b)
	})
	b.Run("new/TakeBatch", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			reqs := make([]persist.TakeRequest, n)
			for i, name := range names() {
				reqs[i] = persist.TakeRequest{Tag: name, Create: 1000}
			}
			for i, r := range s.TakeBatch(ctx, reqs) {
				if r.Err != nil || !r.Created {
					b.Fatalf("request %d: %+v", i, r)
				}
			}
		}
		perTag(b)
	})
	existing := names()
	reqs := make([]persist.TakeRequest, n)
	for i, name := range existing {
		if _, err := s.Create(ctx, name, 1000, ""); err != nil {
			b.Fatal(err)
		}
		reqs[i] = persist.TakeRequest{Tag: name}
	}
	b.Run("existing/Take", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, name := range existing {
				if _, err := s.Take(ctx, name, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		perTag(b)
	})
	b.Run("existing/TakeBatch", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for i, r := range s.TakeBatch(ctx, reqs) {
				if r.Err != nil {
					b.Fatalf("request %d: %+v", i, r)
				}
			}
		}
		perTag(b)
	})
}
