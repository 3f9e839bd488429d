// Package sqlite is leaf's embedded store: one SQLite database file, pure
// Go (modernc.org/sqlite, no cgo), on the SQL engine of persist/sqlstore.
// Several stores, in one process or in several, may share the file:
// writes serialize on SQLite's file lock.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlstore"
)

// Store is the SQLite backend: every method of persist.Backend, from the
// SQL engine (sqlstore.Store).
type Store struct {
	sqlstore.Store
	path string
}

// The DDL of DESIGN.md §2 in SQLite's dialect: SQLite has no ON UPDATE, so
// every UPDATE sets update_time itself.
const createTable = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// The persistent guard: per tag, the end (exclusive) of the highest range
// leaf handed out. Not Leaf's: Leaf servers ignore it.
const createGuard = `CREATE TABLE IF NOT EXISTS leaf_guard (
  biz_tag VARCHAR(128) NOT NULL,
  high    BIGINT       NOT NULL,
  PRIMARY KEY (biz_tag)
)`

func dialect() *sqlstore.Dialect {
	return &sqlstore.Dialect{
		Name:        "sqlite",
		OneWriter:   true,
		CreateTable: createTable,
		// Both tables compare tags byte for byte (BINARY).
		GuardDDL:        func(context.Context, sqlstore.Querier) string { return createGuard },
		IgnoreDuplicate: ` ON CONFLICT (biz_tag) DO NOTHING`,
		// A statement costs no round trip.
		Local:       true,
		Unavailable: unavailable,
		// BEGIN IMMEDIATE takes the write lock before reading, so transactions
		// cannot deadlock, and the busy timeout already waited for the lock.
		Retryable: func(error) bool { return false },
		NoTable: func(err error) bool {
			var e *msqlite.Error
			return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_ERROR &&
				strings.Contains(e.Error(), "no such table")
		},
		MaxOpenConns: 4,
		ClusterDDL: func(context.Context, sqlstore.Querier) []string {
			return sqlstore.ClusterDDL("VARCHAR(128)", "")
		},
		// The clock of the machine running the statement: the processes
		// sharing the file share it.
		Now:      `SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`,
		IfAbsent: func(key string) string { return " ON CONFLICT (" + key + ") DO NOTHING" },
	}
}

// unavailable: the lock stayed busy past the busy timeout, the call was
// interrupted (context), or the file cannot be opened, read or written.
func unavailable(err error) bool {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT,
		sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL,
		sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_READONLY:
		return true
	}
	return false
}

// Open opens (creating when missing) the database file at path, e.g.
// "data/leaf.db", and its parent directory. The file is put in WAL mode and
// every connection uses synchronous=FULL, so that a committed max_id
// survives power loss (otherwise IDs repeat), a busy timeout of
// opts.BusyTimeout, and BEGIN IMMEDIATE for write transactions. The pool
// holds 4 connections unless opts says otherwise; they are never recycled.
// Errors do not name the path: the caller does.
func Open(ctx context.Context, path string, opts persist.Options) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		// An in-memory database is one per connection: not shareable.
		return nil, fmt.Errorf("persist: open sqlite: %w: want a file path", persist.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("persist: open sqlite: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("persist: open sqlite: %w", err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = persist.DefaultBusyTimeout
	}
	db, err := sql.Open("sqlite", dsn(abs, busy))
	if err != nil {
		return nil, fmt.Errorf("persist: open sqlite: %w", err)
	}
	c := sqlstore.NewCore(db, dialect(), opts)
	if err := check(ctx, c, opts.CreateSchema); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("persist: open sqlite: %w", err)
	}
	opts.Log().Info("persist: sqlite open", "path", abs)
	return &Store{Store: sqlstore.NewStore(c), path: abs}, nil
}

// dsn is the driver's data source name for the file at abs: a file: URI,
// so that a path holding '?', '#' or '%' stays a path, with the
// per-connection settings Open relies on.
func dsn(abs string, busy time.Duration) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	// 32 MiB of pages per connection (SQLite's default: 2 MiB): a shutdown
	// giving back 200,000 tags otherwise reads most pages many times over.
	q.Add("_pragma", "cache_size(-32768)")
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
}

// check verifies the settings that the guarantees rest on, then the table.
func check(ctx context.Context, c *sqlstore.Core, create bool) error {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	var mode string
	if err := c.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return c.Wrap(err)
	}
	if !strings.EqualFold(mode, "wal") {
		// WAL needs shared memory beside the file; network file systems
		// may not have it.
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := c.DB().QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		return c.Wrap(err)
	}
	if sync != 2 {
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	return c.InitSchema(ctx, create)
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }
