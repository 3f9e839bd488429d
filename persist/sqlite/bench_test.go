package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/persist/storetest"
)

func BenchmarkTake(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "leaf.db"), storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTake(b, s)
}

func BenchmarkTakeBatch(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "leaf.db"), storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTakeBatch(b, s, 1000)
}
