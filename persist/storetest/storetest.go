// Package storetest is the conformance suite that every persist backend
// runs.
//
// A backend's test calls Run with a function that prepares a fresh, empty
// database (a DB, made with NewDB):
//
//	func TestSQLite(t *testing.T) { storetest.Run(t, newDB) }
//
// storetest imports no driver: each backend's package (and its test
// helpers, such as mysqltest) brings its own.
//
// Calling DB.Open twice gives two independent handles (two connection
// pools) on the same database, which is how the suite checks that servers
// sharing one database never get overlapping ranges; the backend's Raw
// changes the database behind leaf's back, as an operator would.
package storetest

import (
	"cmp"
	"context"
	"errors"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// Opener opens a new, independent handle on one database. The handle is
// closed by t.Cleanup. Every handle must implement persist.Admin too.
type Opener func(t *testing.T) persist.Store

// Run runs the conformance suite. newDB is called once per subtest and must
// return a fresh, empty database, so the subtests run in parallel without
// seeing each other's rows.
func Run(t *testing.T, newDB func(t *testing.T) *DB) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"FirstTake", testFirstTake},
		{"ConsecutiveTakes", testConsecutiveTakes},
		{"CustomSize", testCustomSize},
		{"NotFound", testNotFound},
		{"Invalid", testInvalid},
		{"CreateTwice", testCreateTwice},
		{"GiveBack", testGiveBack},
		{"RaiseFloor", testRaiseFloor},
		{"SetStep", testSetStep},
		{"Tags", testTags},
		{"OddNames", testOddNames},
		{"Overflow", testOverflow},
		{"CancelledContext", testCancelledContext},
		{"TwoHandles", testTwoHandles},
		{"ConcurrentTakes", func(t *testing.T, open Opener) { ConcurrentTakes(t, open, 1) }},
		{"ConcurrentGiveBack", testConcurrentGiveBack},
		{"ConcurrentCreate", testConcurrentCreate},
	}
	tests = append(tests, batchTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newDB(t).Open)
		})
	}
	// The persistent guard: these change the database behind leaf's back.
	guardTests := []struct {
		name string
		fn   func(t *testing.T, db *DB)
	}{
		{"GuardRepairs", testGuardRepairs},
		{"GuardGiveBack", testGuardGiveBack},
		{"GiveBackBatch", testGiveBackBatch},
		{"GuardRepairOverflow", testGuardRepairOverflow},
		{"GuardConcurrentDeletes", testGuardConcurrentDeletes},
		{"GuardTableMissing", testGuardTableMissing},
		// Not a guard test, but it needs to know whether the database
		// must make contending Takes run again.
		{"ConcurrentTakesTwoHandles", func(t *testing.T, db *DB) {
			if retries := ConcurrentTakes(t, db.Open, 2); db.Conflicts && retries == 0 && !t.Failed() {
				t.Fatal("no Take was run again: the conflicts were never met")
			}
		}},
		{"RegistryTablesMissing", testRegistryTablesMissing},
		{"Identity", testIdentity},
		{"IdentityRace", testIdentityRace},
	}
	guardTests = append(guardTests, batchGuardTests...)
	for _, tc := range guardTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newDB(t))
		})
	}
}

// admin returns s as a persist.Admin; every backend implements both.
func admin(t *testing.T, s persist.Store) persist.Admin {
	t.Helper()
	return as[persist.Admin](t, s)
}

// as returns s as a T, or fails t.
func as[T any](t *testing.T, s persist.Store) T {
	t.Helper()
	v, ok := s.(T)
	if !ok {
		t.Fatalf("%T does not implement %v", s, reflect.TypeFor[T]())
	}
	return v
}

func mustCreate(t *testing.T, s persist.Store, name string, step int64, desc string) {
	t.Helper()
	created, err := s.Create(t.Context(), name, step, desc)
	if err != nil {
		t.Fatalf("Create(%q, %d): %v", name, step, err)
	}
	if !created {
		t.Fatalf("Create(%q, %d) = false on a new tag, want true", name, step)
	}
}

// mustTake is one Take that must succeed. The range comes back without
// Retries, so that it compares with the range wanted whether or not the
// database made the Take run again.
func mustTake(t *testing.T, s persist.Store, tag string, size int64) persist.Range {
	t.Helper()
	r, err := s.Take(t.Context(), tag, size)
	if err != nil {
		t.Fatalf("Take(%q, %d): %v", tag, size, err)
	}
	r.Retries = 0
	return r
}

func wantTake(t *testing.T, s persist.Store, tag string, size int64, want persist.Range) {
	t.Helper()
	if got := mustTake(t, s, tag, size); got != want {
		t.Fatalf("Take(%q, %d) = %+v, want %+v", tag, size, got, want)
	}
}

func mustTag(t *testing.T, s persist.Store, name string) persist.Tag {
	t.Helper()
	tag, err := s.Tag(t.Context(), name)
	if err != nil {
		t.Fatalf("Tag(%q): %v", name, err)
	}
	if tag.Name != name {
		t.Fatalf("Tag(%q).Name = %q", name, tag.Name)
	}
	return tag
}

// wantRow checks the fields of the row that the allocator depends on.
func wantRow(t *testing.T, s persist.Store, name string, maxID, step int64) {
	t.Helper()
	tag := mustTag(t, s, name)
	if tag.MaxID != maxID || tag.Step != step {
		t.Fatalf("Tag(%q) max_id=%d step=%d, want max_id=%d step=%d", name, tag.MaxID, tag.Step, maxID, step)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func testFirstTake(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "order", 1000, "orders")
	r := mustTake(t, s, "order", 0)
	if want := (persist.Range{Start: 1, End: 1001, Step: 1000}); r != want {
		t.Fatalf("first Take = %+v, want %+v", r, want)
	}
	if r.Size() != 1000 {
		t.Fatalf("Size() = %d, want 1000", r.Size())
	}
	tag := mustTag(t, s, "order")
	if tag.MaxID != 1001 || tag.Step != 1000 || tag.Description != "orders" {
		t.Fatalf("row after first Take = %+v", tag)
	}
}

func testConsecutiveTakes(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "t", 10, "")
	next := int64(1)
	for _, size := range []int64{0, 3, 0, 1, 25, -1, 10, 0} {
		want := size
		if want <= 0 {
			want = 10
		}
		wantTake(t, s, "t", size, persist.Range{Start: next, End: next + want, Step: 10})
		next += want
	}
	wantRow(t, s, "t", next, 10)
}

func testCustomSize(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "t", 100, "")
	steps := []struct {
		size int64
		want persist.Range
	}{
		{7, persist.Range{Start: 1, End: 8, Step: 100}},
		{0, persist.Range{Start: 8, End: 108, Step: 100}},
		{-5, persist.Range{Start: 108, End: 208, Step: 100}},
		{1, persist.Range{Start: 208, End: 209, Step: 100}},
		{1_000_000, persist.Range{Start: 209, End: 1_000_209, Step: 100}},
	}
	for _, st := range steps {
		wantTake(t, s, "t", st.size, st.want)
	}
	wantRow(t, s, "t", 1_000_209, 100)
}

func testNotFound(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	mustCreate(t, s, "present", 10, "")
	ctx := t.Context()
	ops := []struct {
		name string
		call func() error
	}{
		{"Take", func() error { _, err := s.Take(ctx, "missing", 0); return err }},
		{"TakeSize", func() error { _, err := s.Take(ctx, "missing", 5); return err }},
		{"Tag", func() error { _, err := s.Tag(ctx, "missing"); return err }},
		{"GiveBack", func() error {
			ok, err := s.GiveBack(ctx, "missing", 11, 1)
			if ok {
				t.Error("GiveBack on a missing tag matched")
			}
			return err
		}},
		{"SetStep", func() error { return a.SetStep(ctx, "missing", 5) }},
		{"RaiseFloor", func() error { _, _, err := a.RaiseFloor(ctx, "missing", 100); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			wantErr(t, op.name, op.call(), persist.ErrNotFound)
		})
	}
	wantRow(t, s, "present", 1, 10)
	tags, err := s.Tags(ctx)
	if err != nil || len(tags) != 1 {
		t.Fatalf("Tags() = %d rows, %v; want 1 row (nothing created by a miss)", len(tags), err)
	}
}

func testInvalid(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	mustCreate(t, s, "ok", 10, "")
	ctx := t.Context()
	long := strings.Repeat("x", persist.MaxTagLen+1)
	ops := []struct {
		name string
		call func() error
	}{
		{"TakeEmpty", func() error { _, err := s.Take(ctx, "", 1); return err }},
		{"TakeTooLong", func() error { _, err := s.Take(ctx, long, 1); return err }},
		{"TakeBadUTF8", func() error { _, err := s.Take(ctx, "ok\xff", 1); return err }},
		{"TakeTrailingSpace", func() error { _, err := s.Take(ctx, "ok ", 1); return err }},
		{"TakeNUL", func() error { _, err := s.Take(ctx, "ok\x00", 1); return err }},
		{"CreateNUL", func() error { _, err := s.Create(ctx, "nul\x00byte", 10, ""); return err }},
		{"CreateDescNUL", func() error { _, err := s.Create(ctx, "n", 10, "a\x00b"); return err }},
		{"TagEmpty", func() error { _, err := s.Tag(ctx, ""); return err }},
		{"CreateEmpty", func() error { _, err := s.Create(ctx, "", 10, ""); return err }},
		{"CreateTooLong", func() error { _, err := s.Create(ctx, long, 10, ""); return err }},
		{"CreateStepZero", func() error { _, err := s.Create(ctx, "n", 0, ""); return err }},
		{"CreateStepNegative", func() error { _, err := s.Create(ctx, "n", -1, ""); return err }},
		{"CreateStepTooBig", func() error { _, err := s.Create(ctx, "n", persist.MaxStep+1, ""); return err }},
		{"CreateDescTooLong", func() error {
			_, err := s.Create(ctx, "n", 10, strings.Repeat("d", persist.MaxDescriptionLen+1))
			return err
		}},
		{"CreateDescBadUTF8", func() error { _, err := s.Create(ctx, "n", 10, "\xfe"); return err }},
		{"GiveBackEqual", func() error { _, err := s.GiveBack(ctx, "ok", 5, 5); return err }},
		{"GiveBackUp", func() error { _, err := s.GiveBack(ctx, "ok", 5, 6); return err }},
		{"GiveBackToZero", func() error { _, err := s.GiveBack(ctx, "ok", 1, 0); return err }},
		{"GiveBackEmpty", func() error { _, err := s.GiveBack(ctx, "", 11, 1); return err }},
		{"SetStepZero", func() error { return a.SetStep(ctx, "ok", 0) }},
		{"SetStepTooBig", func() error { return a.SetStep(ctx, "ok", persist.MaxStep+1) }},
		{"RaiseFloorEmpty", func() error { _, _, err := a.RaiseFloor(ctx, "", 5); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			wantErr(t, op.name, op.call(), persist.ErrInvalid)
		})
	}
	wantRow(t, s, "ok", 1, 10)
	tags, err := s.Tags(ctx)
	if err != nil || len(tags) != 1 {
		t.Fatalf("Tags() = %+v, %v; want only \"ok\"", tags, err)
	}
}

func testCreateTwice(t *testing.T, open Opener) {
	s := open(t)
	mustCreate(t, s, "t", 10, "first")
	mustTake(t, s, "t", 0)
	created, err := s.Create(t.Context(), "t", 99, "second")
	if err != nil || created {
		t.Fatalf("second Create = %v, %v; want false, nil", created, err)
	}
	tag := mustTag(t, s, "t")
	if tag.MaxID != 11 || tag.Step != 10 || tag.Description != "first" {
		t.Fatalf("row after second Create = %+v, want max_id=11 step=10 description=first", tag)
	}
}

func testGiveBack(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	mustCreate(t, s, "t", 1000, "")
	wantTake(t, s, "t", 0, persist.Range{Start: 1, End: 1001, Step: 1000})
	wantTake(t, s, "t", 0, persist.Range{Start: 1001, End: 2001, Step: 1000})
	steps := []struct {
		name     string
		from, to int64
		matched  bool
		maxID    int64
	}{
		{"StaleFromDoesNotLower", 1001, 500, false, 2001},
		{"FromAboveMaxDoesNotMatch", 5000, 1000, false, 2001},
		{"TopMatches", 2001, 1500, true, 1500},
	}
	for _, st := range steps {
		ok, err := s.GiveBack(ctx, "t", st.from, st.to)
		if err != nil || ok != st.matched {
			t.Fatalf("%s: GiveBack(%d, %d) = %v, %v; want %v", st.name, st.from, st.to, ok, err, st.matched)
		}
		wantRow(t, s, "t", st.maxID, 1000)
	}
	// The next range starts where the given-back tail began.
	wantTake(t, s, "t", 0, persist.Range{Start: 1500, End: 2500, Step: 1000})
	if ok, err := s.GiveBack(ctx, "t", 2500, 1500); !ok || err != nil {
		t.Fatalf("GiveBack(2500, 1500) = %v, %v; want true", ok, err)
	}
	// The same give-back again is stale now: max_id is 1500, not 2500.
	if ok, err := s.GiveBack(ctx, "t", 2500, 1500); ok || err != nil {
		t.Fatalf("repeated GiveBack(2500, 1500) = %v, %v; want false", ok, err)
	}
	wantRow(t, s, "t", 1500, 1000)
}

func testRaiseFloor(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	ctx := t.Context()
	mustCreate(t, s, "t", 100, "d")
	mustTake(t, s, "t", 0) // max_id 101
	steps := []struct {
		name  string
		floor int64
		moved bool
		maxID int64
	}{
		{"Below", 50, false, 101},
		{"Negative", -7, false, 101},
		{"JustBelowMax", 100, false, 101},
		{"AtMax", 101, true, 102},
		{"Far", 10_000, true, 10_001},
		{"NeverLowers", 5, false, 10_001},
	}
	for _, st := range steps {
		tag, moved, err := a.RaiseFloor(ctx, "t", st.floor)
		if err != nil || moved != st.moved {
			t.Fatalf("%s: RaiseFloor(%d) moved=%v err=%v; want moved=%v", st.name, st.floor, moved, err, st.moved)
		}
		if tag.Name != "t" || tag.MaxID != st.maxID || tag.Step != 100 || tag.Description != "d" {
			t.Fatalf("%s: RaiseFloor(%d) returned %+v, want max_id=%d", st.name, st.floor, tag, st.maxID)
		}
		wantRow(t, s, "t", st.maxID, 100)
	}
	wantTake(t, s, "t", 0, persist.Range{Start: 10_001, End: 10_101, Step: 100})
	_, _, err := a.RaiseFloor(ctx, "t", math.MaxInt64)
	wantErr(t, "RaiseFloor(MaxInt64)", err, persist.ErrOverflow)
	wantRow(t, s, "t", 10_101, 100)
}

func testSetStep(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	ctx := t.Context()
	mustCreate(t, s, "t", 10, "")
	steps := []struct {
		step int64
		want persist.Range
	}{
		{500, persist.Range{Start: 1, End: 501, Step: 500}},
		{500, persist.Range{Start: 501, End: 1001, Step: 500}}, // unchanged value is not "not found"
		{1, persist.Range{Start: 1001, End: 1002, Step: 1}},
		{persist.MaxStep, persist.Range{Start: 1002, End: 1002 + persist.MaxStep, Step: persist.MaxStep}},
	}
	for _, st := range steps {
		if err := a.SetStep(ctx, "t", st.step); err != nil {
			t.Fatalf("SetStep(%d): %v", st.step, err)
		}
		wantRow(t, s, "t", st.want.Start, st.step)
		wantTake(t, s, "t", 0, st.want)
	}
}

func testTags(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	tags, err := s.Tags(ctx)
	if err != nil || len(tags) != 0 {
		t.Fatalf("Tags() on an empty store = %+v, %v", tags, err)
	}
	before := time.Now()
	want := []persist.Tag{
		{Name: "alpha", MaxID: 1, Step: 10, Description: "first"},
		{Name: "beta", MaxID: 41, Step: 20, Description: ""},
		{Name: "gamma", MaxID: 31, Step: 30, Description: "third"},
	}
	for _, w := range want {
		mustCreate(t, s, w.Name, w.Step, w.Description)
	}
	mustTake(t, s, "beta", 0)
	mustTake(t, s, "beta", 0)
	mustTake(t, s, "gamma", 0)
	got, err := s.Tags(ctx)
	if err != nil {
		t.Fatalf("Tags(): %v", err)
	}
	slices.SortFunc(got, func(a, b persist.Tag) int { return strings.Compare(a.Name, b.Name) })
	if len(got) != len(want) {
		t.Fatalf("Tags() = %+v, want %d rows", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		// update_time has a one-second resolution and comes from the
		// database's clock: allow for both.
		if g.UpdateTime.Before(before.Add(-time.Hour)) || g.UpdateTime.After(time.Now().Add(time.Hour)) {
			t.Errorf("Tags()[%d].UpdateTime = %v, want about %v", i, g.UpdateTime, before)
		}
		g.UpdateTime = time.Time{}
		if g != w {
			t.Errorf("Tags()[%d] = %+v, want %+v", i, g, w)
		}
		one := mustTag(t, s, w.Name)
		one.UpdateTime = time.Time{}
		if one != w {
			t.Errorf("Tag(%q) = %+v, want %+v", w.Name, one, w)
		}
	}
}

// oddNames are tags that must be stored and read back byte-exact, and must
// never match another row (no LIKE, no quoting bugs, no case folding).
func oddNames() []string {
	return []string{
		"abc", "ABC", "a%", "%", "a_c", "_", "a\\c", "it's", `"quoted"`, "`tick`",
		"x'; DROP TABLE leaf_alloc; --", "Robert'); DELETE FROM leaf_alloc; --",
		"?", "$1", ":name", "@v", "--", "/* c */", "semi;colon",
		"订单", "🚀rocket", "café", "cafe\u0301", " lead", "tab\tnew\nline", "nul",
		strings.Repeat("x", 128), strings.Repeat("é", persist.MaxTagLen),
	}
}

func testOddNames(t *testing.T, open Opener) {
	oddNames := oddNames()
	s := open(t)
	ctx := t.Context()
	for i, name := range oddNames {
		mustCreate(t, s, name, int64(i+1), name)
	}
	// A distinct size per tag: a statement that touched another row too
	// would leave that row's max_id off.
	for i, name := range oddNames {
		wantTake(t, s, name, int64(i+1), persist.Range{Start: 1, End: int64(i + 2), Step: int64(i + 1)})
	}
	for i, name := range oddNames {
		tag := mustTag(t, s, name)
		if tag.MaxID != int64(i+2) || tag.Step != int64(i+1) || tag.Description != name {
			t.Errorf("Tag(%q) = %+v, want max_id=%d step=%d description=name", name, tag, i+2, i+1)
		}
	}
	tags, err := s.Tags(ctx)
	if err != nil {
		t.Fatalf("Tags(): %v", err)
	}
	var names []string
	for _, tag := range tags {
		names = append(names, tag.Name)
	}
	slices.Sort(names)
	want := slices.Clone(oddNames)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("Tags() names = %q, want %q", names, want)
	}
	// Names that a wildcard, case folding or accent folding would match.
	for _, missing := range []string{"a%c", "aXc", "Abc", "%%", "cafe", "CAFÉ", "x"} {
		_, err := s.Take(ctx, missing, 1)
		wantErr(t, "Take("+missing+")", err, persist.ErrNotFound)
	}
}

func testOverflow(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	ctx := t.Context()
	const maxInt = math.MaxInt64
	mustCreate(t, s, "t", 10, "")
	if _, _, err := a.RaiseFloor(ctx, "t", maxInt-21); err != nil {
		t.Fatalf("RaiseFloor: %v", err)
	}
	wantTake(t, s, "t", 10, persist.Range{Start: maxInt - 20, End: maxInt - 10, Step: 10})
	wantTake(t, s, "t", 0, persist.Range{Start: maxInt - 10, End: maxInt, Step: 10})
	for _, size := range []int64{1, 0, maxInt} {
		_, err := s.Take(ctx, "t", size)
		wantErr(t, "Take at MaxInt64", err, persist.ErrOverflow)
		wantRow(t, s, "t", maxInt, 10)
	}

	mustCreate(t, s, "fresh", 10, "")
	_, err := s.Take(ctx, "fresh", maxInt)
	wantErr(t, "Take(MaxInt64) on a fresh tag", err, persist.ErrOverflow)
	wantRow(t, s, "fresh", 1, 10)
	wantTake(t, s, "fresh", maxInt-1, persist.Range{Start: 1, End: maxInt, Step: 10})
}

func testCancelledContext(t *testing.T, open Opener) {
	s := open(t)
	a := admin(t, s)
	mustCreate(t, s, "t", 10, "")
	mustTake(t, s, "t", 0)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	ctxs := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"Cancelled", cancelled, context.Canceled},
		{"Expired", expired, context.DeadlineExceeded},
	}
	for _, c := range ctxs {
		ctx := c.ctx
		ops := []struct {
			name string
			call func() error
		}{
			{"Take", func() error { _, err := s.Take(ctx, "t", 0); return err }},
			{"Tag", func() error { _, err := s.Tag(ctx, "t"); return err }},
			{"Tags", func() error { _, err := s.Tags(ctx); return err }},
			{"Create", func() error { _, err := s.Create(ctx, "new", 10, ""); return err }},
			{"GiveBack", func() error { _, err := s.GiveBack(ctx, "t", 11, 1); return err }},
			{"SetStep", func() error { return a.SetStep(ctx, "t", 99) }},
			{"RaiseFloor", func() error { _, _, err := a.RaiseFloor(ctx, "t", 1000); return err }},
		}
		for _, op := range ops {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				err := op.call()
				wantErr(t, op.name, err, c.want)
				wantErr(t, op.name, err, persist.ErrUnavailable)
			})
		}
	}
	wantRow(t, s, "t", 11, 10)
	if _, err := s.Tag(t.Context(), "new"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("Create with a cancelled context created the row: %v", err)
	}
}

func testTwoHandles(t *testing.T, open Opener) {
	s1, s2 := open(t), open(t)
	if s1 == s2 {
		t.Fatal("the Opener returned the same handle twice")
	}
	mustCreate(t, s1, "t", 10, "")
	if created, err := s2.Create(t.Context(), "t", 20, ""); created || err != nil {
		t.Fatalf("Create on the second handle = %v, %v; want false", created, err)
	}
	wantTake(t, s2, "t", 0, persist.Range{Start: 1, End: 11, Step: 10})
	wantTake(t, s1, "t", 0, persist.Range{Start: 11, End: 21, Step: 10})
	if err := admin(t, s2).SetStep(t.Context(), "t", 5); err != nil {
		t.Fatal(err)
	}
	wantTake(t, s1, "t", 0, persist.Range{Start: 21, End: 26, Step: 5})
	wantRow(t, s2, "t", 26, 5)
}

// taken is one range and the size that was asked for.
type taken struct {
	size int64
	r    persist.Range
}

// sortByStart sorts ranges by their first ID.
func sortByStart(got []taken) {
	slices.SortFunc(got, func(a, b taken) int { return cmp.Compare(a.r.Start, b.r.Start) })
}

// checkTiling fails unless the ranges cover [1, maxID) exactly: sorted,
// each starts where the previous ended, nothing overlaps, nothing is left
// out, and each has the size that was asked for.
func checkTiling(t *testing.T, got []taken, step, maxID int64) {
	t.Helper()
	sortByStart(got)
	next := int64(1)
	for i, g := range got {
		want := g.size
		if want <= 0 {
			want = step
		}
		if g.r.Size() != want {
			t.Fatalf("range %d %+v has size %d, asked for %d", i, g.r, g.r.Size(), want)
		}
		if g.r.Start != next {
			if g.r.Start < next {
				t.Fatalf("range %d %+v overlaps the previous one (ends at %d)", i, g.r, next)
			}
			t.Fatalf("hole [%d, %d) before range %d %+v", next, g.r.Start, i, g.r)
		}
		next = g.r.End
	}
	if next != maxID {
		t.Fatalf("ranges end at %d, max_id is %d", next, maxID)
	}
}

// sizeFor is the size that worker w asks for in round i: the row's step
// (0, -1) and explicit sizes.
func sizeFor(w, i int) int64 {
	sizes := [...]int64{0, 1, 7, 100, -1, 3}
	return sizes[(w+i)%len(sizes)]
}

const (
	workers = 50
	step    = 10
)

// rounds is how many Takes each worker of the concurrency tests makes: 40
// in make test (2,000 Takes of one row by 50 workers, as contended as
// more), 200 with LEAF_TEST_LONG=1.
func rounds() int {
	if os.Getenv("LEAF_TEST_LONG") != "" {
		return 200
	}
	return 40
}

// ConcurrentTakes checks that workers x rounds Takes of one tag, spread
// over handles handles on one database, never overlap and leave no hole.
// It returns how many times the database made them run again
// (Range.Retries), which a backend may require to be more than none, to
// prove that its conflicts were really met and retried.
func ConcurrentTakes(t *testing.T, open Opener, handles int) (retries int) {
	stores := make([]persist.Store, handles)
	for i := range stores {
		stores[i] = open(t)
	}
	mustCreate(t, stores[0], "hot", step, "")
	results := make([][]taken, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%handles]
			for i := range rounds() {
				size := sizeFor(w, i)
				r, err := s.Take(t.Context(), "hot", size)
				if err != nil {
					t.Errorf("worker %d: Take(%d): %v", w, size, err)
					return
				}
				results[w] = append(results[w], taken{size, r})
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return 0
	}
	all := slices.Concat(results...)
	if len(all) != workers*rounds() {
		t.Fatalf("%d ranges, want %d", len(all), workers*rounds())
	}
	checkTiling(t, all, step, mustTag(t, stores[0], "hot").MaxID)
	for _, g := range all {
		retries += g.r.Retries
	}
	t.Logf("%d Takes over %d handles, run again %d times", len(all), handles, retries)
	return retries
}

// testConcurrentGiveBack mixes Takes and give-backs over two handles, as
// servers starting and stopping do. A third of the give-backs run alone (no
// Take in between, so they must match); a third race with the Takes of the
// other workers (they match or not). What was kept must still tile
// [1, max_id) exactly, since a give-back only matches the top range.
func testConcurrentGiveBack(t *testing.T, open Opener) {
	stores := []persist.Store{open(t), open(t)}
	mustCreate(t, stores[0], "hot", step, "")
	results := make([][]taken, workers)
	var (
		wg        sync.WaitGroup
		exclusive sync.RWMutex // held for writing by a give-back that runs alone
		mu        sync.Mutex
		alone     int // give-backs run alone
		returned  int // give-backs that matched
	)
	for w := range workers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for i := range rounds() / 2 {
				size := sizeFor(w, i)
				mode := (w + i) % 3 // 0: give back alone, 1: give back racing, 2: keep
				if mode == 0 {
					exclusive.Lock()
				} else {
					exclusive.RLock()
				}
				r, err := s.Take(t.Context(), "hot", size)
				var ok bool
				if err == nil && mode != 2 {
					ok, err = s.GiveBack(t.Context(), "hot", r.End, r.Start)
				}
				if mode == 0 {
					exclusive.Unlock()
				} else {
					exclusive.RUnlock()
				}
				if err != nil {
					t.Errorf("worker %d: Take(%d)/GiveBack: %v", w, size, err)
					return
				}
				if mode == 0 && !ok {
					t.Errorf("worker %d: GiveBack(%d, %d) with no Take in between did not match", w, r.End, r.Start)
					return
				}
				mu.Lock()
				if mode == 0 {
					alone++
				}
				if ok {
					returned++
				}
				mu.Unlock()
				if !ok {
					results[w] = append(results[w], taken{size, r})
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d give-backs matched, %d of them run alone", returned, alone)
	checkTiling(t, slices.Concat(results...), step, mustTag(t, stores[1], "hot").MaxID)
}

// testConcurrentCreate: many servers creating the same tag at once; exactly
// one creates it, none fails.
func testConcurrentCreate(t *testing.T, open Opener) {
	stores := []persist.Store{open(t), open(t)}
	const n = 20
	var created [n]bool
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, err := stores[i%2].Create(t.Context(), "new", int64(i+1), "")
			if err != nil {
				t.Errorf("Create #%d: %v", i, err)
			}
			created[i] = ok
		})
	}
	wg.Wait()
	winner := -1
	for i, ok := range created {
		if ok {
			if winner >= 0 {
				t.Fatalf("Create succeeded twice: #%d and #%d", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no Create succeeded")
	}
	wantRow(t, stores[0], "new", 1, int64(winner+1))
}

// TakeAsync runs s.Take(tag, size) in a goroutine; its answer comes on
// the channel, for a test that holds the Take up (a lock, a proxy) while
// it watches it.
func TakeAsync(s persist.Store, tag string, size int64) <-chan persist.TakeResult {
	done := make(chan persist.TakeResult, 1)
	go func() {
		r, err := s.Take(context.Background(), tag, size)
		done <- persist.TakeResult{Range: r, Err: err}
	}()
	return done
}
