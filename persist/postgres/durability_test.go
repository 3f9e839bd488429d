package postgres_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// durability opens a store on dsn and returns its durability check.
func replication(t *testing.T, dsn string) durability.Replication {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r, err := s.Durability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (members %d, sync %d, async %d)", r, r.Members, r.Sync, r.Async)
	return r
}

// check fails the test unless r is of kind, safety, members, sync and
// async replicas, and its reason says want.
func check(t *testing.T, r durability.Replication, kind string, safety durability.Safety, members, sync, async int, want string) {
	t.Helper()
	if r.Kind != kind || r.Safety != safety || r.Members != members || r.Sync != sync || r.Async != async {
		t.Errorf("got %s %s, members %d, sync %d, async %d; want %s %s, members %d, sync %d, async %d",
			r.Kind, r.Safety, r.Members, r.Sync, r.Async, kind, safety, members, sync, async)
	}
	if !strings.Contains(r.Reason, want) {
		t.Errorf("reason %q, want it to say %q", r.Reason, want)
	}
	if (r.Safety == durability.Unsafe) != (r.Advice != "") {
		t.Errorf("%s with advice %q", r.Safety, r.Advice)
	}
}

// statsRole creates a role that may read pg_read_all_stats (and so see
// which standbys are synchronous), dropped by t.Cleanup after the
// databases the test creates afterwards, and returns its name and
// password.
func statsRole(t *testing.T, admin string) (string, string) {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name, password := "leaf_stats_"+hex.EncodeToString(b), hex.EncodeToString(b)
	postgrestest.Exec(t, admin, "CREATE ROLE "+name+" LOGIN PASSWORD '"+password+"'", "GRANT pg_read_all_stats TO "+name)
	t.Cleanup(func() { postgrestest.Exec(t, admin, "DROP ROLE IF EXISTS "+name) })
	return name, password
}

// asRole is dsn logging in as role, with every right on leaf's tables in
// its database.
func asRole(t *testing.T, dsn, role, password string) string {
	t.Helper()
	postgrestest.Exec(t, dsn, "GRANT USAGE, CREATE ON SCHEMA public TO "+role, "GRANT ALL ON ALL TABLES IN SCHEMA public TO "+role)
	return postgrestest.WithUser(t, dsn, role, password)
}

// A single PostgreSQL, as scripts/postgres.sh starts it: no standby, a
// commit is as safe as the disk. With synchronous_commit off for leaf's
// sessions a commit is acknowledged before it is written: unsafe even
// alone.
func TestDurabilitySingle(t *testing.T) {
	dsn := postgrestest.DSN(t)
	check(t, replication(t, dsn), durability.ReplicationSingle, durability.Safe, 1, 0, 0, "no standby streams from this server")
	off := postgrestest.WithParam(t, dsn, "synchronous_commit", "off")
	check(t, replication(t, off), durability.ReplicationSingle, durability.Unsafe, 1, 0, 0, "synchronous_commit = off")
}

// The check answers through the store a server uses, which opens the
// database lazily.
func TestDurabilityDeferred(t *testing.T) {
	s, err := postgres.OpenDeferred(t.Context(), postgrestest.DSN(t), persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := durability.Read(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	check(t, r, durability.ReplicationSingle, durability.Safe, 1, 0, 0, "no standby streams from this server")
}

// A primary with a standby streaming asynchronously (scripts/postgres.sh
// replica), synchronous_standby_names empty: a failover to the standby
// can lose the last commits. An ordinary role sees that a standby
// streams, not how; one with pg_read_all_stats sees it asynchronous.
// synchronous_commit = local is no better than an empty
// synchronous_standby_names.
func TestDurabilityAsyncStandby(t *testing.T) {
	admin := postgrestest.AsyncPrimary(t)
	role, password := statsRole(t, admin)
	dsn := postgrestest.NewDatabase(t, admin)
	check(t, replication(t, dsn), durability.ReplicationPostgres, durability.Unsafe, 2, -1, -1,
		"1 standby streams asynchronously (synchronous_standby_names is empty)")
	check(t, replication(t, asRole(t, dsn, role, password)), durability.ReplicationPostgres, durability.Unsafe, 2, 0, 1,
		"1 standby streams asynchronously")
	local := postgrestest.WithParam(t, dsn, "synchronous_commit", "local")
	check(t, replication(t, local), durability.ReplicationPostgres, durability.Unsafe, 2, -1, -1,
		"1 standby streams asynchronously")
}

// Three nodes under Patroni with synchronous_mode: the primary's commits
// wait for one synchronous standby, and Patroni promotes only that one.
// The DSN lists every node; the check reads the primary, which shows both
// standbys: with pg_read_all_stats, one synchronous, one potential.
// synchronous_commit = local in the DSN undoes it.
func TestDurabilityPatroni(t *testing.T) {
	admin := postgrestest.Patroni(t)
	role, password := statsRole(t, admin)
	dsn := postgrestest.NewDatabase(t, admin)
	check(t, replication(t, dsn), durability.ReplicationPostgres, durability.Safe, 3, -1, -1,
		"a commit waits for the standbys of synchronous_standby_names")
	check(t, replication(t, asRole(t, dsn, role, password)), durability.ReplicationPostgres, durability.Safe, 3, 1, 1,
		"a commit waits for 1 synchronous standby")
	local := postgrestest.WithParam(t, dsn, "synchronous_commit", "local")
	check(t, replication(t, local), durability.ReplicationPostgres, durability.Unsafe, 3, -1, -1,
		"synchronous_commit = local")
}
