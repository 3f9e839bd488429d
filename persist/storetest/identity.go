package storetest

import (
	"regexp"
	"testing"

	"github.com/leaf-id/leaf/persist"
)

// storeID is s's identity; the suite requires every backend to keep one.
func storeID(t *testing.T, s persist.Store) string {
	t.Helper()
	id, err := as[persist.Identified](t, s).StoreID(t.Context())
	if err != nil {
		t.Fatalf("StoreID: %v", err)
	}
	return id
}

var storeIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

// testIdentity: the first handle on a fresh store gives it an identity;
// every handle, at once or later, reads the same one; another store has
// another.
func testIdentity(t *testing.T, db *DB) {
	first := db.Open(t)
	id := storeID(t, first)
	if !storeIDForm.MatchString(id) {
		t.Fatalf("StoreID = %q, want 32 hexadecimal digits", id)
	}
	for range 2 {
		if again := storeID(t, first); again != id {
			t.Fatalf("StoreID read again = %q, was %q", again, id)
		}
	}
	if other := storeID(t, db.Open(t)); other != id {
		t.Fatalf("a second handle on the store: StoreID = %q, the first said %q", other, id)
	}
	ro := db.OpenWith(t, func(o *persist.Options) { o.ReadOnly = true; o.CreateSchema = false })
	if got := storeID(t, ro); got != id {
		t.Fatalf("a read-only handle: StoreID = %q, want %q", got, id)
	}
}

// testIdentityRace: handles opened at once on a fresh store agree on one
// identity (the first write wins, the others read it).
func testIdentityRace(t *testing.T, db *DB) {
	const n = 4
	ids := make(chan string, n)
	stores := make(chan persist.Store, n)
	for range n {
		go func() {
			s, err := db.open(t, testOptions())
			if err != nil {
				t.Error(err)
				ids <- ""
				stores <- nil
				return
			}
			stores <- s
			i, _ := s.(persist.Identified)
			id, err := i.StoreID(t.Context())
			if err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	seen := map[string]bool{}
	for range n {
		seen[<-ids] = true
		if s := <-stores; s != nil {
			closeOnCleanup(t, s)
		}
	}
	if len(seen) != 1 || seen[""] {
		t.Fatalf("handles opened at once read identities %v, want one", seen)
	}
}
