package postgres_test

import (
	"net/url"
	"testing"

	"github.com/leaf-id/leaf/internal/roundtrip"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
	"github.com/leaf-id/leaf/persist/storetest"
)

// TestTakeRoundTrips: BEGIN, the guard's row, the rows read and locked,
// max_id (and the range read back for a size), the guard, COMMIT: a bound
// that catches a statement added; one statement in autocommit would be 1.
func TestTakeRoundTrips(t *testing.T) {
	u, err := url.Parse(postgrestest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := roundtrip.Start(t, u.Host)
	u.Host = proxy.Addr()
	s, err := postgres.Open(t.Context(), u.String(), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.TakeRoundTrips(t, s, proxy, 7)
}
