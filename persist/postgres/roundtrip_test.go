package postgres_test

import (
	"net/url"
	"testing"

	"github.com/leaf-id/leaf/internal/roundtrip"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// TestTakeRoundTrips: a segment load costs a fixed, small number of round
// trips to the database, counted by a proxy between leaf and PostgreSQL:
// on a distant database each is a wait that the load adds up.
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
	if _, err := s.Create(t.Context(), "rt", 1000, ""); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a connection in the pool, its statements prepared
		if _, err := s.Take(t.Context(), "rt", 0); err != nil {
			t.Fatal(err)
		}
	}
	// BEGIN, the guard's row, the rows read and locked, max_id (and the
	// range read back for a size), the guard, COMMIT: a bound that
	// catches a statement added; one statement in autocommit would be 1.
	const most = 7
	for _, size := range []int64{0, 5000} {
		proxy.Reset()
		if _, err := s.Take(t.Context(), "rt", size); err != nil {
			t.Fatal(err)
		}
		if n := proxy.Trips(); n > most {
			t.Errorf("Take(size %d): %d round trips, want at most %d", size, n, most)
		}
		t.Logf("Take(size %d): %d round trips", size, proxy.Trips())
	}
	proxy.Reset()
	reqs := []persist.TakeRequest{{Tag: "rt"}, {Tag: "rt2", Create: 1000}, {Tag: "rt3", Create: 1000}}
	for i, r := range s.TakeBatch(t.Context(), reqs) {
		if r.Err != nil {
			t.Fatalf("TakeBatch %s: %v", reqs[i].Tag, r.Err)
		}
	}
	t.Logf("TakeBatch of 3 tags, 2 new: %d round trips", proxy.Trips())
}
