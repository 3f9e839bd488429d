package mysql_test

import (
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
)

// durability opens a store on dsn and returns its durability check.
func replication(t *testing.T, dsn string) durability.Replication {
	t.Helper()
	s, err := mysql.Open(t.Context(), dsn, persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r, err := s.Durability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (members %d, sync %d, async %d, state %q)", r, r.Members, r.Sync, r.Async, r.State)
	return r
}

// A single MariaDB, as scripts/mariadb.sh starts it (--skip-log-bin):
// nothing replicates from it.
func TestDurabilitySingle(t *testing.T) {
	r := replication(t, mysqltest.DSN(t))
	if r.Kind != durability.ReplicationSingle || r.Safety != durability.Safe || r.Members != 1 || r.Sync != 0 || r.Async != 0 ||
		!strings.Contains(r.Reason, "the binary log is off") {
		t.Errorf("got %+v, want a single server, safe, its binary log off", r)
	}
}

// A three-node Galera cluster, through HAProxy and on each node: every
// commit is certified by the whole cluster, in its primary component.
func TestDurabilityGalera(t *testing.T) {
	dsns := append([]string{mysqltest.GaleraDSN(t)}, mysqltest.GaleraNodes(t)...)
	for _, dsn := range dsns {
		r := replication(t, dsn)
		if r.Kind != durability.ReplicationGalera || r.Safety != durability.Safe || r.Members != 3 || r.State != "Primary" ||
			!strings.Contains(r.Reason, "certified by the 3 nodes") {
			t.Errorf("got %+v, want Galera, safe, 3 nodes in the primary component", r)
		}
	}
}
