package postgres_test

import (
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
	"github.com/leaf-id/leaf/persist/storetest"
)

func BenchmarkTake(b *testing.B) {
	s, err := postgres.Open(b.Context(), postgrestest.DSN(b), storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTake(b, s)
}

// TestNoStoreWaitsAfterWarmup: at 200,000 IDs a second on one tag, once
// the step has grown, the allocator never waits on PostgreSQL.
func TestNoStoreWaitsAfterWarmup(t *testing.T) {
	s, err := postgres.Open(t.Context(), postgrestest.DSN(t), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	storetest.NoWaitsAfterWarmup(t, s)
}
