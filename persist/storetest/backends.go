package storetest

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// testOptions are the suite's: schema created, and generous timeouts,
// because under -race and 50 goroutines a busy machine must not turn into
// a flaky timeout.
func testOptions() persist.Options {
	return persist.Options{
		CreateSchema: true,
		BusyTimeout:  30 * time.Second,
		QueryTimeout: 30 * time.Second,
	}
}

// OpenFunc opens a new handle with opts on a backend's database.
type OpenFunc func(t *testing.T, opts persist.Options) (persist.Store, error)

// DB is a fresh, empty database of one backend, prepared for one test:
// handles on it through persist, and direct SQL on it, as an operator (or
// another tool) would run by hand.
type DB struct {
	open OpenFunc
	raw  *sql.DB
}

// NewDB is a backend's fresh database for the suite: open opens handles on
// it; driverName and dsn (database/sql's, the driver registered by the
// backend's package) give DB.Exec and DB.Int their own plain handle,
// closed by t.Cleanup.
func NewDB(t *testing.T, driverName, dsn string, open OpenFunc) *DB {
	t.Helper()
	raw, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", driverName, err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return &DB{open: open, raw: raw}
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

func closeOnCleanup(t *testing.T, s persist.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
