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
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
	leafmysql "github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/storetest"
)

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
	admin := os.Getenv(EnvDSN)
	if admin == "" {
		const how = EnvDSN + " is not set; start a throwaway MariaDB with " +
			"`eval \"export $(scripts/mariadb.sh start /tmp/leaf-mariadb)\"` " +
			"(stop it with `scripts/mariadb.sh stop /tmp/leaf-mariadb`)"
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
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
