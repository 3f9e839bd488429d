package segment

import (
	"context"
	"testing"
)

// TestFloorSkipsAreNotIssued: a floor raised past cached IDs skips them;
// they are counted as skipped, never as issued, and the last ID handed out
// stays the last one a client got (the sequence SET t 500, INCR t, SET t
// 5000, GET t).
func TestFloorSkipsAreNotIssued(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore(map[string]int64{"t": 1000})
	a := newTestAllocator(t, store, testOptions(nil))

	if _, err := a.Floor(ctx, "t", 500); err != nil {
		t.Fatal(err)
	}
	tag := mustLookup(t, a, "t")
	if id := mustNext(t, tag); id != 501 {
		t.Fatalf("first ID after a floor of 500: %d", id)
	}
	waitLoad(t, tag)
	if _, err := a.Floor(ctx, "t", 5000); err != nil {
		t.Fatal(err)
	}
	check := func(step string, last, issued int64) {
		t.Helper()
		if got, ok := a.LastIssued("t"); !ok || got != last {
			t.Errorf("%s: LastIssued = %d, %v; want %d", step, got, ok, last)
		}
		in := tag.Info()
		if in.Issued != issued {
			t.Errorf("%s: Issued = %d, want %d", step, in.Issued, issued)
		}
		if in.Skipped == 0 {
			t.Errorf("%s: Skipped = 0 after a floor past cached IDs", step)
		}
	}
	check("after the floor", 501, 1)

	// A second floor with nothing handed out in between keeps the last.
	if _, err := a.Floor(ctx, "t", 6000); err != nil {
		t.Fatal(err)
	}
	check("after a second floor", 501, 1)

	seen := newSeen(t)
	seen.Add(501, 1)
	for i := int64(1); i <= 3; i++ {
		id := mustNext(t, tag)
		if id <= 6000 {
			t.Fatalf("ID %d at or below the floor 6000", id)
		}
		seen.Add(id, 1)
		check("after INCR", id, 1+i)
	}
	// A floor that would go back below what was handed out is refused.
	last, _ := a.LastIssued("t")
	if _, err := a.Floor(ctx, "t", last-1); err == nil {
		t.Fatalf("a floor below the last ID %d was accepted", last)
	}
	// Skipped IDs never come back, across a switch to the next segment
	// too.
	for range 2500 {
		seen.Add(mustNext(t, tag), 1)
	}
	in := tag.Info()
	if in.Issued != 2504 {
		t.Fatalf("Issued = %d after 2504 IDs", in.Issued)
	}
}

// TestSkipWithinSegment: the skip counts only the segment's IDs between
// the last one handed out and the floor.
func TestSkipWithinSegment(t *testing.T) {
	s := newSegment(101, 201, 0.5, 0) // IDs 101..200
	s.value.Store(110)                // 101..110 handed out
	if k := s.skip(150); k != 40 {
		t.Fatalf("skip(150) skipped %d, want 40", k)
	}
	if last, ok := s.lastIssued(); !ok || last != 110 {
		t.Fatalf("lastIssued = %d, %v; want 110", last, ok)
	}
	if got := s.issued(); got != 10 {
		t.Fatalf("issued = %d, want 10", got)
	}
	s.value.Add(2) // 151, 152
	if last, _ := s.lastIssued(); last != 152 {
		t.Fatalf("lastIssued = %d, want 152", last)
	}
	if k := s.skip(500); k != 48 { // 153..200
		t.Fatalf("skip(500) skipped %d, want 48", k)
	}
	if last, _ := s.lastIssued(); last != 152 {
		t.Fatalf("lastIssued after a skip past the end = %d, want 152", last)
	}
	if got := s.issued(); got != 12 {
		t.Fatalf("issued = %d, want 12", got)
	}
	if k := s.skip(600); k != 0 {
		t.Fatalf("skip of a used-up segment skipped %d", k)
	}
	fresh := newSegment(1, 11, 0.5, 0)
	fresh.skip(5)
	if _, ok := fresh.lastIssued(); ok {
		t.Fatal("a segment that handed out nothing has a last ID")
	}
}
