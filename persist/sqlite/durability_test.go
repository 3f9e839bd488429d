package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/sqlite"
)

// One file on one disk: a single server, safe as far as leaf can tell.
func TestDurability(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "leaf.db"), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := durability.Read(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != durability.ReplicationSingle || r.Safety != durability.Safe || r.Members != 1 || r.Sync != 0 || r.Async != 0 {
		t.Errorf("got %+v, want a single server, safe", r)
	}
}
