package e2e

import (
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// The durability check as users see it: leaf reads how its database
// replicates before it serves, logs it, warns when a failover could lose
// ranges already handed out (and so repeat IDs), and shows the result in
// INFO leaf, LEAF.INFO and /metrics.

// durabilityWant is what a leaf on one store must report.
type durabilityWant struct {
	kind, durability string
	members          string // INFO's store_replication_members
	state            string // INFO's store_replication_state
	reason           string // a part of the reason
}

// checkDurability starts a leaf with env and checks its report.
func checkDurability(t *testing.T, env []string, want durabilityWant) {
	t.Helper()
	p := startLeaf(t, t.TempDir(), append([]string{"LEAF_HTTP_ADDR=127.0.0.1:0"}, env...)...)
	log := p.Log()
	// Both lines come before "serving": the check runs at start.
	result := `msg="store replication" kind=` + want.kind + ` durability=` + want.durability + ` members=` + want.members
	if !strings.Contains(log, result) {
		t.Errorf("no %q line in the log:\n%s", result, log)
	}
	warned := strings.Contains(log, `level=WARN msg="`+durability.WarnMessage)
	if unsafe := want.durability == "unsafe"; warned != unsafe {
		t.Errorf("warned %v, unsafe %v:\n%s", warned, unsafe, log)
	}
	c := p.client(t)
	info := infoLeaf(t, c)
	for k, v := range map[string]string{
		"store_replication": want.kind, "store_durability": want.durability,
		"store_replication_members": want.members, "store_replication_state": want.state,
	} {
		if info[k] != v {
			t.Errorf("INFO leaf %s = %q, want %q", k, info[k], v)
		}
	}
	if !strings.Contains(info["store_durability_reason"], want.reason) {
		t.Errorf("INFO leaf store_durability_reason = %q, want it to say %q", info["store_durability_reason"], want.reason)
	}
	if advice := info["store_durability_advice"]; (want.durability == "unsafe") != (advice != "") {
		t.Errorf("INFO leaf store_durability_advice = %q with %s", advice, want.durability)
	}
	redistest.Incr(t, c, "durable")
	if f := redistest.LeafInfo(t, c, "durable"); f["store_replication"] != want.kind || f["store_durability"] != want.durability {
		t.Errorf("LEAF.INFO store_replication %v, store_durability %v", f["store_replication"], f["store_durability"])
	}
	_, body := httpGet(t, p.httpBase(t)+"/metrics")
	series := `leaf_store_replication_safe{durability="` + want.durability + `",kind="` + want.kind + `"}`
	value := "0"
	if want.durability == "safe" {
		value = "1"
	}
	if !strings.Contains(body, "\n"+series+" "+value+"\n") {
		t.Errorf("/metrics lacks %s %s", series, value)
	}
}

// A leaf on a PostgreSQL primary that a standby streams from
// asynchronously (scripts/postgres.sh replica): a failover to the standby
// can lose the last ranges taken, and leaf says so at start.
func TestDurabilityAsyncPostgres(t *testing.T) {
	t.Parallel()
	dsn := postgrestest.NewDatabase(t, postgrestest.AsyncPrimary(t))
	checkDurability(t, []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + dsn}, durabilityWant{
		kind: "postgres_streaming", durability: "unsafe", members: "2",
		reason: "1 standby streams asynchronously (synchronous_standby_names is empty)",
	})
}

// Patroni with synchronous_mode, through the DSN of every node: safe.
func TestDurabilityPatroni(t *testing.T) {
	t.Parallel()
	dsn := postgrestest.NewDatabase(t, postgrestest.Patroni(t))
	checkDurability(t, []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + dsn}, durabilityWant{
		kind: "postgres_streaming", durability: "safe", members: "3",
		reason: "a commit waits for the standbys of synchronous_standby_names",
	})
}

// A three-node Galera cluster through HAProxy: safe.
func TestDurabilityGalera(t *testing.T) {
	t.Parallel()
	checkDurability(t, []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + mysqltest.GaleraDSN(t)}, durabilityWant{
		kind: "galera", durability: "safe", members: "3", state: "Primary",
		reason: "every commit is certified by the 3 nodes of the Galera cluster",
	})
}

// A single MariaDB, a single PostgreSQL, and the default SQLite file: one
// server each, safe.
func TestDurabilitySingle(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		checkDurability(t, nil, durabilityWant{kind: "single", durability: "safe", members: "1", reason: "one SQLite file"})
	})
	t.Run("mariadb", func(t *testing.T) {
		checkDurability(t, []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + mysqltest.DSN(t)}, durabilityWant{
			kind: "single", durability: "safe", members: "1", reason: "the binary log is off",
		})
	})
	t.Run("postgres", func(t *testing.T) {
		checkDurability(t, []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + postgrestest.DSN(t)}, durabilityWant{
			kind: "single", durability: "safe", members: "1", reason: "no standby streams from this server",
		})
	})
}
