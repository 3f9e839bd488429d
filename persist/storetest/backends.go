package storetest

import (
	"database/sql"
	"errors"
	"os"
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
// handles on it through persist, and direct access to it (Raw), as an
// operator (or another tool) would change it by hand.
type DB struct {
	open OpenFunc
	raw  Raw
	// Conflicts: the database rolls back one of two Takes of a tag that
	// overlap in time (SERIALIZABLE), so the suite requires that the
	// Takes it runs from two handles at once were run again.
	Conflicts bool
}

// Raw changes a backend's data behind leaf's back, as an operator would by
// hand, and reads what the Store does not show. Each backend supplies one:
// NewDB makes it for the SQL backends; others pass theirs to NewDBOn.
type Raw interface {
	// Insert writes the tag's row (max_id, step, description) as a
	// hand-written INSERT would; the guard is left as it is.
	Insert(t *testing.T, tag string, maxID, step int64, description string)
	// Delete removes the tag's row; the guard is left as it is.
	Delete(t *testing.T, tag string)
	// SetMaxID sets the row's max_id, as a hand-written UPDATE would.
	SetMaxID(t *testing.T, tag string, maxID int64)
	// Guard reads the tag's persistent guard (leaf_guard.high); ok is
	// false when the tag has none.
	Guard(t *testing.T, tag string) (high int64, ok bool)
}

// GuardDropper is a Raw of a backend whose guard is a table of its own,
// which an operator may drop (or never create): the SQL backends. A
// backend whose guard cannot be missing does not implement it.
type GuardDropper interface {
	// DropGuard drops the guard's table.
	DropGuard(t *testing.T)
}

// NewDB is a SQL backend's fresh database for the suite: open opens
// handles on it; driverName and dsn (database/sql's, the driver registered
// by the backend's package) give its Raw a plain handle of its own,
// closed by t.Cleanup.
func NewDB(t *testing.T, driverName, dsn string, open OpenFunc) *DB {
	t.Helper()
	raw, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", driverName, err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return NewDBOn(t, SQLRaw(raw), open)
}

// NewDBOn is a backend's fresh database for the suite: open opens handles
// on it, raw changes it by hand.
func NewDBOn(t *testing.T, raw Raw, open OpenFunc) *DB {
	t.Helper()
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

// SQLRaw is the Raw of the SQL backends whose placeholders are ?:
// statements on leaf_alloc and leaf_guard through db.
func SQLRaw(db *sql.DB) Raw { return SQL{DB: db} }

// SQL is the Raw of the SQL backends: statements on leaf_alloc and
// leaf_guard through a plain handle of the database. It also implements
// GuardDropper, and runs any statement (Exec).
type SQL struct {
	DB *sql.DB
	// Rebind turns the statements' ? placeholders into the database's
	// form (sqlstore.NumberedPlaceholders for PostgreSQL); nil keeps them.
	Rebind func(query string) string
}

func (r SQL) Insert(t *testing.T, tag string, maxID, step int64, description string) {
	t.Helper()
	r.Exec(t, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`, tag, maxID, step, description)
}

func (r SQL) Delete(t *testing.T, tag string) {
	t.Helper()
	r.Exec(t, `DELETE FROM leaf_alloc WHERE biz_tag = ?`, tag)
}

func (r SQL) SetMaxID(t *testing.T, tag string, maxID int64) {
	t.Helper()
	r.Exec(t, `UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?`, maxID, tag)
}

func (r SQL) Guard(t *testing.T, tag string) (int64, bool) {
	t.Helper()
	var high int64
	err := r.DB.QueryRowContext(t.Context(), r.rebind(`SELECT high FROM leaf_guard WHERE biz_tag = ?`), tag).Scan(&high)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("leaf_guard.high of %q: %v", tag, err)
	}
	return high, true
}

func (r SQL) DropGuard(t *testing.T) {
	t.Helper()
	r.Exec(t, `DROP TABLE leaf_guard`)
}

// Exec runs one statement on the database directly.
func (r SQL) Exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	if _, err := r.DB.ExecContext(t.Context(), r.rebind(stmt), args...); err != nil {
		t.Fatalf("%s %v: %v", stmt, args, err)
	}
}

func (r SQL) rebind(query string) string {
	if r.Rebind == nil {
		return query
	}
	return r.Rebind(query)
}

// SQL returns the database's Raw as SQL, for statements of the test's
// own; it fails the test on a backend that is not SQL.
func (db *DB) SQL(t *testing.T) SQL {
	t.Helper()
	r, ok := db.raw.(SQL)
	if !ok {
		t.Fatalf("%T is not a SQL database", db.raw)
	}
	return r
}

// EnvDSN returns the environment variable name: the DSN of a test
// database server. When it is unset the test is skipped, except on CI
// (CI=true), where it fails; either way saying how to start one (how).
func EnvDSN(t testing.TB, name, how string) string {
	t.Helper()
	dsn := os.Getenv(name)
	if dsn == "" {
		msg := name + " is not set; " + how
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dsn
}

func closeOnCleanup(t *testing.T, s persist.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
