package storetest

import (
	"fmt"
	"testing"

	"github.com/leaf-id/leaf/persist"
)

// batchGiver returns s's batched give-back, or skips the test for a
// backend that gives back tag by tag only (the allocator then does).
func batchGiver(t *testing.T, s persist.Store) persist.BatchGiver {
	t.Helper()
	b, ok := s.(persist.BatchGiver)
	if !ok {
		t.Skipf("%T gives back tag by tag only", s)
	}
	return b
}

// testGiveBackBatch: a batch matches exactly the tags GiveBack would, one
// by one, lowers their guards with them, and the next ranges start where
// each give-back began: none overlaps a range handed out before it.
func testGiveBackBatch(t *testing.T, db *DB) {
	s := db.Open(t)
	b := batchGiver(t, s)
	other := db.Open(t)
	ctx := t.Context()
	for _, tag := range []string{"top", "stale", "whole", "above"} {
		mustCreate(t, s, tag, 10, "")
		for range 3 {
			mustTake(t, s, tag, 0) // [1,11) [11,21) [21,31)
		}
	}
	wantTake(t, other, "above", 0, persist.Range{Start: 31, End: 41, Step: 10}) // another server took above
	reqs := []persist.GiveBackRequest{
		{Tag: "top", From: 31, To: 25},
		{Tag: "stale", From: 21, To: 15},
		{Tag: "whole", From: 31, To: 21},
		{Tag: "missing", From: 10, To: 5},
		{Tag: "above", From: 31, To: 25},
	}
	matched, err := b.GiveBackBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, false, false}; fmt.Sprint(matched) != fmt.Sprint(want) {
		t.Fatalf("matched %v, want %v", matched, want)
	}
	for _, w := range []struct {
		tag          string
		maxID, guard int64
		next         persist.Range
	}{
		{"top", 25, 25, persist.Range{Start: 25, End: 35, Step: 10}},
		{"stale", 31, 31, persist.Range{Start: 31, End: 41, Step: 10}},
		{"whole", 21, 21, persist.Range{Start: 21, End: 31, Step: 10}},
		{"above", 41, 41, persist.Range{Start: 41, End: 51, Step: 10}},
	} {
		wantRow(t, s, w.tag, w.maxID, 10)
		wantGuard(t, db, w.tag, w.guard)
		wantTake(t, s, w.tag, 0, w.next)
	}
	// The same batch again: only "whole" is back at its From (the Take
	// above took [21,31) again, the last range), so only it matches.
	matched, err = b.GiveBackBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, false, true, false, false}; fmt.Sprint(matched) != fmt.Sprint(want) {
		t.Fatalf("repeated batch matched %v, want %v", matched, want)
	}
	wantRow(t, s, "top", 35, 10)
	wantRow(t, s, "whole", 21, 10)

	// Many tags in one batch (the allocator sends hundreds), every one
	// matched; then each next range starts at the first ID not handed out.
	const n = 600
	takes := make([]persist.TakeRequest, n)
	for i := range takes {
		takes[i] = persist.TakeRequest{Tag: fmt.Sprintf("many:%03d", i), Create: 100}
	}
	many := make([]persist.GiveBackRequest, n)
	for i, res := range s.TakeBatch(ctx, takes) {
		if res.Err != nil || res.Range.Start != 1 {
			t.Fatalf("TakeBatch of %s: %+v", takes[i].Tag, res)
		}
		many[i] = persist.GiveBackRequest{Tag: takes[i].Tag, From: res.Range.End, To: res.Range.Start + int64(i%100)}
	}
	matched, err = b.GiveBackBatch(ctx, many)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range many {
		if !matched[i] {
			t.Fatalf("%s not matched", r.Tag)
		}
		takes[i] = persist.TakeRequest{Tag: r.Tag}
	}
	for i, res := range other.TakeBatch(ctx, takes) {
		if want := (persist.Range{Start: many[i].To, End: many[i].To + 100, Step: 100}); res.Err != nil || res.Range != want {
			t.Fatalf("TakeBatch of %s after the give-back: %+v, want %+v", takes[i].Tag, res, want)
		}
	}

	for _, bad := range [][]persist.GiveBackRequest{
		{{Tag: "top", From: 35, To: 35}},
		{{Tag: "top", From: 35, To: 0}},
		{{Tag: "top", From: 35, To: 30}, {Tag: "top", From: 35, To: 30}},
	} {
		_, err := b.GiveBackBatch(ctx, bad)
		wantErr(t, fmt.Sprintf("GiveBackBatch(%v)", bad), err, persist.ErrInvalid)
	}
	wantRow(t, s, "top", 35, 10)
	if got, err := b.GiveBackBatch(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v, %v", got, err)
	}
}

// testGiveBackBatchAfter: GiveBackAfter's rules for every tag of a batch
// at once: a floor published after seen refuses the give-backs below it,
// for its tag only; a log behind seen refuses every one.
func testGiveBackBatchAfter(t *testing.T, open Opener) {
	s := open(t)
	r := registry(t, s)
	b := batchGiver(t, s)
	ctx := t.Context()
	for _, tag := range []string{"floored", "low", "free"} {
		mustCreate(t, s, tag, 100, "")
		mustTake(t, s, tag, 100) // [1, 101)
	}
	_, seen, err := r.Changes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []persist.Change{
		{Kind: persist.ChangeFloor, Tag: "floored", Value: 60},
		{Kind: persist.ChangeFloor, Tag: "low", Value: 20},
		{Kind: persist.ChangeStep, Tag: "free", Value: 7},
	} {
		if _, err := r.Publish(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	reqs := []persist.GiveBackRequest{
		{Tag: "floored", From: 101, To: 50}, // below the floor 60: refused
		{Tag: "low", From: 101, To: 50},     // above the floor 20
		{Tag: "free", From: 101, To: 50},
	}
	matched, err := b.GiveBackBatchAfter(ctx, reqs, seen)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, true}; fmt.Sprint(matched) != fmt.Sprint(want) {
		t.Fatalf("matched %v, want %v", matched, want)
	}
	for tag, want := range map[string]int64{"floored": 101, "low": 50, "free": 50} {
		if got := mustTag(t, s, tag).MaxID; got != want {
			t.Errorf("max_id of %s: %d, want %d", tag, got, want)
		}
	}
	_, head, err := r.Changes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Every change applied: the floored tag gives back down to its floor.
	floored := []persist.GiveBackRequest{{Tag: "floored", From: 101, To: 61}}
	if matched, err := b.GiveBackBatchAfter(ctx, floored, head); err != nil || !matched[0] {
		t.Fatalf("GiveBackBatchAfter having applied every change: %v, %v", matched, err)
	}
	// A log behind what the node applied (emptied by hand): all refused.
	mustTake(t, s, "low", 100) // [50, 150)
	if matched, err := b.GiveBackBatchAfter(ctx, []persist.GiveBackRequest{{Tag: "low", From: 150, To: 60}}, head+5); err != nil || matched[0] {
		t.Fatalf("GiveBackBatchAfter past the log's head: %v, %v; want refused", matched, err)
	}
	if got := mustTag(t, s, "low").MaxID; got != 150 {
		t.Fatalf("max_id of low after the refused give-back: %d, want 150", got)
	}
}
