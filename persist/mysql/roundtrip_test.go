package mysql_test

import (
	"testing"

	"github.com/leaf-id/leaf/internal/roundtrip"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/storetest"
)

// TestTakeRoundTrips: a Take with the guard sends its statements together,
// parameters interpolated by the driver, then COMMIT: two round trips
// (one statement per round trip made it 6, a server-side prepare per
// statement 10).
func TestTakeRoundTrips(t *testing.T) {
	dsn := mysqltest.DSN(t)
	proxy := roundtrip.Start(t, dsnAddr(t, dsn))
	s, err := mysql.Open(t.Context(), viaAddr(t, dsn, proxy.Addr()), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.TakeRoundTrips(t, s, proxy, 2)
}
