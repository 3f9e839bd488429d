package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// Store is a backend on Core as its package exports it: the methods of
// persist.Backend, Registry, BatchGiver and Identified, and nothing else
// of the Core. Each SQL backend's Store embeds one.
type Store struct {
	backend
	registry
	batchGiver
	identified
}

// backend and registry are embedded under names of their own, so that the
// Core's other methods stay out of sight.
type (
	backend    = persist.Backend
	registry   = persist.Registry
	batchGiver = persist.BatchGiver
	identified = persist.Identified
)

var (
	_ persist.Backend    = (*Store)(nil)
	_ persist.Registry   = (*Store)(nil)
	_ persist.BatchGiver = (*Store)(nil)
	_ persist.Identified = (*Store)(nil)
)

// NewStore is the store of c.
func NewStore(c *Core) Store {
	return Store{backend: c, registry: c, batchGiver: c, identified: c}
}

// Dialect is what differs between the SQL backends; everything else (the
// statements of the Store and Admin methods, validation, retries) is
// shared in Core. A backend for another SQL database is a Dialect and an
// Open function that hands NewCore its *sql.DB.
//
// Every statement, Core's and the dialect's own suffixes, is written with ?
// placeholders; Rebind turns them into the database's form, once when the
// Core is made for the fixed ones.
type Dialect struct {
	// Name names the backend in logs ("sqlite", "mysql").
	Name string
	// OneWriter: the database runs one write transaction at a time
	// (SQLite). A handle's writes then take turns in arrival order before
	// they ask the database, instead of polling its lock, where a newcomer
	// can win over a write that has waited long (see Core.write).
	OneWriter bool
	// CreateTable is leaf_alloc's CREATE TABLE IF NOT EXISTS, run when
	// Options.CreateSchema is set.
	CreateTable string
	// GuardDDL returns leaf_guard's CREATE TABLE IF NOT EXISTS, run when
	// Options.CreateSchema is set and shown in the warning when the table
	// is missing. q reads the catalogue (as written: no Rebind), e.g. so
	// that leaf_guard.biz_tag compares tags as leaf_alloc.biz_tag does.
	GuardDDL func(ctx context.Context, q Querier) string
	// ForUpdate ends a SELECT that must lock what it reads and read the
	// latest committed version ("" where the transaction already holds the
	// write lock, as SQLite's BEGIN IMMEDIATE does).
	ForUpdate string
	// IgnoreDuplicate ends an INSERT of rows into leaf_alloc or leaf_guard
	// so that a row whose biz_tag exists is left unchanged and counted as
	// no row, without hiding other errors (" ON CONFLICT (biz_tag) DO
	// NOTHING"): a Create of an existing tag, a guard row that exists.
	IgnoreDuplicate string
	// Folds reports whether leaf_alloc.biz_tag compares names otherwise
	// than byte for byte (a case-insensitive or nondeterministic
	// collation, where "Order" and "order" are one row), reading the
	// catalogue through q once the table is there; nil: never. TakeBatch
	// then takes every tag with Take's statements, which find a row under
	// any name that matches it.
	Folds func(ctx context.Context, q Querier) bool
	// ByKey follows a table's name in TakeBatch's statements that lock
	// or update several rows by biz_tag, so that the database finds each
	// by its key, never by a scan, where a scan would lock the rows it
	// passes (InnoDB: " FORCE INDEX (PRIMARY)"); "" elsewhere.
	ByKey string
	// Local: the database runs in the process (SQLite), so a statement
	// costs no round trip, and TakeBatch writes its rows one prepared
	// statement each; over a network it writes them all with one.
	Local bool
	// Rebind rewrites a statement's ? placeholders into the database's
	// form (NumberedPlaceholders for $1, $2, ...); nil keeps ?.
	Rebind func(query string) string
	// Unavailable tells driver errors that mean "cannot reach or did not
	// answer", beyond the context and net errors that Core checks itself.
	Unavailable func(error) bool
	// Retryable tells errors after which the whole transaction was rolled
	// back and may simply be run again (deadlocks, lock wait timeouts,
	// serialization failures).
	Retryable func(error) bool
	// Ambiguous tells errors by which the database itself says that it
	// cannot tell whether a statement took effect (CockroachDB's 40003);
	// nil: none. Core adds a connection lost during a commit.
	Ambiguous func(error) bool
	// Returning: the database has UPDATE ... RETURNING. Without the
	// persistent guard, a Take is then that one statement.
	Returning bool
	// OneStatementTake: with the guard too, a Take is one statement in no
	// transaction: the database has data-modifying common table
	// expressions and INSERT ... ON CONFLICT ... DO UPDATE ... WHERE
	// (PostgreSQL). Needs Returning.
	OneStatementTake bool
	// Batched: statements may be sent together, separated by semicolons,
	// with their parameters in the text, and SELECT ROW_COUNT() counts the
	// rows the statement before changed (MySQL and MariaDB with the
	// driver's multiStatements and interpolateParams). A Take with the
	// guard is then two round trips, its statements and COMMIT, where
	// Verify is not set.
	Batched bool
	// NoTable tells the error of a query on a missing table.
	NoTable func(error) bool
	// Denied tells the error of a statement the user lacks a privilege
	// for; nil where there are no privileges (SQLite).
	Denied func(error) bool
	// Grant returns the GRANT statement that gives the connected user
	// privileges on table, for messages; q reads who that is.
	Grant func(ctx context.Context, q Querier, privileges, table string) string
	// ReadOnly tells the error of a write refused because the server or
	// the session is read-only; nil: none.
	ReadOnly func(error) bool
	// ReadOnlyState returns why the database is read-only, as a server
	// tells in its settings ("" when writable), for a check at open where
	// a write's error would not say it; nil: no such check.
	ReadOnlyState func(ctx context.Context, q Querier) string
	// Verify is set where the database may roll a transaction back
	// without telling the client (MariaDB Galera: a brute-force abort by
	// a write-set from another node, landing as a statement's answer is
	// sent, is then lost, and the next statements run each in a
	// transaction of its own, COMMIT committing nothing): a SELECT of two
	// columns, whether the session is still in its transaction, and a
	// value that changes whenever the session commits a write (the last
	// write-set's GTID). Core reads it before COMMIT and the second column
	// again after, on the same connection, and runs the transaction again
	// when it was lost. "": no such check.
	Verify string
	// Written is the SELECT of Verify's second column alone.
	Written string
	// Drop tells errors after which the connection should not be used
	// again (a Galera node out of the cluster answers every statement
	// with 1047), so that the next attempt opens another one, perhaps
	// through a proxy to a healthy node; nil: none. Used where Verify is
	// set, whose transactions hold their connection.
	Drop func(error) bool
	// MaxOpenConns and ConnMaxLifetime are the pool's defaults, for zero
	// Options fields (ConnMaxLifetime 0: never recycled).
	MaxOpenConns    int
	ConnMaxLifetime time.Duration

	// The cluster registry (Registry, registry.go).

	// ClusterDDL returns the CREATE TABLE IF NOT EXISTS statements of the
	// registry's tables (leaf_node, leaf_worker, leaf_change, leaf_mode),
	// run when Options.CreateSchema is set and shown in the warning when
	// they are missing; q reads the catalogue, as for GuardDDL.
	ClusterDDL func(ctx context.Context, q Querier) []string
	// Now is a SELECT of one BIGINT: the database's clock in milliseconds
	// since the Unix epoch. Leases are measured on it, so that the
	// servers' clocks need not agree.
	Now string
	// IfAbsent ends an INSERT of one row so that, when a row with the same
	// primary key (the column key) exists, it inserts nothing and counts
	// 0 rows, without hiding other errors.
	IfAbsent func(key string) string
}

// NumberedPlaceholders is a Dialect.Rebind for databases that number their
// placeholders (PostgreSQL): every ? becomes $1, $2, ... in order. The
// statements it is given hold no ? inside string literals.
func NumberedPlaceholders(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := range len(query) {
		if query[i] != '?' {
			b.WriteByte(query[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// Querier is what *sql.DB and *sql.Tx share for queries of one row.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Core implements persist.Backend on database/sql for one Dialect. The SQL
// sticks to what SQLite, MySQL 5.7+, MariaDB 10.x and TiDB accept, with a
// placeholder for every value (tag names are opaque data), and is written to
// suit PostgreSQL too, with Rebind: no placeholder whose type the database
// would infer from an INT column. A backend's Open makes its *sql.DB, runs
// its own checks (DB, Deadline, Wrap), then InitSchema, and hands the Core
// out as its Backend.
type Core struct {
	db           *sql.DB
	d            *Dialect
	q            statements
	queryTimeout time.Duration
	log          *slog.Logger
	// guard: the leaf_guard table is there, so Take and GiveBack keep the
	// persistent high-water mark. Set by InitSchema, before any other use.
	guard bool
	// grantInsert is the GRANT that lets Create work, when InitSchema found
	// that the user may not insert into leaf_alloc ("" otherwise).
	grantInsert string
	readOnly    bool // Options.ReadOnly
	// turn is the writers' queue when the dialect has OneWriter: a
	// channel, because its blocked senders go first come, first served,
	// and a wait for it ends with the caller's context.
	turn chan struct{}
	// cluster: the registry's tables are there (Registry, registry.go),
	// and tags are read with their mode. Set by InitSchema.
	cluster bool
	rq      clusterStatements
	// identity: leaf_store was there at InitSchema (StoreID reads it).
	identity bool
	// folds: Dialect.Folds, as InitSchema found it.
	folds bool
}

// NewCore makes the shared SQL core over db, which it owns from now on
// (Close closes it), and sizes db's pool from opts, with the dialect's
// defaults for zero fields. It does not touch the database: the backend
// calls InitSchema next.
func NewCore(db *sql.DB, d *Dialect, opts persist.Options) *Core {
	qt := opts.QueryTimeout
	if qt == 0 {
		qt = persist.DefaultQueryTimeout
	}
	if db != nil {
		pool(db, opts, d.MaxOpenConns, d.ConnMaxLifetime)
	}
	c := &Core{db: db, d: d, q: newStatements(d), rq: newClusterStatements(d), queryTimeout: qt, log: opts.Log(), readOnly: opts.ReadOnly}
	if d.OneWriter {
		c.turn = make(chan struct{}, 1)
	}
	return c
}

// pool applies the pool settings of opts, with the backend's defaults.
func pool(db *sql.DB, opts persist.Options, defConns int, defLifetime time.Duration) {
	n := opts.MaxOpenConns
	if n <= 0 {
		n = defConns
	}
	life := opts.ConnMaxLifetime
	if life == 0 {
		life = defLifetime
	}
	db.SetMaxOpenConns(n)
	// database/sql keeps 2 idle connections by default: under load that
	// means opening and closing connections all the time.
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(life)
}

// DB is the database handle, for a backend's own checks at open.
func (c *Core) DB() *sql.DB { return c.db }

const columns = `biz_tag, max_id, step, description, update_time`

// modeColumns are columns, of leaf_alloc a, and the mode of leaf_mode m.
const modeColumns = `a.biz_tag, a.max_id, a.step, a.description, a.update_time, m.mode, m.layout`

// The INSERTs of rows, up to their VALUES' rows: Create's and TakeBatch's
// into leaf_alloc (biz_tag, step, description; max_id 1), and Take's and
// TakeBatch's of guard rows (biz_tag, high).
const (
	insertAlloc = `INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES `
	insertGuard = `INSERT INTO leaf_guard (biz_tag, high) VALUES `
)

// statements are every statement Core runs, in the dialect's placeholder
// form, made once by NewCore.
type statements struct {
	checkAlloc, checkGuard       string
	takeSize, takeStep, readTake string
	takeSizeRet, takeStepRet     string // with RETURNING max_id, step
	// With the guard raised in the same statement (OneStatementTake)
	// or batch (Batched).
	takeSizeGuarded, takeStepGuarded string
	takeSizeBatch, takeStepBatch     string
	moveRangeBatch, raiseGuardBatch  string // and their counts, then COMMIT
	ensureGuard, readGuarded         string
	moveRange, raiseGuard            string
	tags, readTag, exists            string
	tagsMode, readTagMode            string // with leaf_mode's columns
	insertIfAbsent                   string
	giveBack, lowerGuard             string
	setStep, raiseFloor              string
}

func newStatements(d *Dialect) statements {
	rebind := d.Rebind
	if rebind == nil {
		rebind = func(q string) string { return q }
	}
	// The WHERE clauses refuse an overflow instead of letting the database
	// fail (MySQL) or turn max_id into a float (SQLite). The bound of
	// takeStep is a literal: a placeholder there would take step's type
	// (INT) where the database infers types (PostgreSQL).
	takeSize := `UPDATE leaf_alloc SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ? AND max_id <= ?`
	takeStep := `UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ? AND step > 0 AND max_id <= ` + strconv.FormatInt(math.MaxInt64, 10) +
		` - (CASE WHEN step > 0 THEN step ELSE 0 END)`
	// The one-statement take with the guard: max_id moves only when the
	// range starts at or above the guard (else no row: the transaction
	// repairs it), and the guard row is inserted or raised to the new
	// max_id, only where the range starts at or above the guard as it is
	// once locked (raised is NULL otherwise, in a race with a row lowered
	// meanwhile, and the range goes unused). The UPDATE of leaf_alloc runs
	// first, as g reads its rows: the same lock order as every other path.
	guardedRet := func(take, start string) string {
		return rebind(`WITH a AS (` + take + `
				AND max_id >= COALESCE((SELECT high FROM leaf_guard WHERE biz_tag = ?), max_id)
				RETURNING biz_tag, max_id, step, ` + start + ` AS start),
			g AS (INSERT INTO leaf_guard (biz_tag, high) SELECT biz_tag, max_id FROM a
				ON CONFLICT (biz_tag) DO UPDATE SET high = EXCLUDED.high
				WHERE leaf_guard.high <= (SELECT start FROM a) RETURNING TRUE AS raised)
			SELECT a.max_id, a.step, g.raised FROM a LEFT JOIN g ON TRUE`)
	}
	moveRange := `UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ? AND max_id = ?`
	raiseGuard := `UPDATE leaf_guard SET high = ? WHERE biz_tag = ? AND high < ?
			AND (SELECT a.max_id FROM leaf_alloc a WHERE a.biz_tag = ?) >= ?`
	readGuarded := `SELECT a.max_id, a.step, g.high FROM leaf_alloc a, leaf_guard g
			WHERE a.biz_tag = ? AND g.biz_tag = ?` + d.ForUpdate
	// The batched take with the guard, its first round trip: the UPDATE
	// and its count, the guard row made to exist, the row read back (a
	// plain read, which sees the UPDATE, and takes no lock where the row
	// is missing: a gap lock there would hold off the INSERT that
	// re-creates it) and the guard read with a lock.
	batch := func(take string) string {
		return rebind(`START TRANSACTION; ` + take + `; SELECT ROW_COUNT(); ` +
			insertGuard + `(?, ?)` + d.IgnoreDuplicate + `; ` +
			`SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?; ` +
			`SELECT high FROM leaf_guard WHERE biz_tag = ?` + d.ForUpdate)
	}
	return statements{
		takeSizeGuarded: guardedRet(takeSize, `max_id - ?`),
		takeStepGuarded: guardedRet(takeStep, `max_id - step`),
		takeSizeBatch:   batch(takeSize),
		takeStepBatch:   batch(takeStep),
		checkAlloc:      `SELECT ` + columns + ` FROM leaf_alloc WHERE 1 = 0`,
		checkGuard:      `SELECT biz_tag, high FROM leaf_guard WHERE 1 = 0`,
		takeSize:        rebind(takeSize),
		takeStep:        rebind(takeStep),
		takeSizeRet:     rebind(takeSize + ` RETURNING max_id, step`),
		takeStepRet:     rebind(takeStep + ` RETURNING max_id, step`),
		readTake:        rebind(`SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?`),
		ensureGuard:     rebind(insertGuard + `(?, ?)` + d.IgnoreDuplicate),
		readGuarded:     rebind(readGuarded),
		moveRangeBatch:  rebind(moveRange + `; SELECT ROW_COUNT(); ` + raiseGuard + `; SELECT ROW_COUNT(); COMMIT`),
		raiseGuardBatch: rebind(raiseGuard + `; SELECT ROW_COUNT(); COMMIT`),
		moveRange:       rebind(moveRange),
		raiseGuard:      rebind(raiseGuard),
		tags:            `SELECT ` + columns + ` FROM leaf_alloc ORDER BY biz_tag`,
		readTag:         rebind(`SELECT ` + columns + ` FROM leaf_alloc WHERE biz_tag = ?`),
		tagsMode:        `SELECT ` + modeColumns + ` FROM leaf_alloc a LEFT JOIN leaf_mode m ON m.biz_tag = a.biz_tag ORDER BY a.biz_tag`,
		readTagMode:     rebind(`SELECT ` + modeColumns + ` FROM leaf_alloc a LEFT JOIN leaf_mode m ON m.biz_tag = a.biz_tag WHERE a.biz_tag = ?`),
		exists:          rebind(`SELECT 1 FROM leaf_alloc WHERE biz_tag = ?`),
		insertIfAbsent:  rebind(insertAlloc + `(?, 1, ?, ?, CURRENT_TIMESTAMP)` + d.IgnoreDuplicate),
		giveBack: rebind(`UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ? AND max_id = ?`),
		lowerGuard: rebind(`UPDATE leaf_guard SET high = ? WHERE biz_tag = ? AND high = ?`),
		setStep: rebind(`UPDATE leaf_alloc SET step = ?, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ?`),
		raiseFloor: rebind(`UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP
			WHERE biz_tag = ? AND max_id < ?`),
	}
}

// GuardEnabled reports whether the persistent guard is on: the leaf_guard
// table was there when the store was opened.
func (c *Core) GuardEnabled() bool { return c.guard }

// Deadline puts the query timeout on ctx when it has no deadline.
func (c *Core) Deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.queryTimeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.queryTimeout)
}

// isUnavailable tells errors that mean the database could not be reached
// or did not answer in time.
func (c *Core) isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return c.d.Unavailable(err)
}

// Wrap adds ErrUnavailable to the chain of connection and timeout errors
// (and ErrReadOnly to a refused write of a read-only database), and
// ErrDenied to a missing privilege's, keeping the original error in the
// chain too.
func (c *Core) Wrap(err error) error {
	if err == nil || errors.Is(err, persist.ErrUnavailable) || errors.Is(err, persist.ErrDenied) {
		return err
	}
	if c.d.ReadOnly != nil && c.d.ReadOnly(err) && !errors.Is(err, persist.ErrReadOnly) {
		err = fmt.Errorf("%w: %w", persist.ErrReadOnly, err)
	}
	if c.isUnavailable(err) {
		return fmt.Errorf("%w: %w", persist.ErrUnavailable, err)
	}
	if c.denied(err) {
		return fmt.Errorf("%w: %w", persist.ErrDenied, err)
	}
	return err
}

// denied tells the error of a statement the user lacks a privilege for.
func (c *Core) denied(err error) bool { return c.d.Denied != nil && c.d.Denied(err) }

// Retry policy for deadlocks, lock wait timeouts and serialization
// failures: exponential backoff with jitter, as long as the context's
// deadline allows. Under SERIALIZABLE, every Take of a tag that overlaps
// another is rolled back, so with many servers on one tag a Take may need
// many attempts: only the deadline ends them, or maxAttempts when there is
// none.
const (
	maxAttempts  = 8
	firstBackoff = 2 * time.Millisecond
	maxBackoff   = 200 * time.Millisecond
)

// do runs fn under the query deadline, retrying it while it fails with a
// retryable error, and wraps the final error with the operation's name.
func (c *Core) do(ctx context.Context, op, tag string, fn func(context.Context) error) error {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	_, bounded := ctx.Deadline()
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		// An ambiguous outcome is never run again here: the caller must not
		// take it for a failure of a transaction that was rolled back.
		retryable := c.d.Retryable(err) || errors.Is(err, errRowRaced) || errors.Is(err, errBatchRaced) ||
			errors.Is(err, errTxLost)
		if (!bounded && attempt == maxAttempts) || errors.Is(err, persist.ErrAmbiguous) || !retryable || ctx.Err() != nil {
			return c.opErr(op, tag, err)
		}
		// Half fixed, half random, so that the transactions that collided
		// do not collide again at once.
		wait := backoff/2 + rand.N(backoff/2+1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return c.opErr(op, tag, err)
		}
		c.log.Debug("persist: retrying", "backend", c.d.Name, "op", op, "tag", tag, "attempt", attempt, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.opErr(op, tag, err)
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// write is do for an operation that writes. With a OneWriter dialect each
// attempt first waits its turn among the handle's writers: SQLite's busy
// handler sleeps and polls, so under a stream of writes (reloads after an
// outage, say) a request's write could lose the lock again and again until
// its deadline; in arrival order it waits for the writes queued before it
// only.
func (c *Core) write(ctx context.Context, op, tag string, fn func(context.Context) error) error {
	if c.turn == nil {
		return c.do(ctx, op, tag, fn)
	}
	return c.do(ctx, op, tag, func(ctx context.Context) error {
		select {
		case c.turn <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-c.turn }()
		return fn(ctx)
	})
}

// opErr names the operation and the tag (if any) in front of err.
func (c *Core) opErr(op, tag string, err error) error {
	if tag == "" {
		return fmt.Errorf("%s: %w", op, c.Wrap(err))
	}
	return fmt.Errorf("%s %q: %w", op, tag, c.Wrap(err))
}

// inTx runs fn in a transaction and commits it. With SQLite the driver
// begins it IMMEDIATE, so the write lock is taken up front. A commit whose
// answer was lost (the connection broke or the deadline passed once COMMIT
// was sent) is ErrAmbiguous: it may have taken effect.
func (c *Core) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return c.inTxWrote(ctx, fn, nil)
}

// inTxWrote is inTx for a transaction that reports, once fn returned,
// whether it changed rows (wrote; nil: not known). Where a transaction can
// be lost without a word (Dialect.Verify), one that changed rows counts as
// committed only when the session's last written GTID moved at COMMIT:
// else it is errTxLost, which do runs again (nothing was committed: no
// write-set left the session).
func (c *Core) inTxWrote(ctx context.Context, fn func(*sql.Tx) error, wrote func() bool) error {
	if c.d.Verify != "" {
		return c.verifiedTx(ctx, fn, wrote)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback() // COMMIT not sent: certainly rolled back
		return err
	}
	return c.ambiguous(tx.Commit())
}

// errTxLost: the database rolled the transaction back without telling
// (a Galera brute-force abort that MariaDB did not report): nothing of it
// was committed, and it may simply run again.
var errTxLost = errors.New("persist: the database rolled the transaction back without reporting it (a Galera brute-force abort)")

// verifiedTx is inTxWrote on a database that may lose a transaction
// without a word (Dialect.Verify). Once the session has lost its
// transaction, its next statements each commit alone, so every statement
// of Core's transactions is written to be harmless then: compare-and-sets
// on what the transaction read, and the guard only ever raised and never
// above max_id. What remains is to never report as committed what was not:
//
//   - the session must still be in the transaction after fn, checked by
//     the statement that reads the last written GTID before COMMIT;
//   - a transaction that changed rows must have written a write-set at
//     COMMIT: the GTID moved. This covers an abort that lands just after
//     that check, which COMMIT would not report either.
//
// Both checks run on the transaction's own connection, held for the
// purpose; a connection the database answered with an error that Drop
// names is closed rather than returned to the pool.
func (c *Core) verifiedTx(ctx context.Context, fn func(*sql.Tx) error, wrote func() bool) (err error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && c.d.Drop != nil && c.d.Drop(err) {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	var inTx bool
	var before sql.NullString
	if err := tx.QueryRowContext(ctx, c.d.Verify).Scan(&inTx, &before); err != nil {
		_ = tx.Rollback()
		return err
	}
	if !inTx {
		_ = tx.Rollback()
		return errTxLost
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := c.ambiguous(tx.Commit()); err != nil || wrote == nil || !wrote() {
		return err
	}
	var after sql.NullString
	if err := conn.QueryRowContext(ctx, c.d.Written).Scan(&after); err != nil {
		// Committed, as far as COMMIT said, but not proven.
		return fmt.Errorf("%w: %w", persist.ErrAmbiguous, c.Wrap(err))
	}
	if after == before {
		return errTxLost
	}
	return nil
}

// ambiguous marks err, the error of the statement that commits (COMMIT, or
// a statement in no transaction), with ErrAmbiguous when the database may
// have committed anyway: the connection was lost or the deadline passed
// after it was sent, or the database says it cannot tell. A refusal by
// the database (a serialization failure at COMMIT) is a rollback, and
// driver.ErrBadConn means nothing was sent.
func (c *Core) ambiguous(err error) error {
	if err == nil || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrTxDone) {
		return err
	}
	if (c.d.Ambiguous != nil && c.d.Ambiguous(err)) || (c.isUnavailable(err) && !c.d.Retryable(err)) {
		return fmt.Errorf("%w: %w", persist.ErrAmbiguous, c.Wrap(err))
	}
	return err
}

// Tags lists every row, ordered by name.
func (c *Core) Tags(ctx context.Context) ([]persist.Tag, error) {
	var tags []persist.Tag
	err := c.do(ctx, "tags", "", func(ctx context.Context) error {
		tags = tags[:0]
		query := c.q.tags
		if c.cluster {
			query = c.q.tagsMode
		}
		rows, err := c.db.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := c.scanTag(rows)
			if err != nil {
				return err
			}
			tags = append(tags, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return tags, nil
}

// Tag reads one row; ErrNotFound when missing.
func (c *Core) Tag(ctx context.Context, name string) (persist.Tag, error) {
	if err := persist.CheckTag(name); err != nil {
		return persist.Tag{}, fmt.Errorf("tag %q: %w", name, err)
	}
	var t persist.Tag
	err := c.do(ctx, "tag", name, func(ctx context.Context) error {
		var err error
		t, err = c.readTag(ctx, c.db, name)
		return err
	})
	return t, err
}

// Create inserts a tag with max_id = 1. It reports false, and no error,
// when the tag already exists; that row is left untouched. ErrInvalid for
// a bad tag, a step outside [1, MaxStep] or a description that is too long.
func (c *Core) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	if err := persist.CheckTag(name); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	if err := persist.CheckStep(step); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	if err := persist.CheckDescription(description); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	var created bool
	err := c.write(ctx, "create", name, func(ctx context.Context) error {
		n, err := affected(ctx, c.db, c.q.insertIfAbsent, name, step, description)
		if err != nil && c.denied(err) {
			return c.insertDenied(err)
		}
		created = n == 1
		return err
	})
	return created, err
}

// checkGiveBack refuses the arguments of a give-back that no store could
// take: an invalid tag, or not 1 <= to < from.
func checkGiveBack(tag string, from, to int64) error {
	if err := persist.CheckTag(tag); err != nil {
		return fmt.Errorf("give back %q: %w", tag, err)
	}
	if to < 1 || to >= from {
		return fmt.Errorf("give back %q: %w: from %d to %d (want 1 <= to < from)", tag, persist.ErrInvalid, from, to)
	}
	return nil
}

// giveBackIn is a give-back's compare-and-set in tx: max_id to `to` if it
// is still `from`, and the guard with it when it is exactly at `from`;
// ErrNotFound when the row does not exist.
func (c *Core) giveBackIn(ctx context.Context, tx *sql.Tx, tag string, from, to int64) (bool, error) {
	// to != from, so "changed" and "matched" are the same count on MySQL,
	// which reports changed rows.
	n, err := affected(ctx, tx, c.q.giveBack, to, tag, from)
	if err != nil {
		return false, err
	}
	if n != 1 {
		return false, c.exists(ctx, tx, tag)
	}
	if c.guard {
		_, err = tx.ExecContext(ctx, c.q.lowerGuard, to, tag, from)
	}
	return true, err
}

// GiveBack sets max_id to `to` only if it is still `from` (compare-and-set)
// and reports whether it matched. With the persistent guard on, the guard
// is lowered to `to` in the same transaction, only if it is exactly at
// `from`: then the next Take continues at `to` instead of being repaired
// above it. A guard above `from` (max_id was lowered by hand below IDs
// handed out) stays where it is. ErrInvalid unless 1 <= to < from;
// ErrNotFound when the row does not exist.
func (c *Core) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	if err := checkGiveBack(tag, from, to); err != nil {
		return false, err
	}
	var matched bool
	err := c.write(ctx, "give back", tag, func(ctx context.Context) error {
		return c.inTxWrote(ctx, func(tx *sql.Tx) (err error) {
			matched, err = c.giveBackIn(ctx, tx, tag, from, to)
			return err
		}, func() bool { return matched })
	})
	return matched, err
}

// insertDenied is the error of an INSERT into leaf_alloc that the user
// lacks the privilege for, naming the GRANT that gives it.
func (c *Core) insertDenied(err error) error {
	return fmt.Errorf("%w: creating a tag needs INSERT on leaf_alloc (%s): %w",
		persist.ErrDenied, cmp.Or(c.grantInsert, "GRANT INSERT ON leaf_alloc"), err)
}

// SetStep changes the table's step. ErrNotFound when missing; ErrInvalid
// for a step outside [1, MaxStep].
func (c *Core) SetStep(ctx context.Context, tag string, step int64) error {
	if err := persist.CheckTag(tag); err != nil {
		return fmt.Errorf("set step %q: %w", tag, err)
	}
	if err := persist.CheckStep(step); err != nil {
		return fmt.Errorf("set step %q: %w", tag, err)
	}
	return c.write(ctx, "set step", tag, func(ctx context.Context) error {
		var changed bool
		return c.inTxWrote(ctx, func(tx *sql.Tx) error {
			n, err := affected(ctx, tx, c.q.setStep, step, tag)
			if err != nil {
				return err
			}
			if changed = n > 0; !changed {
				// MySQL counts changed rows: 0 also when the step and
				// the second of update_time were already those.
				return c.exists(ctx, tx, tag)
			}
			return nil
		}, func() bool { return changed })
	})
}

// RaiseFloor sets max_id = floor+1 when max_id is lower, never lowering it,
// and returns the row after the change and whether max_id moved.
// ErrNotFound when missing; ErrOverflow when floor is math.MaxInt64.
func (c *Core) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	if err := persist.CheckTag(tag); err != nil {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w", tag, err)
	}
	if floor == math.MaxInt64 {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w: floor %d", tag, persist.ErrOverflow, floor)
	}
	var t persist.Tag
	var moved bool
	err := c.write(ctx, "raise floor", tag, func(ctx context.Context) error {
		return c.inTxWrote(ctx, func(tx *sql.Tx) error {
			// max_id < floor+1 makes every matched row a changed row, so
			// MySQL's changed-rows count is the matched count here.
			n, err := affected(ctx, tx, c.q.raiseFloor, floor+1, tag, floor+1)
			if err != nil {
				return err
			}
			moved = n == 1
			t, err = c.readTag(ctx, tx, tag)
			return err
		}, func() bool { return moved })
	})
	if err != nil {
		return persist.Tag{}, false, err
	}
	return t, moved, nil
}

// Close releases the database handle.
func (c *Core) Close() error { return c.db.Close() }

// execer is what *sql.DB and *sql.Tx share for statements.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// affected runs a statement and returns the number of rows it changed.
func affected(ctx context.Context, e execer, query string, args ...any) (int64, error) {
	res, err := e.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c *Core) readTag(ctx context.Context, q Querier, name string) (persist.Tag, error) {
	query := c.q.readTag
	if c.cluster {
		query = c.q.readTagMode
	}
	t, err := c.scanTag(q.QueryRowContext(ctx, query, name))
	if errors.Is(err, sql.ErrNoRows) {
		return persist.Tag{}, persist.ErrNotFound
	}
	return t, err
}

// exists returns nil when the row exists and ErrNotFound when it does not.
func (c *Core) exists(ctx context.Context, q Querier, name string) error {
	var one int
	err := q.QueryRowContext(ctx, c.q.exists, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return persist.ErrNotFound
	}
	return err
}

type scanner interface{ Scan(dest ...any) error }

// scanTag reads a row of columns, or of modeColumns when the registry's
// tables are there.
func (c *Core) scanTag(s scanner) (persist.Tag, error) {
	var t persist.Tag
	var desc, mode, layout sql.NullString
	dest := []any{&t.Name, &t.MaxID, &t.Step, &desc, (*timeScanner)(&t.UpdateTime)}
	if c.cluster {
		dest = append(dest, &mode, &layout)
	}
	err := s.Scan(dest...)
	t.Description, t.Mode, t.Layout = desc.String, mode.String, layout.String
	return t, err
}

// timeScanner reads update_time leniently: it is informational, and a row
// written by hand or by another tool must not make Tags fail.
type timeScanner time.Time

// Scan implements sql.Scanner.
func (ts *timeScanner) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		*ts = timeScanner(v.UTC())
	case string:
		*ts = timeScanner(parseTime(v))
	case []byte:
		*ts = timeScanner(parseTime(string(v)))
	case int64:
		*ts = timeScanner(time.Unix(v, 0).UTC())
	default:
		*ts = timeScanner(time.Time{})
	}
	return nil
}

func parseTime(s string) time.Time {
	for _, layout := range []string{time.DateTime, time.RFC3339Nano, "2006-01-02 15:04:05.999999999", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC()
	}
	return time.Time{}
}
