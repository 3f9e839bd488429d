package segment

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// TestAutoCreateDenied: with auto-create on and a store that may not
// create tags, an unknown tag is an error that says so (ErrUnknownTag with
// persist.ErrDenied), not TRYAGAIN; the store stays up and the tags it has
// serve on; the name is remembered, with its reason, for NegativeTTL.
func TestAutoCreateDenied(t *testing.T) {
	store := newFakeStore(map[string]int64{"known": 10})
	// A database whose user may not insert into leaf_alloc.
	store.Inject(func(_ context.Context, c faultstore.Call) error {
		return fmt.Errorf("create %q: %w: creating a tag needs INSERT on leaf_alloc (GRANT INSERT ON leaf_alloc TO app)", c.Tag, persist.ErrDenied)
	}, faultstore.OpCreate)
	c := newClock()
	o := awayOptions(c)
	o.AutoCreate = true
	a := newTestAllocator(t, store, o)

	for range 2 {
		_, err := a.Next(context.Background(), "new")
		if !errors.Is(err, ErrUnknownTag) || !errors.Is(err, persist.ErrDenied) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("INCR of a tag the store may not create: err = %v, want ErrUnknownTag with persist.ErrDenied", err)
		}
	}
	if n := store.Calls(faultstore.OpCreate); n != 1 {
		t.Errorf("%d lookups of the name, want 1: the refusal is remembered", n)
	}
	if st := a.Stats(); !st.StoreOK {
		t.Fatalf("stats = %+v: a refused insert made the store away", st)
	}
	if id, err := a.Next(context.Background(), "known"); err != nil || id != 1 {
		t.Fatalf("INCR of a known tag = %d, %v; want 1", id, err)
	}
}
