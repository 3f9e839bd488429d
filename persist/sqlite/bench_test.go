package sqlite_test

import (
	"fmt"
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

func BenchmarkGiveBackBatch(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "leaf.db"), storetest.BenchOptions())
			if err != nil {
				b.Fatal(err)
			}
			storetest.BenchmarkGiveBackBatch(b, s, 200_000, 5000, fenced) // as Close sends them
		})
	}
}
