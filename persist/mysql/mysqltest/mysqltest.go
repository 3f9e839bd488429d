// Package mysqltest gives tests a fresh database of their own on a real
// MySQL or MariaDB (the one scripts/mariadb.sh starts), for the
// conformance suite and for other packages' tests.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
	leafmysql "github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/storetest"
)

// LeafDDL is leaf_alloc's CREATE TABLE exactly as Meituan Leaf's README
// gives it, for tests of existing Leaf databases.
const LeafDDL = "CREATE TABLE `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256)  DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// EnvDSN names the environment variable that holds the DSN of a MySQL or
// MariaDB user allowed to create and drop databases named leaf*.
const EnvDSN = "LEAF_TEST_MYSQL_DSN"

// DB prepares a fresh database (see DSN) for the conformance suite. It
// skips or fails the test as DSN does.
func DB(t *testing.T) *storetest.DB {
	t.Helper()
	dsn := DSN(t)
	return storetest.NewDB(t, "mysql", dsn, func(t *testing.T, opts persist.Options) (persist.Store, error) {
		return leafmysql.Open(t.Context(), dsn, opts)
	})
}

// DSN returns the DSN of a new, empty database with a random name
// (leaf_test_<hex>), created with the DSN in LEAF_TEST_MYSQL_DSN and dropped
// by t.Cleanup, so tests never see each other's rows. When the variable is
// unset the test is skipped, except on CI (CI=true), where it fails.
func DSN(t testing.TB) string {
	t.Helper()
	admin := storetest.EnvDSN(t, EnvDSN, "start a throwaway MariaDB with "+
		"`eval \"export $(scripts/mariadb.sh start /tmp/leaf-mariadb)\"` "+
		"(stop it with `scripts/mariadb.sh stop /tmp/leaf-mariadb`)")
	return newDatabase(t, EnvDSN, admin)
}

// newDatabase creates a database with a random name (leaf_test_<hex>) with
// admin, the DSN of env, drops it with t.Cleanup, and returns admin's DSN
// on it.
func newDatabase(t testing.TB, env, admin string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "leaf_test_" + hex.EncodeToString(b)

	adminExec(t, cfg, "CREATE DATABASE "+name)
	t.Cleanup(func() { adminExec(t, cfg, "DROP DATABASE IF EXISTS "+name) })
	cfg = cfg.Clone()
	cfg.DBName = name
	return cfg.FormatDSN()
}

// The environment of a Galera cluster's tests (scripts/galera.sh).
const (
	// EnvGaleraDSN holds the DSN of the cluster through its proxy.
	EnvGaleraDSN = "LEAF_TEST_GALERA_DSN"
	// EnvGaleraNodes holds the DSNs of its nodes, comma-separated.
	EnvGaleraNodes = "LEAF_TEST_GALERA_NODES"
	// EnvGaleraDir holds the directory scripts/galera.sh kills and
	// restarts its nodes in.
	EnvGaleraDir = "LEAF_TEST_GALERA_DIR"
)

const galeraHow = "start a throwaway Galera cluster with " +
	"`scripts/galera.sh start /tmp/leaf-galera` and export what it prints " +
	"(stop it with `scripts/galera.sh destroy /tmp/leaf-galera`)"

// GaleraDSN is DSN on the Galera cluster of LEAF_TEST_GALERA_DSN, through
// its proxy: a fresh database, dropped by t.Cleanup.
func GaleraDSN(t testing.TB) string {
	t.Helper()
	return galeraDSN(t, false)
}

// GaleraDSNAlone is GaleraDSN for a test that kills the cluster's nodes:
// it holds the cluster alone (GaleraLock) until it ends.
func GaleraDSNAlone(t testing.TB) string {
	t.Helper()
	return galeraDSN(t, true)
}

func galeraDSN(t testing.TB, alone bool) string {
	t.Helper()
	admin := storetest.EnvDSN(t, EnvGaleraDSN, galeraHow)
	GaleraLock(t, alone)
	return newDatabase(t, EnvGaleraDSN, admin)
}

// GaleraLock holds a lock on the cluster of LEAF_TEST_GALERA_DIR until t
// ends: shared by the tests that only use it, exclusive for one that kills
// its nodes, so that tests of other packages, run at the same time, do
// not see their nodes die. A test takes it once (a second lock of the
// same process waits for the first). A no-op without LEAF_TEST_GALERA_DIR.
func GaleraLock(t testing.TB, exclusive bool) {
	t.Helper()
	dir := os.Getenv(EnvGaleraDir)
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("%s: %v", EnvGaleraDir, err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock the Galera cluster: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
}

// GaleraNodes is a fresh database on the Galera cluster of
// LEAF_TEST_GALERA_NODES, dropped by t.Cleanup, and its DSN on each node:
// a store per node, as servers each on their own node use it. It returns
// once every node has the database.
func GaleraNodes(t testing.TB) []string {
	t.Helper()
	nodes := strings.Split(storetest.EnvDSN(t, EnvGaleraNodes, galeraHow), ",")
	GaleraLock(t, false)
	first := newDatabase(t, EnvGaleraNodes, nodes[0])
	cfg, err := mysql.ParseDSN(first)
	if err != nil {
		t.Fatal(err)
	}
	dsns := make([]string, len(nodes))
	for i, node := range nodes {
		c, err := mysql.ParseDSN(node)
		if err != nil {
			t.Fatalf("%s: %v", EnvGaleraNodes, err)
		}
		c.DBName = cfg.DBName
		dsns[i] = c.FormatDSN()
		// A causal read waits until the node applied the CREATE DATABASE.
		c = c.Clone()
		c.DBName = ""
		c.Params = map[string]string{"wsrep_sync_wait": "1"}
		var n int
		queryAdmin(t, c, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '"+cfg.DBName+"'", &n)
		if n != 1 {
			t.Fatalf("node %d has no database %s after a causal read", i+1, cfg.DBName)
		}
	}
	return dsns
}

// queryAdmin reads one value on a short-lived connection.
func queryAdmin(t testing.TB, cfg *mysql.Config, query string, dest any) {
	t.Helper()
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, query).Scan(dest); err != nil {
		t.Fatalf("%s (on %s): %v", query, cfg.Addr, err)
	}
}

// adminExec runs one statement on a short-lived connection, without a
// database selected (the admin DSN's database may not exist).
func adminExec(t testing.TB, cfg *mysql.Config, stmt string) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	// Not t.Context(): it is already cancelled when Cleanup runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s (on %s as %s): %v", stmt, cfg.Addr, cfg.User, err)
	}
}

// User creates a user of its own for the test (leaf_u_<hex>, from any
// host, with a random password), dropped by t.Cleanup, gives it grants on
// the database of dsn, and returns dsn logging in as that user. Each grant
// is "PRIVILEGES ON OBJECT", OBJECT a table of that database or "*" (the
// whole database), e.g. "SELECT, UPDATE ON leaf_alloc": the grants a DBA
// gives an application. It needs the user of LEAF_TEST_MYSQL_DSN to create
// users and grant on the test databases (scripts/mariadb.sh's may).
func User(t testing.TB, dsn string, grants ...string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "leaf_u_" + hex.EncodeToString(b[:4])
	pw := hex.EncodeToString(b)
	account := "'" + name + "'@'%'"
	adminExec(t, cfg, "CREATE USER "+account+" IDENTIFIED BY '"+pw+"'")
	t.Cleanup(func() { adminExec(t, cfg, "DROP USER IF EXISTS "+account) })
	for _, g := range grants {
		privs, object, ok := strings.Cut(g, " ON ")
		if !ok {
			t.Fatalf("grant %q: want PRIVILEGES ON OBJECT", g)
		}
		adminExec(t, cfg, "GRANT "+privs+" ON `"+cfg.DBName+"`."+object+" TO "+account)
	}
	user := cfg.Clone()
	user.User, user.Passwd = name, pw
	return user.FormatDSN()
}
