package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
)

// EnvMySQLDSN names the environment variable that holds the DSN of a MySQL
// or MariaDB user allowed to create and drop databases named leaf*.
const EnvMySQLDSN = "LEAF_TEST_MYSQL_DSN"

// testOptions are generous: under -race and 50 goroutines a busy machine
// must not turn into a flaky timeout.
func testOptions() persist.Options {
	return persist.Options{
		CreateSchema: true,
		BusyTimeout:  30 * time.Second,
		QueryTimeout: 30 * time.Second,
	}
}

// SQLite prepares a fresh SQLite database file in t.TempDir() and returns
// an Opener on it.
func SQLite(t *testing.T) Opener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "leaf.db")
	return func(t *testing.T) persist.Store {
		t.Helper()
		s, err := persist.OpenSQLite(t.Context(), path, testOptions())
		if err != nil {
			t.Fatalf("OpenSQLite: %v", err)
		}
		closeOnCleanup(t, s)
		return s
	}
}

// MySQL prepares a fresh database (see MySQLDSN) and returns an Opener on
// it. It skips or fails the test as MySQLDSN does.
func MySQL(t *testing.T) Opener {
	t.Helper()
	dsn := MySQLDSN(t)
	return func(t *testing.T) persist.Store {
		t.Helper()
		s, err := persist.OpenMySQL(t.Context(), dsn, testOptions())
		if err != nil {
			t.Fatalf("OpenMySQL: %v", err)
		}
		closeOnCleanup(t, s)
		return s
	}
}

func closeOnCleanup(t *testing.T, s persist.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// MySQLDSN returns the DSN of a new, empty database with a random name
// (leaf_test_<hex>), created with the DSN in LEAF_TEST_MYSQL_DSN and dropped
// by t.Cleanup, so tests never see each other's rows. When the variable is
// unset the test is skipped, except on CI (CI=true), where it fails.
func MySQLDSN(t *testing.T) string {
	t.Helper()
	admin := os.Getenv(EnvMySQLDSN)
	if admin == "" {
		const how = EnvMySQLDSN + " is not set; start a throwaway MariaDB with " +
			"`eval \"export $(scripts/mariadb.sh start /tmp/leaf-mariadb)\"` " +
			"(stop it with `scripts/mariadb.sh stop /tmp/leaf-mariadb`)"
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQLDSN, err)
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
func adminExec(t *testing.T, cfg *mysql.Config, stmt string) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQLDSN, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	// Not t.Context(): it is already cancelled when Cleanup runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s (%s): %v", stmt, persist.RedactDSN(cfg.FormatDSN()), err)
	}
}
