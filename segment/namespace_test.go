package segment

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestDBNames(t *testing.T) {
	cases := []struct {
		db       int
		name     string
		stored   string
		validErr string // "" when the stored name is valid
	}{
		{0, "order", "order", ""},
		{1, "order", "\x1f1\x1forder", ""},
		{15, "a b", "\x1f15\x1fa b", ""},
		{1, strings.Repeat("x", MaxTagLen-3), "\x1f1\x1f" + strings.Repeat("x", MaxTagLen-3), ""},
		{1, strings.Repeat("x", MaxTagLen-2), "\x1f1\x1f" + strings.Repeat("x", MaxTagLen-2), "126 bytes, the limit is 125"},
		{10, "", "\x1f10\x1f", "empty"},
		{2, "a\x1fb", "\x1f2\x1fa\x1fb", "control character U+001F"},
	}
	for _, tc := range cases {
		stored := string(AppendDBName(nil, tc.db, []byte(tc.name)))
		if stored != tc.stored {
			t.Errorf("AppendDBName(%d, %q) = %q, want %q", tc.db, tc.name, stored, tc.stored)
		}
		if db, name := SplitDBName(stored); db != tc.db || name != tc.name {
			t.Errorf("SplitDBName(%q) = %d, %q", stored, db, name)
		}
		err := validTag(stored)
		if tc.validErr == "" && err != nil || tc.validErr != "" && (err == nil || !strings.Contains(err.Error(), tc.validErr)) {
			t.Errorf("validTag(%q) = %v, want %q", stored, err, tc.validErr)
		}
	}
	// No stored name of a database n > 0 is a name a user may give, so
	// none collides with a tag of database 0, nor passes ValidTag; and a
	// prefix that is not canonical is no database's.
	// A name typed in database 0 that looks like a stored name of another
	// database does not reach that database's tag: it stays refused.
	for _, typed := range []string{"\x1f1\x1fa", "\x1f", "\x1f15\x1fa b"} {
		stored := DBName(0, typed)
		if db, _ := SplitDBName(stored); db != 0 {
			t.Errorf("DBName(0, %q) = %q, a name of database %d", typed, stored, db)
		}
		if err := validTag(stored); err == nil {
			t.Errorf("validTag(DBName(0, %q)) accepts it", typed)
		}
	}
	for _, bad := range []string{"\x1f1\x1fa", "\x1f0\x1fa", "\x1f01\x1fa", "\x1f\x1fa", "\x1fx\x1fa", "\x1f12345678901\x1fa"} {
		if ValidTag([]byte(bad)) == nil {
			t.Errorf("ValidTag(%q) accepts a stored name", bad)
		}
		if db, _ := SplitDBName(bad); db != 0 && bad != "\x1f1\x1fa" {
			t.Errorf("SplitDBName(%q) = db %d, want 0", bad, db)
		}
	}
}

func TestExistsAndCreateFloor(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore(map[string]int64{"old": 10})
	a := newTestAllocator(t, store, testOptions(nil))
	for name, want := range map[string]bool{"old": true, "new": false, "bad\n": false} {
		if got, err := a.Exists(ctx, name); err != nil || got != want {
			t.Errorf("Exists(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := store.Tag(ctx, "new"); err == nil {
		t.Fatal("Exists created the row")
	}
	oldMax := store.db.MaxID("old")
	if created, err := a.CreateFloor(ctx, "old", 100); err != nil || created {
		t.Fatalf("CreateFloor of an existing tag = %v, %v", created, err)
	}
	if got := store.db.MaxID("old"); got != oldMax {
		t.Fatalf("CreateFloor of an existing tag moved max_id from %d to %d", oldMax, got)
	}
	if created, err := a.CreateFloor(ctx, "new", 100); err != nil || !created {
		t.Fatalf("CreateFloor = %v, %v", created, err)
	}
	if id, err := a.Next(ctx, "new"); err != nil || id != 101 {
		t.Fatalf("first ID after CreateFloor 100 = %d, %v; want 101", id, err)
	}
	if created, err := a.CreateFloor(ctx, "new", 5); err != nil || created {
		t.Fatalf("CreateFloor again = %v, %v", created, err)
	}
	if _, err := a.CreateFloor(ctx, "x", MaxFloor+1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("CreateFloor beyond MaxFloor: %v", err)
	}
	names := a.Names()
	if len(names) != a.NumTags() || a.NumTags() != 2 {
		t.Fatalf("Names() = %q, NumTags() = %d", names, a.NumTags())
	}
}
