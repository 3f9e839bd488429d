package segment

import (
	"context"
	"errors"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
)

func TestFloor(t *testing.T) {
	tests := []struct {
		name    string
		served  int   // IDs served before the floor
		floor   int64 // LEAF.FLOOR n
		wantErr error
		wantMin int64 // the next ID must be above this
	}{
		{"above everything reserved", 5, 5000, nil, 5000},
		{"inside the current segment", 5, 50, nil, 50},
		{"inside the next segment", 15, 150, nil, 150},
		{"at the reserved end is no change", 5, 100, nil, 100},
		{"between served and reserved skips the cache", 15, 20, nil, 20},
		{"below IDs served refused", 15, 10, ErrWouldLower, 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string]int64{"a": 100})
			o := testOptions(newClock())
			o.MaxStep = 100 // keep the step at the table's: a frozen clock doubles it up to MaxStep
			a := newTestAllocator(t, store, o)
			tag := mustLookup(t, a, "a")
			var last int64
			for range tc.served {
				last = mustNext(t, tag)
			}
			waitLoad(t, tag)
			before := store.db.MaxID("a")
			floor, err := a.Floor(context.Background(), "a", tc.floor)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Floor err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if store.db.MaxID("a") != before {
					t.Fatal("a refused floor changed max_id")
				}
			} else if floor < tc.floor {
				t.Fatalf("floor in effect %d < %d", floor, tc.floor)
			}
			for range 300 { // across segments: no ID at or below the floor
				id := mustNext(t, tag)
				if id <= tc.wantMin || id <= last {
					t.Fatalf("id %d after floor %d (last %d)", id, tc.floor, last)
				}
				last = id
			}
		})
	}
}

func TestFloorCreatesMissingTag(t *testing.T) {
	store := newFakeStore(nil)
	o := testOptions(newClock())
	o.AutoCreate = false
	a := newTestAllocator(t, store, o)
	if _, err := a.Floor(context.Background(), "migrated", 41); err != nil {
		t.Fatal(err)
	}
	if id, err := a.Next(context.Background(), "migrated"); err != nil || id != 42 {
		t.Fatalf("Next = %d, %v; want 42", id, err)
	}
}

func TestCreateAndSetStep(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	o := testOptions(newClock())
	o.AutoCreate = false
	a := newTestAllocator(t, store, o)
	if err := a.Create(context.Background(), "a", 5, ""); !errors.Is(err, ErrExists) {
		t.Fatalf("create existing: %v, want ErrExists", err)
	}
	if _, err := a.Next(context.Background(), "b"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("next unknown: %v", err)
	}
	if err := a.Create(context.Background(), "b", 7, "orders"); err != nil {
		t.Fatal(err)
	}
	// Created after a miss: the negative cache must not hide it.
	if id, err := a.Next(context.Background(), "b"); err != nil || id != 1 {
		t.Fatalf("Next(b) = %d, %v; want 1", id, err)
	}
	// The table's step; the adaptive one may have doubled already, as the
	// first ID starts the prefetch (10% of 7).
	if in, _ := a.Info("b"); in.MinStep != 7 {
		t.Fatalf("min_step = %d, want 7", in.MinStep)
	}
	if err := a.SetStep(context.Background(), "b", 50); err != nil {
		t.Fatal(err)
	}
	if err := a.SetStep(context.Background(), "nope", 50); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("set step of a missing tag: %v", err)
	}
	tag := mustLookup(t, a, "b")
	for range 7 {
		mustNext(t, tag)
	}
	waitLoad(t, tag)
	mustNext(t, tag)
	if in := tag.Info(); in.MinStep != 50 || in.Step < 50 {
		t.Fatalf("info = %+v, want min_step 50", in)
	}
}

// A step changed while a load is in flight (here through another server)
// holds when the load ends: the load may have read the row before the
// change, and its step must not undo it.
func TestStepChangeOutlivesOlderLoad(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	mustNext(t, tag)
	waitLoad(t, tag)
	hold := faultstore.NewHold() // the load's deadline is far beyond the test
	store.Inject(hold.Fault, faultstore.OpTake)
	// Spend cached IDs until the next prefetch starts, then let it reach
	// the store (more IDs could run the cache dry and wait on it).
	for i := 0; !tag.Info().Loading; i++ {
		if i == 1000 {
			t.Fatal("no prefetch within 1000 IDs")
		}
		mustNext(t, tag)
	}
	<-hold.Entered()
	a.ApplyStep("a", 500)
	hold.Release()
	waitLoad(t, tag)
	if in := tag.Info(); in.MinStep != 500 || in.Step < 500 {
		t.Fatalf("after the older load: min_step %d, step %d; want 500 and at least 500", in.MinStep, in.Step)
	}
}

func TestLastIssued(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	if _, ok := a.LastIssued("a"); ok {
		t.Fatal("LastIssued before any ID")
	}
	tag := mustLookup(t, a, "a")
	var last int64
	for range 25 {
		last = mustNext(t, tag)
	}
	if got, ok := a.LastIssued("a"); !ok || got != last {
		t.Fatalf("LastIssued = %d, %v; want %d", got, ok, last)
	}
	last = mustNextN(t, tag, 500) // dedicated range
	if got, _ := a.LastIssued("a"); got != last {
		t.Fatalf("after INCRBY LastIssued = %d, want %d", got, last)
	}
}
