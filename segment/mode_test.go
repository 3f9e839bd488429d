package segment

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// countingGen is a Generator that counts up from 1<<40.
type countingGen struct{ last atomic.Int64 }

func newCountingGen() *countingGen {
	g := &countingGen{}
	g.last.Store(1 << 40)
	return g
}

func (g *countingGen) NextN(_ context.Context, n int64) (int64, error) { return g.last.Add(n), nil }
func (g *countingGen) TryNextN(n int64) (int64, bool)                  { return g.last.Add(n), true }

// modes hands out gen for the layout "L" and refuses any other.
type modes struct{ gen Generator }

var errOtherLayout = errors.New("another layout")

func (m modes) Generator(mode, layout string) (Generator, error) {
	if mode != persist.ModeSnowflake || layout != "L" {
		return nil, errOtherLayout
	}
	return m.gen, nil
}

func (m modes) Layout(string) (string, error) { return "L", nil }

func snowflakeStore() *fakeStore {
	s := newFakeStore(map[string]int64{"seg": 100})
	s.db.Put(persist.Tag{Name: "sf", MaxID: 1, Step: 100, Mode: persist.ModeSnowflake, Layout: "L"})
	s.db.Put(persist.Tag{Name: "old", MaxID: 1, Step: 100, Mode: persist.ModeSnowflake, Layout: "K"})
	return s
}

// TestModeTags: a Snowflake tag's IDs come from its generator, never from
// the store; segment-only calls are refused; a tag of a layout this server
// does not make answers why.
func TestModeTags(t *testing.T) {
	store := snowflakeStore()
	gen := newCountingGen()
	o := testOptions(newClock())
	o.Modes = modes{gen}
	a := newTestAllocator(t, store, o)

	sf := mustLookup(t, a, "sf")
	if sf.Mode() != persist.ModeSnowflake {
		t.Fatalf("Mode() = %q", sf.Mode())
	}
	if id := mustNext(t, sf); id != 1<<40+1 {
		t.Fatalf("Next = %d, want the generator's", id)
	}
	if id := mustNextN(t, sf, 10); id != 1<<40+11 {
		t.Fatalf("NextN(10) = %d", id)
	}
	if id, ok := sf.TryNextN(1); !ok || id != 1<<40+12 {
		t.Fatalf("TryNextN = %d, %v", id, ok)
	}
	if len(store.Taken()) != 0 {
		t.Fatalf("%d takes from the store for a Snowflake tag", len(store.Taken()))
	}
	if in := sf.Info(); in.Mode != persist.ModeSnowflake || in.Issued != 12 || in.Init {
		t.Fatalf("Info() = %+v", in)
	}
	if _, err := a.Floor(context.Background(), "sf", 5); !errors.Is(err, ErrMode) {
		t.Fatalf("Floor on a Snowflake tag: %v, want ErrMode", err)
	}
	if err := a.SetStep(context.Background(), "sf", 5); !errors.Is(err, ErrMode) {
		t.Fatalf("SetStep on a Snowflake tag: %v, want ErrMode", err)
	}
	if _, err := mustLookup(t, a, "old").Next(context.Background()); !errors.Is(err, errOtherLayout) {
		t.Fatalf("Next on a tag of another layout: %v", err)
	}
	// Segment tags are as before.
	if id := mustNext(t, mustLookup(t, a, "seg")); id != 1 {
		t.Fatalf("segment tag's first ID %d", id)
	}
	if err := a.CreateMode(context.Background(), "new", persist.ModeSnowflake, ""); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("CreateMode on a store without a registry: %v, want ErrNotSupported", err)
	}
}

// TestModeTagsWithoutModes: without Options.Modes (cluster features off),
// a Snowflake tag answers ErrMode, never segment IDs.
func TestModeTagsWithoutModes(t *testing.T) {
	store := snowflakeStore()
	a := newTestAllocator(t, store, testOptions(newClock()))
	if _, err := mustLookup(t, a, "sf").Next(context.Background()); !errors.Is(err, ErrMode) {
		t.Fatalf("Next: %v, want ErrMode", err)
	}
	if _, ok := mustLookup(t, a, "sf").TryNextN(1); ok {
		t.Fatal("TryNextN succeeded")
	}
	if len(store.Taken()) != 0 {
		t.Fatal("a Snowflake tag took a range")
	}
}

// TestHold: a held allocator refuses segment IDs, cached or not, and
// serves its cache again on Release; generators are not held.
func TestHold(t *testing.T) {
	store := snowflakeStore()
	o := testOptions(newClock())
	o.Modes = modes{newCountingGen()}
	a := newTestAllocator(t, store, o)
	seg := mustLookup(t, a, "seg")
	first := mustNext(t, seg)
	waitLoad(t, seg)
	takes := len(store.Taken())

	lapsed := errors.New("lease lapsed")
	a.Hold(lapsed)
	if _, err := seg.Next(context.Background()); !errors.Is(err, lapsed) {
		t.Fatalf("Next while held: %v", err)
	}
	if _, err := seg.NextN(context.Background(), 3); !errors.Is(err, lapsed) {
		t.Fatalf("NextN while held: %v", err)
	}
	if _, ok := seg.TryNextN(1); ok {
		t.Fatal("TryNextN succeeded while held")
	}
	if !errors.Is(a.Held(), lapsed) {
		t.Fatalf("Held() = %v", a.Held())
	}
	mustNext(t, mustLookup(t, a, "sf"))

	a.Release()
	if a.Held() != nil {
		t.Fatal("Held() after Release")
	}
	if id := mustNext(t, seg); id != first+1 {
		t.Fatalf("after Release: %d, want the cached %d", id, first+1)
	}
	if len(store.Taken()) != takes {
		t.Fatal("Hold or Release took a range")
	}
}

// TestSkipTo: a floor from another server skips the cached IDs at or below
// it, and a range loading meanwhile that ends up below it is refused.
func TestSkipTo(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	hold, loadFrom := cachedAndLoading(t, store, tag)
	// The load in flight answers a range from loadFrom: as if its Take had
	// been committed before the floor was raised in the store.
	floor := loadFrom + 10
	a.SkipTo("a", floor)
	hold.Release()
	for range 50 {
		if id := mustNext(t, tag); id <= floor {
			t.Fatalf("ID %d at or below the floor %d", id, floor)
		}
	}
	// The IDs may have passed the new segment's prefetch point: once that
	// load is over, a next segment ready is one take more.
	waitLoad(t, tag)
	want := 4
	if tag.Info().NextReady {
		want++
	}
	if got := len(store.Taken()); got != want {
		t.Fatalf("%d takes, want %d: two segments, the one refused, the one after (and its prefetch)", got, want)
	}
	a.SkipTo("unknown", 5) // nothing cached: nothing to do
	a.ApplyStep("a", 300)
	if in := tag.Info(); in.MinStep != 300 {
		t.Fatalf("MinStep after ApplyStep = %d", in.MinStep)
	}
}

// TestDropCached: every cached ID is skipped and a load in flight is
// refused; the next IDs come from new ranges.
func TestDropCached(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	a := newTestAllocator(t, store, testOptions(newClock()))
	tag := mustLookup(t, a, "a")
	hold, loadFrom := cachedAndLoading(t, store, tag)
	a.DropCached()
	hold.Release()
	id := mustNext(t, tag)
	refused := loadFrom + store.Taken()[2].Size() // the end of the range loading at the drop
	if id < refused || len(store.Taken()) != 4 {
		t.Fatalf("first ID after DropCached %d (after %d takes), want a new range from %d", id, len(store.Taken()), refused)
	}
}

// cachedAndLoading takes IDs of tag until its second segment is current
// and the load of the third is in flight, held until released (or the
// load's deadline); loadFrom is where the third will start.
func cachedAndLoading(t *testing.T, store *fakeStore, tag *Tag) (hold *faultstore.Hold, loadFrom int64) {
	t.Helper()
	for !tag.Info().NextReady { // until the prefetch has loaded the second
		mustNext(t, tag)
		waitLoad(t, tag)
	}
	hold = faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	for !tag.Info().Loading { // into the second, past its prefetch point
		mustNext(t, tag)
	}
	<-hold.Entered()
	return hold, store.db.MaxID("a")
}

// TestModeTagLastIssued: a Snowflake tag's last ID is the generator's
// last, for GET.
func TestModeTagLastIssued(t *testing.T) {
	o := testOptions(newClock())
	o.Modes = modes{newCountingGen()}
	a := newTestAllocator(t, snowflakeStore(), o)
	sf := mustLookup(t, a, "sf")
	if _, ok := sf.LastIssued(); ok {
		t.Fatal("LastIssued before any ID")
	}
	id := mustNextN(t, sf, 3)
	if last, ok := a.LastIssued("sf"); !ok || last != id {
		t.Fatalf("LastIssued = %d, %v; want %d", last, ok, id)
	}
	id, _ = sf.TryNextN(1)
	if last, _ := sf.LastIssued(); last != id {
		t.Fatalf("LastIssued after TryNextN = %d, want %d", last, id)
	}
}
