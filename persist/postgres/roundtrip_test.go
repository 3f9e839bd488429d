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

// TestTakeRoundTrips: a Take with the guard is one statement in
// autocommit, one round trip (the bound of the issue is 2).
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
	storetest.TakeRoundTrips(t, s, proxy, 1)
}
