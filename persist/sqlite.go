package persist

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

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite is the embedded backend: one database file, pure Go (no cgo).
// Several SQLite values, in one process or in several, may share the file:
// writes serialize on SQLite's file lock.
type SQLite struct {
	*core
	path string
}

var (
	_ Store   = (*SQLite)(nil)
	_ Admin   = (*SQLite)(nil)
	_ Guarded = (*SQLite)(nil)
)

// The DDL of DESIGN.md §2 in SQLite's dialect: SQLite has no ON UPDATE, so
// every UPDATE sets update_time itself.
const sqliteCreateTable = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// The persistent guard: per tag, the end (exclusive) of the highest range
// leaf handed out. Not Leaf's: Leaf servers ignore it.
const sqliteCreateGuard = `CREATE TABLE IF NOT EXISTS leaf_guard (
  biz_tag VARCHAR(128) NOT NULL,
  high    BIGINT       NOT NULL,
  PRIMARY KEY (biz_tag)
)`

func sqliteDialect() *dialect {
	return &dialect{
		name:        "sqlite",
		createTable: sqliteCreateTable,
		// Both tables compare tags byte for byte (BINARY).
		guardDDL:    func(context.Context, querier) string { return sqliteCreateGuard },
		ensureGuard: `INSERT INTO leaf_guard (biz_tag, high) VALUES (?, ?) ON CONFLICT (biz_tag) DO NOTHING`,
		insertIfAbsent: `INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time)
		VALUES (?, 1, ?, ?, CURRENT_TIMESTAMP) ON CONFLICT (biz_tag) DO NOTHING`,
		unavailable: sqliteUnavailable,
		// BEGIN IMMEDIATE takes the write lock before reading, so transactions
		// cannot deadlock, and the busy timeout already waited for the lock.
		retryable: func(error) bool { return false },
		noTable: func(err error) bool {
			var e *sqlite.Error
			return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_ERROR &&
				strings.Contains(e.Error(), "no such table")
		},
	}
}

// sqliteUnavailable: the lock stayed busy past the busy timeout, the call
// was interrupted (context), or the file cannot be opened, read or written.
func sqliteUnavailable(err error) bool {
	var e *sqlite.Error
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

// OpenSQLite opens (creating when missing) the database file at path, e.g.
// "data/leaf.db", and its parent directory. The file is put in WAL mode and
// every connection uses synchronous=FULL, so that a committed max_id
// survives power loss (otherwise IDs repeat), a busy timeout of
// opts.BusyTimeout, and BEGIN IMMEDIATE for write transactions.
func OpenSQLite(ctx context.Context, path string, opts Options) (*SQLite, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		// An in-memory database is one per connection: not shareable.
		return nil, fmt.Errorf("persist: open sqlite %q: %w: want a file path", path, ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("persist: open sqlite %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("persist: open sqlite %q: %w", path, err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	db, err := sql.Open("sqlite", sqliteDSN(abs, busy))
	if err != nil {
		return nil, fmt.Errorf("persist: open sqlite %q: %w", path, err)
	}
	pool(db, opts, 4, 0)
	s := &SQLite{core: newCore(db, sqliteDialect(), opts), path: abs}
	if err := s.check(ctx, opts.CreateSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("persist: open sqlite %q: %w", path, err)
	}
	s.log.Info("persist: sqlite open", "path", abs)
	return s, nil
}

// sqliteDSN builds a file: URI, so that a path holding '?', '#' or '%'
// stays a path, with the driver's per-connection settings.
func sqliteDSN(abs string, busy time.Duration) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
}

// check verifies the settings that the guarantees rest on, then the table.
func (s *SQLite) check(ctx context.Context, create bool) error {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	var mode string
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return s.wrap(err)
	}
	if !strings.EqualFold(mode, "wal") {
		// WAL needs shared memory beside the file; network file systems
		// may not have it.
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		return s.wrap(err)
	}
	if sync != 2 {
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	return s.initSchema(ctx, create)
}

// Path is the absolute path of the database file.
func (s *SQLite) Path() string { return s.path }
