package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// TestCloseOnHungDatabase: the give-back of Close is bounded by
// load_timeout, like every database call of the allocator, so a hung
// database cannot hold a shutdown for the caller's whole deadline (here:
// none). Close reports the failure; the IDs stay a gap, never a repeat.
func TestCloseOnHungDatabase(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 10, "b": 10})
	// GiveBack never answers, as a hung (SIGSTOPped) database: it returns
	// only when its context ends.
	store.Inject(faultstore.Hang, faultstore.OpGiveBack)
	o := testOptions(newClock())
	// Long enough for the loads before Close on a busy machine; the hung
	// give-backs each end at it.
	o.LoadTimeout = 2 * time.Second
	a := New(store, o)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		tag := mustLookup(t, a, name)
		for range 3 {
			mustNext(t, tag)
		}
		waitLoad(t, tag) // the prefetched next segment: two give-backs due
	}
	before := map[string]int64{"a": store.db.MaxID("a"), "b": store.db.MaxID("b")}
	done := make(chan error, 1)
	go func() { done <- a.Close(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, persist.ErrUnavailable) {
			t.Fatalf("Close on a hung database: err = %v, want ErrUnavailable", err)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Close still waits on a hung database after a minute")
	}
	for _, name := range []string{"a", "b"} {
		if got := store.db.MaxID(name); got != before[name] {
			t.Errorf("max_id of %s = %d, want %d: nothing given back", name, got, before[name])
		}
	}
}

// batchStore is a fakeStore that gives back in batches
// (persist.BatchGiver), recording each batch's size; fail makes every
// batch fail as a database away would.
type batchStore struct {
	*fakeStore
	mu      sync.Mutex
	batches []int
	fail    error
}

func (s *batchStore) GiveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest) ([]bool, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(reqs))
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	matched := make([]bool, len(reqs))
	for i, r := range reqs {
		ok, err := s.db.GiveBack(ctx, r.Tag, r.From, r.To)
		if err != nil {
			return nil, err
		}
		matched[i] = ok
	}
	return matched, nil
}

func (s *batchStore) GiveBackBatchAfter(ctx context.Context, reqs []persist.GiveBackRequest, seen int64) ([]bool, error) {
	return nil, errors.ErrUnsupported
}

// TestCloseGivesBackInBatches: with many tags, Close gives back in
// transactions of a group of tags where the store can, tag by tag where
// it cannot, with the same outcome: each tag's max_id back at its first ID
// not handed out (so a restart continues at exactly the next ID, none
// repeated), and left alone where another server took a range above.
func TestCloseGivesBackInBatches(t *testing.T) {
	const n, group = 1234, 500
	steps := make(map[string]int64, n)
	for i := range n {
		steps[fmt.Sprintf("t%04d", i)] = 10
	}
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			fake := newFakeStore(steps)
			bs := &batchStore{fakeStore: fake}
			var store persist.Store = fake
			if batched {
				store = bs
			}
			o := testOptions(newClock())
			o.MaxStep = 10 // keep the step at the table's
			a := New(store, o)
			a.giveBackGroup = group
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			issued := make(map[string]int64, n)
			otherEnd := make(map[string]int64)
			for i := range n {
				name := fmt.Sprintf("t%04d", i)
				tag := mustLookup(t, a, name)
				for range i % 25 {
					issued[name] = mustNext(t, tag)
				}
				waitLoad(t, tag)
				if i%7 == 3 { // another server takes a range above ours
					r, err := fake.Take(context.Background(), name, 0)
					if err != nil {
						t.Fatal(err)
					}
					otherEnd[name] = r.End
				}
			}
			backsBefore := fake.Calls(faultstore.OpGiveBack)
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if batched {
				// Groups of group, but for one: 1,234 tags, less those with
				// nothing left to give back.
				got := sortedInts(bs.batches)
				if len(got) != 3 || got[0] >= group || got[1] != group || got[2] != group {
					t.Errorf("batches %v, want two of %d and one smaller", bs.batches, group)
				}
				if n := fake.Calls(faultstore.OpGiveBack) - backsBefore; n != 0 {
					t.Errorf("%d give-backs tag by tag beside the batches", n)
				}
			}
			b := newTestAllocator(t, fake, o)
			for i := range n {
				name := fmt.Sprintf("t%04d", i)
				if end, ok := otherEnd[name]; ok {
					if got := fake.db.MaxID(name); got != end {
						t.Fatalf("%s: max_id %d after Close, want %d (another server's range kept)", name, got, end)
					}
					continue
				}
				id, err := b.Next(context.Background(), name)
				if err != nil || id != issued[name]+1 {
					t.Fatalf("%s after restart: %d, %v; want %d", name, id, err, issued[name]+1)
				}
			}
		})
	}
}

// TestCloseSummarisesFailedGiveBacks: when the give-backs fail, Close
// says so in one line with the counts, and nothing is lowered.
func TestCloseSummarisesFailedGiveBacks(t *testing.T) {
	steps := map[string]int64{}
	for i := range 600 {
		steps[fmt.Sprintf("t%03d", i)] = 10
	}
	bs := &batchStore{fakeStore: newFakeStore(steps), fail: fmt.Errorf("give back 500 tags: %w", persist.ErrUnavailable)}
	o := testOptions(newClock())
	o.MaxStep = 10
	a := New(bs, o)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := map[string]int64{}
	for name := range steps {
		tag := mustLookup(t, a, name)
		mustNext(t, tag)
		waitLoad(t, tag)
		before[name] = bs.db.MaxID(name)
	}
	err := a.Close(context.Background())
	if !errors.Is(err, persist.ErrUnavailable) {
		t.Fatalf("Close: %v, want ErrUnavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "gave back the unused IDs of 0 tags; 600 could not be") {
		t.Fatalf("Close's error is not the one-line summary: %q", msg)
	}
	for name := range steps {
		if got := bs.db.MaxID(name); got != before[name] {
			t.Fatalf("max_id of %s = %d after failed give-backs, want %d", name, got, before[name])
		}
	}
}

func sortedInts(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestCloseLeavesDedicatedRangeAlone: Close runs while an INCRBY's
// dedicated range is being taken. Giving the tag's cached IDs back would
// lower max_id under that take, which would then answer a range below the
// IDs the tag had reserved, refused as max_id lowered by hand (the
// request got an error, where it should get its range). The tag's unused
// IDs stay a gap instead, and the range is handed out.
func TestCloseLeavesDedicatedRangeAlone(t *testing.T) {
	store := newFakeStore(map[string]int64{"a": 100})
	o := testOptions(newClock())
	o.MaxStep = 100 // keep the step at the table's: a frozen clock doubles it up to MaxStep
	a := New(store, o)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tag := mustLookup(t, a, "a")
	last := mustNext(t, tag) // [1, 101) cached
	waitLoad(t, tag)
	hold := faultstore.NewHold()
	store.Inject(hold.Fault, faultstore.OpTake)
	type result struct {
		last int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := tag.NextN(context.Background(), 250) // beyond any segment: a dedicated range
		done <- result{l, err}
	}()
	<-hold.Entered()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls(faultstore.OpGiveBack); n != 0 {
		t.Errorf("Close gave back %d times under a dedicated range in flight", n)
	}
	hold.Release()
	res := <-done
	if res.err != nil {
		t.Fatalf("INCRBY 250 during Close: %v", res.err)
	}
	if first := res.last - 249; first <= last || res.last >= store.db.MaxID("a") {
		t.Fatalf("dedicated range [%d, %d] after ID %d, max_id %d", first, res.last, last, store.db.MaxID("a"))
	}
}
