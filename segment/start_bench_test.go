package segment

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
)

// BenchmarkStart100kTags is leaf's start-up with 100,000 tags on SQLite:
// Allocator.Start reads the tag list and makes every tag (segments load on
// first use). One op is one start; B/tag is the heap the idle tags keep.
func BenchmarkStart100kTags(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "leaf.db")
	st, err := sqlite.Open(ctx, path, persist.Options{CreateSchema: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", path) // the driver persist registers
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?)
		INSERT INTO leaf_alloc (biz_tag, max_id, step) SELECT printf('service-%06d', i), 1, 1000 FROM s`, n)
	db.Close()
	if err != nil {
		b.Fatal(err)
	}

	var perTag float64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		a := New(st, DefaultOptions())
		b.StartTimer()
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := a.Stats().Tags; got != n {
			b.Fatalf("%d tags, want %d", got, n)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		perTag = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
		a.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(perTag, "B/tag")
}
