package persist_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/storetest"
)

// BenchmarkTake is one Take (one transaction) per op, on one tag, on each
// backend: the cost of a segment load, which the allocator pays once per
// segment (a cached ID costs no database call at all).
func BenchmarkTake(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) persist.Store
	}{
		{"SQLite", func(b *testing.B) persist.Store {
			s, err := persist.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "leaf.db"), benchOptions())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"MySQL", func(b *testing.B) persist.Store {
			s, err := persist.OpenMySQL(b.Context(), storetest.MySQLDSN(b), benchOptions())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			defer s.Close()
			ctx := context.Background()
			if _, err := s.Create(ctx, "t", 1000, ""); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Take(ctx, "t", 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchOptions() persist.Options {
	return persist.Options{CreateSchema: true, QueryTimeout: 30 * time.Second}
}
