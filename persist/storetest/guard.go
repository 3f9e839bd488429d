package storetest

// The persistent guard (leaf_guard): Take never answers below a range it
// handed out before, whatever was done to the leaf_alloc row meanwhile,
// and GiveBack lowers it so that a restart continues at the next ID.

import (
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
)

// guardOf returns whether s keeps the persistent guard.
func guardOf(t *testing.T, s persist.Store) bool {
	t.Helper()
	g, ok := s.(persist.Guarded)
	if !ok {
		t.Fatalf("%T does not implement persist.Guarded", s)
	}
	return g.GuardEnabled()
}

// wantGuard checks leaf_guard.high of tag, read directly.
func wantGuard(t *testing.T, db *DB, tag string, want int64) {
	t.Helper()
	high, ok := db.raw.Guard(t, tag)
	if !ok || high != want {
		t.Fatalf("leaf_guard.high of %q = %d (row present: %v), want %d", tag, high, ok, want)
	}
}

// recreate deletes the tag's row and inserts it again at max_id = 1, by
// hand, as an operator or a restored backup would.
func recreate(t *testing.T, db *DB, tag string, step int64) {
	t.Helper()
	db.raw.Delete(t, tag)
	db.raw.Insert(t, tag, 1, step, "recreated")
}

// testGuardRepairs: whatever lowered the row, the next Take starts at the
// end of the last range handed out, says it repaired from where, and
// leaves max_id and the guard at its end; raising the row is no repair.
func testGuardRepairs(t *testing.T, db *DB) {
	s := db.Open(t)
	if !guardOf(t, s) {
		t.Fatal("GuardEnabled() = false on a store opened with CreateSchema")
	}
	tests := []struct {
		name  string
		lower func(t *testing.T, tag string) // after [1,11) [11,21) [21,31)
		size  int64
		want  persist.Range
	}{
		{"Untouched", func(*testing.T, string) {}, 0,
			persist.Range{Start: 31, End: 41, Step: 10}},
		{"DeletedAndCreated", func(t *testing.T, tag string) {
			db.raw.Delete(t, tag)
			mustCreate(t, s, tag, 10, "")
		}, 0, persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 1}},
		{"RecreatedByHandOtherStep", func(t *testing.T, tag string) { recreate(t, db, tag, 5) }, 0,
			persist.Range{Start: 31, End: 36, Step: 5, Repaired: true, Answered: 1}},
		{"RecreatedSized", func(t *testing.T, tag string) { recreate(t, db, tag, 10) }, 7,
			persist.Range{Start: 31, End: 38, Step: 10, Repaired: true, Answered: 1}},
		{"LoweredByHand", func(t *testing.T, tag string) {
			db.raw.SetMaxID(t, tag, 15)
		}, 0, persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 15}},
		{"LoweredOneBelow", func(t *testing.T, tag string) {
			db.raw.SetMaxID(t, tag, 30)
		}, 0, persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 30}},
		{"LoweredToZero", func(t *testing.T, tag string) {
			db.raw.SetMaxID(t, tag, 0)
		}, 0, persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 0}},
		{"RaisedByHand", func(t *testing.T, tag string) {
			db.raw.SetMaxID(t, tag, 100)
		}, 0, persist.Range{Start: 100, End: 110, Step: 10}},
		{"RaisedFloor", func(t *testing.T, tag string) {
			if _, _, err := admin(t, s).RaiseFloor(t.Context(), tag, 499); err != nil {
				t.Fatal(err)
			}
		}, 0, persist.Range{Start: 500, End: 510, Step: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := tc.name
			mustCreate(t, s, tag, 10, "")
			for _, start := range []int64{1, 11, 21} {
				wantTake(t, s, tag, 0, persist.Range{Start: start, End: start + 10, Step: 10})
			}
			wantGuard(t, db, tag, 31)
			tc.lower(t, tag)
			wantTake(t, s, tag, tc.size, tc.want)
			wantRow(t, s, tag, tc.want.End, tc.want.Step)
			wantGuard(t, db, tag, tc.want.End)
			// Repaired once: the next range simply follows.
			wantTake(t, s, tag, 1, persist.Range{Start: tc.want.End, End: tc.want.End + 1, Step: tc.want.Step})
		})
	}
}

// testGuardGiveBack: a give-back that matches lowers the guard with max_id
// when the guard is at its `from`, so the next Take continues exactly at
// `to`; a stale give-back, or a guard above `from`, leaves the guard.
func testGuardGiveBack(t *testing.T, db *DB) {
	s := db.Open(t)
	ctx := t.Context()
	giveBack := func(t *testing.T, tag string, from, to int64, want bool) {
		t.Helper()
		if ok, err := s.GiveBack(ctx, tag, from, to); ok != want || err != nil {
			t.Fatalf("GiveBack(%d, %d) = %v, %v; want %v", from, to, ok, err, want)
		}
	}
	tests := []struct {
		name      string
		act       func(t *testing.T, tag string) // after [1,11) [11,21) [21,31)
		wantMaxID int64
		wantGuard int64
		want      persist.Range // the next Take
	}{
		{"Top", func(t *testing.T, tag string) { giveBack(t, tag, 31, 25, true) },
			25, 25, persist.Range{Start: 25, End: 35, Step: 10}},
		{"Whole", func(t *testing.T, tag string) { giveBack(t, tag, 31, 21, true) },
			21, 21, persist.Range{Start: 21, End: 31, Step: 10}},
		// A shutdown: the prefetched next segment whole, then the tail.
		{"NextThenTail", func(t *testing.T, tag string) {
			wantTake(t, s, tag, 0, persist.Range{Start: 31, End: 41, Step: 10})
			giveBack(t, tag, 41, 31, true)
			giveBack(t, tag, 31, 27, true)
		}, 27, 27, persist.Range{Start: 27, End: 37, Step: 10}},
		{"StaleFrom", func(t *testing.T, tag string) { giveBack(t, tag, 21, 15, false) },
			31, 31, persist.Range{Start: 31, End: 41, Step: 10}},
		// max_id lowered by hand to a give-back's `from`: the give-back
		// matches the row, but the guard above it stays, and the next
		// Take is repaired above every range handed out.
		{"GuardAboveFrom", func(t *testing.T, tag string) {
			db.raw.SetMaxID(t, tag, 21)
			giveBack(t, tag, 21, 15, true)
		}, 15, 31, persist.Range{Start: 31, End: 41, Step: 10, Repaired: true, Answered: 15}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := tc.name
			mustCreate(t, s, tag, 10, "")
			for range 3 {
				mustTake(t, s, tag, 0)
			}
			tc.act(t, tag)
			wantRow(t, s, tag, tc.wantMaxID, 10)
			wantGuard(t, db, tag, tc.wantGuard)
			wantTake(t, s, tag, 0, tc.want)
			wantGuard(t, db, tag, tc.want.End)
		})
	}
}

// testGuardRepairOverflow: a repair that would pass math.MaxInt64 fails
// with ErrOverflow and changes nothing.
func testGuardRepairOverflow(t *testing.T, db *DB) {
	s := db.Open(t)
	const maxInt = math.MaxInt64
	mustCreate(t, s, "t", 10, "")
	if _, _, err := admin(t, s).RaiseFloor(t.Context(), "t", maxInt-21); err != nil {
		t.Fatal(err)
	}
	wantTake(t, s, "t", 10, persist.Range{Start: maxInt - 20, End: maxInt - 10, Step: 10})
	recreate(t, db, "t", 10)
	wantTake(t, s, "t", 10, persist.Range{Start: maxInt - 10, End: maxInt, Step: 10, Repaired: true, Answered: 1})
	recreate(t, db, "t", 10)
	for _, size := range []int64{1, 0, 10} {
		_, err := s.Take(t.Context(), "t", size)
		wantErr(t, "Take repaired past MaxInt64", err, persist.ErrOverflow)
		wantRow(t, s, "t", 1, 10)
		wantGuard(t, db, "t", maxInt)
	}
}

// testGuardConcurrentDeletes: two handles take ranges while the row is
// deleted and re-created at max_id = 1 again and again: no two ranges
// handed out ever overlap.
func testGuardConcurrentDeletes(t *testing.T, db *DB) {
	stores := []persist.Store{db.Open(t), db.Open(t)}
	mustCreate(t, stores[0], "hot", step, "")
	const (
		takers  = 8
		takes   = 40 // successful Takes per taker
		deletes = 25
	)
	results := make([][]taken, takers)
	// recreated is closed when the row is back after a DELETE: a taker
	// that found no row waits for it rather than spin on the missing row,
	// whose gap locks (InnoDB) would keep the INSERT waiting.
	var mu sync.Mutex
	recreated, stopped := make(chan struct{}), make(chan struct{})
	next := func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return recreated
	}
	var wg sync.WaitGroup
	for w := range takers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for i := 0; len(results[w]) < takes; i++ {
				size := sizeFor(w, i)
				back := next()
				r, err := s.Take(t.Context(), "hot", size)
				if errors.Is(err, persist.ErrNotFound) {
					select { // between a DELETE and its INSERT
					case <-back:
					case <-stopped:
					}
					continue
				}
				if err != nil {
					t.Errorf("taker %d: Take(%d): %v", w, size, err)
					return
				}
				results[w] = append(results[w], taken{size, r})
			}
		})
	}
	wg.Go(func() {
		defer close(stopped)
		for range deletes {
			if t.Failed() {
				return
			}
			recreate(t, db, "hot", step)
			mu.Lock()
			close(recreated)
			recreated = make(chan struct{})
			mu.Unlock()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	// Once more with nothing running: the next Take must be repaired,
	// exactly to the guard.
	high, _ := db.raw.Guard(t, "hot")
	recreate(t, db, "hot", step)
	last := mustTake(t, stores[1], "hot", 0)
	if want := (persist.Range{Start: high, End: high + step, Step: step, Repaired: true, Answered: 1}); last != want {
		t.Fatalf("Take after the last re-creation = %+v, want %+v", last, want)
	}
	all := append(slices.Concat(results...), taken{0, last})
	checkDisjoint(t, all, step)
}

// checkDisjoint fails unless the ranges, sorted, never overlap and each has
// the size that was asked for. Unlike checkTiling it allows holes: a repair
// skips what the row went below.
func checkDisjoint(t *testing.T, got []taken, step int64) {
	t.Helper()
	sortByStart(got)
	repaired := 0
	for i, g := range got {
		want := g.size
		if want <= 0 {
			want = step
		}
		if g.r.Size() != want {
			t.Fatalf("range %d %+v has size %d, asked for %d", i, g.r, g.r.Size(), want)
		}
		if i > 0 && g.r.Start < got[i-1].r.End {
			t.Fatalf("range %+v overlaps %+v", g.r, got[i-1].r)
		}
		if g.r.Repaired {
			repaired++
		}
	}
	t.Logf("%d ranges, %d of them repaired", len(got), repaired)
}

// testGuardTableMissing: a database without leaf_guard (an existing Leaf
// database where leaf may not create tables) opens with CreateSchema off:
// the guard is off, a warning says how to create the table, and ranges are
// taken and given back as without the guard. Opened with CreateSchema, the
// table is created and the guard is on from then on. A backend that keeps
// the guard beside each tag (no GuardDropper) has no table to miss: opened
// without schema creation, its guard is on and repairs.
func testGuardTableMissing(t *testing.T, db *DB) {
	dropper, ok := db.raw.(GuardDropper)
	if !ok {
		s := db.OpenWith(t, func(o *persist.Options) { o.CreateSchema = false })
		if !guardOf(t, s) {
			t.Fatal("GuardEnabled() = false on a backend whose guard cannot be missing")
		}
		mustCreate(t, s, "t", 10, "")
		wantTake(t, s, "t", 0, persist.Range{Start: 1, End: 11, Step: 10})
		recreate(t, db, "t", 10)
		wantTake(t, s, "t", 0, persist.Range{Start: 11, End: 21, Step: 10, Repaired: true, Answered: 1})
		return
	}
	first := db.Open(t)
	mustCreate(t, first, "t", 10, "")
	mustTake(t, first, "t", 0)
	wantTake(t, first, "t", 0, persist.Range{Start: 11, End: 21, Step: 10})
	dropper.DropGuard(t)

	var logs logbuf.Buffer
	s := db.OpenWith(t, func(o *persist.Options) {
		o.CreateSchema = false
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if guardOf(t, s) {
		t.Fatal("GuardEnabled() = true without the leaf_guard table")
	}
	if n := strings.Count(logs.String(), "leaf_guard is missing"); n != 1 || !strings.Contains(logs.String(), "CREATE TABLE IF NOT EXISTS leaf_guard") {
		t.Fatalf("%d warnings about the missing leaf_guard, want 1 with its CREATE TABLE; logs:\n%s", n, logs.String())
	}
	wantTake(t, s, "t", 0, persist.Range{Start: 21, End: 31, Step: 10})
	if ok, err := s.GiveBack(t.Context(), "t", 31, 25); !ok || err != nil {
		t.Fatalf("GiveBack without leaf_guard = %v, %v; want true", ok, err)
	}
	wantTake(t, s, "t", 0, persist.Range{Start: 25, End: 35, Step: 10})
	// Without the guard, nothing stops a re-created row from starting over.
	recreate(t, db, "t", 10)
	wantTake(t, s, "t", 0, persist.Range{Start: 1, End: 11, Step: 10})

	// Opened with CreateSchema: the table is back, the guard on; a tag
	// without a guard row yet simply continues.
	again := db.Open(t)
	if !guardOf(t, again) {
		t.Fatal("GuardEnabled() = false after CreateSchema created leaf_guard")
	}
	wantTake(t, again, "t", 0, persist.Range{Start: 11, End: 21, Step: 10})
	recreate(t, db, "t", 10)
	wantTake(t, again, "t", 0, persist.Range{Start: 21, End: 31, Step: 10, Repaired: true, Answered: 1})
}
