package faultstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/storetest"
)

// TestConcurrentTakes: the conformance suite's concurrent Takes, on one
// Memory through one or two handles, plain and wrapped: the ranges tile
// [1, max_id) with no overlap and no hole.
func TestConcurrentTakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handles int
		wrap    bool
	}{
		{"memory", 1, false},
		{"memory, two handles", 2, false},
		{"wrapped", 1, true},
		{"wrapped, two handles", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := faultstore.NewMemory(nil)
			storetest.ConcurrentTakes(t, func(*testing.T) persist.Store {
				if tc.wrap {
					return faultstore.New(db)
				}
				return db
			}, tc.handles)
		})
	}
}

func mustTake(t *testing.T, s persist.Store, tag string, size int64) persist.Range {
	t.Helper()
	r, err := s.Take(context.Background(), tag, size)
	if err != nil {
		t.Fatalf("Take(%q, %d): %v", tag, size, err)
	}
	return r
}

// TestMemory: what Memory answers, step by step, as a backend would.
func TestMemory(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, db *faultstore.Memory)
	}{
		{"ranges follow each other", func(t *testing.T, db *faultstore.Memory) {
			for _, step := range []struct {
				size int64
				want persist.Range
			}{
				{0, persist.Range{Start: 1, End: 11, Step: 10}},
				{3, persist.Range{Start: 11, End: 14, Step: 10}},
				{-1, persist.Range{Start: 14, End: 24, Step: 10}},
			} {
				if got := mustTake(t, db, "a", step.size); got != step.want {
					t.Fatalf("Take(%d) = %+v, want %+v", step.size, got, step.want)
				}
			}
			if got := db.MaxID("a"); got != 24 {
				t.Fatalf("max_id %d, want 24", got)
			}
		}},
		{"refusals", func(t *testing.T, db *faultstore.Memory) {
			db.SetMaxID("a", math.MaxInt64-5)
			for _, c := range []struct {
				name string
				err  error
				want error
			}{
				{"no row", func() error { _, err := db.Take(ctx, "none", 1); return err }(), persist.ErrNotFound},
				{"no row to read", func() error { _, err := db.Tag(ctx, "none"); return err }(), persist.ErrNotFound},
				{"empty tag", func() error { _, err := db.Take(ctx, "", 1); return err }(), persist.ErrInvalid},
				{"overflow", func() error { _, err := db.Take(ctx, "a", 10); return err }(), persist.ErrOverflow},
				{"bad step", func() error { _, err := db.Create(ctx, "b", 0, ""); return err }(), persist.ErrInvalid},
				{"cancelled", func() error { _, err := db.Take(cancelled, "a", 1); return err }(), context.Canceled},
				{"cancelled is unavailable", func() error { _, err := db.Tags(cancelled); return err }(), persist.ErrUnavailable},
				{"give back upwards", func() error { _, err := db.GiveBack(ctx, "a", 5, 9); return err }(), persist.ErrInvalid},
			} {
				if !errors.Is(c.err, c.want) {
					t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
				}
			}
		}},
		{"create, tags", func(t *testing.T, db *faultstore.Memory) {
			for i, want := range []bool{true, false} {
				if created, err := db.Create(ctx, "new", 7, fmt.Sprint("try ", i)); err != nil || created != want {
					t.Fatalf("Create #%d = %v, %v; want %v", i, created, err, want)
				}
			}
			tags, err := db.Tags(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []persist.Tag{{Name: "a", MaxID: 1, Step: 10}, {Name: "new", MaxID: 1, Step: 7, Description: "try 0"}}
			if !slices.Equal(tags, want) {
				t.Fatalf("Tags = %+v, want %+v", tags, want)
			}
		}},
		{"give back is a compare-and-set", func(t *testing.T, db *faultstore.Memory) {
			mustTake(t, db, "a", 0)
			if ok, err := db.GiveBack(ctx, "a", 21, 1); ok || err != nil {
				t.Fatalf("GiveBack from a stale max_id = %v, %v; want false", ok, err)
			}
			if ok, err := db.GiveBack(ctx, "a", 11, 4); !ok || err != nil {
				t.Fatalf("GiveBack = %v, %v; want true", ok, err)
			}
			if r := mustTake(t, db, "a", 0); r.Start != 4 {
				t.Fatalf("Take after the give-back = %+v, want from 4", r)
			}
		}},
		{"floor and step", func(t *testing.T, db *faultstore.Memory) {
			if row, moved, err := db.RaiseFloor(ctx, "a", 100); err != nil || !moved || row.MaxID != 101 {
				t.Fatalf("RaiseFloor = %+v, %v, %v; want max_id 101, moved", row, moved, err)
			}
			if _, moved, _ := db.RaiseFloor(ctx, "a", 50); moved {
				t.Fatal("RaiseFloor below max_id moved it")
			}
			if err := db.SetStep(ctx, "a", 3); err != nil {
				t.Fatal(err)
			}
			if r := mustTake(t, db, "a", 0); r != (persist.Range{Start: 101, End: 104, Step: 3}) {
				t.Fatalf("Take = %+v, want [101, 104) of step 3", r)
			}
		}},
		{"without the guard a lowered max_id repeats", func(t *testing.T, db *faultstore.Memory) {
			mustTake(t, db, "a", 0)
			db.SetMaxID("a", 1)
			if r := mustTake(t, db, "a", 0); r.Start != 1 || r.Repaired {
				t.Fatalf("Take = %+v, want [1, 11) again: nothing guards it", r)
			}
		}},
		{"the guard repairs", func(t *testing.T, db *faultstore.Memory) {
			db.WithGuard()
			mustTake(t, db, "a", 0)
			db.SetMaxID("a", 1)
			if r := mustTake(t, db, "a", 0); r != (persist.Range{Start: 11, End: 21, Step: 10, Repaired: true, Answered: 1}) {
				t.Fatalf("Take after max_id lowered = %+v, want [11, 21) repaired from 1", r)
			}
			db.Delete("a")
			db.Put(persist.Tag{Name: "a", MaxID: 1, Step: 10})
			if r := mustTake(t, db, "a", 0); r.Start != 21 || !r.Repaired || db.MaxID("a") != 31 {
				t.Fatalf("Take of a re-created row = %+v, max_id %d; want [21, 31) repaired, max_id 31", r, db.MaxID("a"))
			}
			if ok, _ := db.GiveBack(ctx, "a", 31, 25); !ok {
				t.Fatal("give-back of the top range refused")
			}
			if r := mustTake(t, db, "a", 0); r.Start != 25 || r.Repaired {
				t.Fatalf("Take after the give-back = %+v, want from 25: the guard came down with it", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, faultstore.NewMemory(map[string]int64{"a": 10}))
		})
	}
}

// result is a Take's answer, from another goroutine.
type result struct {
	r   persist.Range
	err error
}

func goTake(ctx context.Context, s persist.Store, tag string) <-chan result {
	out := make(chan result, 1)
	go func() {
		r, err := s.Take(ctx, tag, 0)
		out <- result{r, err}
	}()
	return out
}

var errDown = fmt.Errorf("%w: connection refused", persist.ErrUnavailable)

// TestFaults: each fault on the calls it is set for, and what the
// database took meanwhile.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *faultstore.Store, db *faultstore.Memory)
	}{
		{"fail every call", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			s.Fail(errDown)
			_, take := s.Take(ctx, "a", 0)
			_, tags := s.Tags(ctx)
			_, create := s.Create(ctx, "b", 10, "")
			_, back := s.GiveBack(ctx, "a", 11, 1)
			_, _, floor := s.RaiseFloor(ctx, "a", 5)
			for i, err := range []error{take, tags, create, back, floor} {
				if err != errDown {
					t.Errorf("call %d: err = %v, want the failure as given", i, err)
				}
			}
			if db.MaxID("a") != 1 || db.MaxID("b") != 0 || len(s.Taken()) != 0 {
				t.Fatal("a failed call reached the database")
			}
			if n := s.Calls(); n != 5 {
				t.Fatalf("%d calls counted, want 5", n)
			}
			s.Fail(nil)
			if r := mustTake(t, s, "a", 0); r.Start != 1 {
				t.Fatalf("Take once back = %+v, want from 1", r)
			}
		}},
		{"fail one kind", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			s.Fail(errDown, faultstore.OpTake)
			if _, err := s.Create(ctx, "b", 10, ""); err != nil {
				t.Fatalf("Create while Takes fail: %v", err)
			}
			if _, err := s.Take(ctx, "b", 0); err != errDown {
				t.Fatalf("Take: err = %v, want the failure", err)
			}
			if s.Calls(faultstore.OpTake) != 1 || s.Calls(faultstore.OpCreate) != 1 || s.Calls(faultstore.OpTags) != 0 {
				t.Fatalf("calls: take %d, create %d, tags %d; want 1, 1, 0",
					s.Calls(faultstore.OpTake), s.Calls(faultstore.OpCreate), s.Calls(faultstore.OpTags))
			}
		}},
		{"a batch meets faults request by request", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			s.Inject(func(_ context.Context, c faultstore.Call) error {
				return fmt.Errorf("create %q: %w", c.Tag, persist.ErrDenied)
			}, faultstore.OpCreate)
			res := s.TakeBatch(ctx, []persist.TakeRequest{{Tag: "a"}, {Tag: "new", Create: 5}, {Tag: "a", Size: 3}})
			if res[0].Err != nil || res[0].Range.Start != 1 || res[2].Err != nil || res[2].Range.Start != 11 {
				t.Fatalf("results %+v: want a's two ranges [1, 11) and [11, 14)", res)
			}
			if !errors.Is(res[1].Err, persist.ErrDenied) || db.MaxID("new") != 0 {
				t.Fatalf("the request that creates: %v, max_id %d; want ErrDenied, no row", res[1].Err, db.MaxID("new"))
			}
			if b := s.Batches(); !slices.Equal(b, []int{3}) {
				t.Fatalf("batches %v, want [3]", b)
			}
		}},
		{"hang until the deadline", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			s.Inject(faultstore.Hang)
			hctx, cancel := context.WithCancel(ctx)
			got := goTake(hctx, s, "a")
			cancel()
			if r := <-got; !errors.Is(r.err, persist.ErrUnavailable) || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("hung Take: %v, want ErrUnavailable with context.Canceled", r.err)
			}
			if db.MaxID("a") != 1 {
				t.Fatal("a hung Take reached the database")
			}
		}},
		{"hold until released", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			h := faultstore.NewHold()
			s.Inject(h.Fault, faultstore.OpTake)
			first, second := goTake(ctx, s, "a"), goTake(ctx, s, "a")
			for range 2 {
				if c := <-h.Entered(); c.Op != faultstore.OpTake || c.Tag != "a" {
					t.Fatalf("held %+v, want a Take of a", c)
				}
			}
			if _, err := s.Tag(ctx, "a"); err != nil { // other kinds pass
				t.Fatal(err)
			}
			if n := len(s.Taken()); n != 0 || db.MaxID("a") != 1 {
				t.Fatalf("%d ranges taken while both Takes are held", n)
			}
			h.Release()
			h.Release()
			a, b := <-first, <-second
			if a.err != nil || b.err != nil || a.r.Start == b.r.Start {
				t.Fatalf("released Takes: %+v, %+v; want two ranges", a, b)
			}
		}},
		{"a held call ends with its context", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			h := faultstore.NewHold()
			defer h.Release()
			s.Inject(h.Fault)
			hctx, cancel := context.WithCancel(ctx)
			got := goTake(hctx, s, "a")
			<-h.Entered()
			cancel()
			if r := <-got; !errors.Is(r.err, persist.ErrUnavailable) || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("held Take whose context ended: %v", r.err)
			}
		}},
		{"delay on the test's clock", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			asked := make(chan time.Duration, 1)
			tick := make(chan time.Time)
			s.Inject(faultstore.Delay(20*time.Millisecond, func(d time.Duration) <-chan time.Time {
				asked <- d
				return tick
			}))
			got := goTake(ctx, s, "a")
			if d := <-asked; d != 20*time.Millisecond {
				t.Fatalf("delay of %v, want 20ms", d)
			}
			if len(s.Taken()) != 0 {
				t.Fatal("the Take reached the database before its delay ran out")
			}
			tick <- time.Time{}
			if r := <-got; r.err != nil || r.r.Start != 1 {
				t.Fatalf("delayed Take = %+v", r)
			}
		}},
		{"lose the answer after the commit", func(t *testing.T, s *faultstore.Store, db *faultstore.Memory) {
			lost := fmt.Errorf("%w: %w: %w", persist.ErrAmbiguous, persist.ErrUnavailable, io.ErrUnexpectedEOF)
			s.InjectAnswer(faultstore.Lose(1, lost))
			if _, err := s.Take(ctx, "a", 0); !errors.Is(err, persist.ErrAmbiguous) {
				t.Fatalf("Take whose answer is lost: %v, want ErrAmbiguous", err)
			}
			if r := mustTake(t, s, "a", 0); r.Start != 11 {
				t.Fatalf("next Take = %+v, want from 11: [1, 11) was taken", r)
			}
			want := []persist.Range{{Start: 1, End: 11, Step: 10}, {Start: 11, End: 21, Step: 10}}
			if got := s.Taken(); !slices.Equal(got, want) {
				t.Fatalf("taken %+v, want %+v", got, want)
			}
		}},
		{"admin without an admin base", func(t *testing.T, _ *faultstore.Store, db *faultstore.Memory) {
			s := faultstore.New(struct{ persist.Store }{db})
			if err := s.SetStep(ctx, "a", 5); !errors.Is(err, faultstore.ErrNoAdmin) {
				t.Fatalf("SetStep: %v, want ErrNoAdmin", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := faultstore.NewMemory(map[string]int64{"a": 10})
			tc.run(t, faultstore.New(db), db)
		})
	}
}

// TestTakenTiles: Takes from many goroutines, through random refusals,
// hangs and lost answers: what the database took (Taken) tiles [1,
// max_id), and every range answered is one of those, once.
func TestTakenTiles(t *testing.T) {
	db := faultstore.NewMemory(map[string]int64{"a": 10})
	s := faultstore.New(db)
	var calls, answers atomic.Int64 // a deterministic spread of outcomes
	s.Inject(func(ctx context.Context, c faultstore.Call) error {
		switch calls.Add(1) % 7 {
		case 0:
			return errDown
		case 1:
			hctx, cancel := context.WithCancel(ctx)
			cancel()
			return faultstore.Hang(hctx, c)
		}
		return nil
	})
	s.InjectAnswer(func(_ context.Context, c faultstore.Call, r persist.Range) (persist.Range, error) {
		if answers.Add(1)%5 == 0 {
			return persist.Range{}, errDown
		}
		return r, nil
	})
	const workers, takes = 8, 200
	answered := make([][]persist.Range, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range takes {
				if r, err := s.Take(context.Background(), "a", int64(i%3)); err == nil {
					answered[w] = append(answered[w], r)
				}
			}
		})
	}
	wg.Wait()
	taken := s.Taken()
	slices.SortFunc(taken, func(a, b persist.Range) int { return cmp.Compare(a.Start, b.Start) })
	end := int64(1)
	for _, r := range taken {
		if r.Start != end {
			t.Fatalf("taken range %+v after %d: overlap or hole", r, end)
		}
		end = r.End
	}
	if end != db.MaxID("a") {
		t.Fatalf("taken ranges end at %d, max_id %d", end, db.MaxID("a"))
	}
	all := slices.Concat(answered...)
	if len(all) == 0 || len(all) == len(taken) || len(all) == workers*takes {
		t.Fatalf("%d answered of %d taken: want some refused and some lost", len(all), len(taken))
	}
	seen := map[int64]bool{}
	for _, r := range all {
		if seen[r.Start] || !slices.Contains(taken, r) {
			t.Fatalf("answered %+v twice, or never taken", r)
		}
		seen[r.Start] = true
	}
	if s.Calls(faultstore.OpTake) != workers*takes {
		t.Fatalf("%d Takes counted, want %d", s.Calls(faultstore.OpTake), workers*takes)
	}
}
