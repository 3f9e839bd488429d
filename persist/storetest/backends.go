package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
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

// DB is a fresh, empty database of one backend, prepared for one test:
// handles on it through persist, and direct SQL on it, as an operator (or
// another tool) would run by hand.
type DB struct {
	open func(t *testing.T, opts persist.Options) (persist.Store, error)
	raw  *sql.DB
}

// Open opens a new, independent handle with the suite's options (schema
// created), closed by t.Cleanup. It is an Opener.
func (db *DB) Open(t *testing.T) persist.Store {
	t.Helper()
	return db.OpenWith(t, func(*persist.Options) {})
}

// OpenWith is Open with the suite's options changed by edit first.
func (db *DB) OpenWith(t *testing.T, edit func(*persist.Options)) persist.Store {
	t.Helper()
	opts := testOptions()
	edit(&opts)
	s, err := db.open(t, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	closeOnCleanup(t, s)
	return s
}

// Exec runs one statement on the database directly.
func (db *DB) Exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	if _, err := db.raw.ExecContext(t.Context(), stmt, args...); err != nil {
		t.Fatalf("%s %v: %v", stmt, args, err)
	}
}

// Int runs a query of one integer directly; ok is false when it matches
// no row.
func (db *DB) Int(t *testing.T, query string, args ...any) (n int64, ok bool) {
	t.Helper()
	err := db.raw.QueryRowContext(t.Context(), query, args...).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("%s %v: %v", query, args, err)
	}
	return n, true
}

// rawDB opens a plain handle for DB.Exec, closed by t.Cleanup.
func rawDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", driver, err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

// SQLite prepares a fresh SQLite database file in t.TempDir().
func SQLite(t *testing.T) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "leaf.db")
	// The driver persist registers; the busy timeout as the suite's.
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(path)}).EscapedPath() + "?_busy_timeout=30000"
	return &DB{
		open: func(t *testing.T, opts persist.Options) (persist.Store, error) {
			return persist.OpenSQLite(t.Context(), path, opts)
		},
		raw: rawDB(t, "sqlite", dsn),
	}
}

// MySQL prepares a fresh database (see MySQLDSN). It skips or fails the
// test as MySQLDSN does.
func MySQL(t *testing.T) *DB {
	t.Helper()
	dsn := MySQLDSN(t)
	return &DB{
		open: func(t *testing.T, opts persist.Options) (persist.Store, error) {
			return persist.OpenMySQL(t.Context(), dsn, opts)
		},
		raw: rawDB(t, "mysql", dsn),
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
func MySQLDSN(t testing.TB) string {
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
func adminExec(t testing.TB, cfg *mysql.Config, stmt string) {
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
