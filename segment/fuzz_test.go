package segment

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzValidTag: the tag validator never panics, accepts exactly the names
// the store can hold as data, and a name it accepts is usable end to end.
func FuzzValidTag(f *testing.F) {
	for _, s := range []string{"order", "", "a b", "a ", "x'; DROP TABLE leaf_alloc; --", "%_", "é", "\x00", "a\r\nb", "\xff", "\u0085"} {
		f.Add([]byte(s))
	}
	store := newFakeStore(nil)
	a := New(store, testOptions(nil))
	f.Cleanup(func() { _ = a.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, name []byte) {
		err := ValidTag(name)
		if err != nil {
			if !errors.Is(err, ErrBadTag) {
				t.Fatalf("ValidTag(%q) = %v, want ErrBadTag", name, err)
			}
			// As the server asks, in database 0 and in another one.
			for _, db := range []int{0, 3} {
				if _, err := a.Lookup(context.Background(), AppendDBName(nil, db, name)); !errors.Is(err, ErrBadTag) {
					t.Fatalf("Lookup(%q in database %d) accepted a name ValidTag refuses: %v", name, db, err)
				}
			}
			return
		}
		switch {
		case len(name) == 0 || len(name) > MaxTagLen:
			t.Fatalf("accepted %d bytes", len(name))
		case !utf8.Valid(name):
			t.Fatalf("accepted invalid UTF-8 %q", name)
		case bytes.ContainsAny(name, "\x00\r\n\t\x7f"):
			t.Fatalf("accepted a control character in %q", name)
		case name[len(name)-1] == ' ':
			t.Fatalf("accepted a trailing space in %q", name)
		}
		id, err := a.Next(context.Background(), DBName(0, string(name)))
		if err != nil || id < 1 {
			t.Fatalf("Next(%q) = %d, %v", name, id, err)
		}
	})
}
