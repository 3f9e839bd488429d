// Package postgres is leaf's store on PostgreSQL and the engines that speak
// its protocol, CockroachDB and YugabyteDB (pgx, through its database/sql
// adapter), on the SQL engine of persist/sqlstore and Leaf's own leaf_alloc
// table in PostgreSQL's types. OpenDeferred opens it lazily, for a server
// that must start while the database is down.
//
// A Take is correct at every isolation level these engines use by default:
// READ COMMITTED (PostgreSQL), REPEATABLE READ (YugabyteDB), SERIALIZABLE
// (CockroachDB). The row lock of leaf_alloc orders the Takes of a tag; at
// the two stricter levels the database rolls back the loser of a conflict
// (SQLSTATE 40001, or 40P01 for a deadlock) and the core runs the whole
// transaction again, with jittered backoff, within the deadline. A commit
// whose answer is lost (the connection broken once COMMIT was sent, or
// CockroachDB's 40003) is persist.ErrAmbiguous and never run again by the
// store: the range it may have taken is never served, and the next Take
// reads max_id anew, above it if it was taken.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlstore"
)

// Store is the PostgreSQL backend: every method of persist.Backend and
// persist.Registry, from the SQL engine (sqlstore.Store).
type Store struct {
	sqlstore.Store
	core *sqlstore.Core // for the durability check (durability.go)
}

// The DDL of DESIGN.md §2 in PostgreSQL's types. biz_tag compares byte for
// byte, as on SQLite and MySQL: the database's default collation is
// deterministic, so only equal bytes are equal (no COLLATE: CockroachDB's
// collated strings compare only with strings of the same collation).
// update_time has no ON UPDATE in PostgreSQL: every statement of leaf that
// changes a row sets it.
const createTable = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INTEGER      NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// The persistent guard, leaf's own table. %s gives biz_tag the collation of
// leaf_alloc.biz_tag, when that has one of its own (guardDDL).
const createGuard = `CREATE TABLE IF NOT EXISTS leaf_guard (
  biz_tag VARCHAR(128)%s NOT NULL,
  high    BIGINT       NOT NULL,
  PRIMARY KEY (biz_tag)
)`

// guardDDL is the CREATE TABLE of leaf_guard, its biz_tag compared as
// leaf_alloc's is: a nondeterministic collation makes two spellings share
// one row of leaf_alloc, and they must then share the guard's too.
// Without leaf_alloc, or with the database's default collation, none.
func guardDDL(ctx context.Context, q sqlstore.Querier) string {
	return fmt.Sprintf(createGuard, bizTagCollation(ctx, q))
}

// bizTagCollation is ` COLLATE "x"`, that of leaf_alloc.biz_tag, for the
// tables of leaf that hold tags; "" without leaf_alloc or with the
// database's default collation.
func bizTagCollation(ctx context.Context, q sqlstore.Querier) string {
	var coll sql.NullString
	err := q.QueryRowContext(ctx, `SELECT collation_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'leaf_alloc' AND column_name = 'biz_tag'`).Scan(&coll)
	if err != nil || !coll.Valid || !identifier(coll.String) {
		return ""
	}
	return ` COLLATE "` + coll.String + `"`
}

// folds reports whether leaf_alloc.biz_tag has a collation that may call
// different bytes equal (a nondeterministic one, e.g. case-insensitive),
// so that TakeBatch takes its tags one statement each. A collation whose
// kind cannot be read (another engine's catalogue) counts as folding:
// that way is correct with every collation.
func folds(ctx context.Context, q sqlstore.Querier) bool {
	var coll sql.NullString
	err := q.QueryRowContext(ctx, `SELECT collation_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'leaf_alloc' AND column_name = 'biz_tag'`).Scan(&coll)
	if err != nil || !coll.Valid || coll.String == "" {
		return err != nil
	}
	var deterministic bool
	err = q.QueryRowContext(ctx, `SELECT collisdeterministic FROM pg_collation WHERE collname = $1 LIMIT 1`, coll.String).Scan(&deterministic)
	return err != nil || !deterministic
}

// identifier reports whether s is a plain name (letters, digits, '_', '-',
// '.'), safe to put between double quotes as it is.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && r != '-' && r != '.' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// SQLSTATE codes the backend tells apart.
const (
	serializationFailure    = "40001"
	deadlockDetected        = "40P01"
	statementUnknown        = "40003" // CockroachDB: the outcome is ambiguous
	undefinedTable          = "42P01"
	insufficientPrivilege   = "42501"
	readOnlyTransaction     = "25006"
	adminShutdown           = "57P01" // pg_terminate_backend, smart or fast shutdown
	crashShutdown           = "57P02"
	cannotConnectNow        = "57P03" // starting up, shutting down, in recovery
	queryCanceled           = "57014" // statement_timeout, a cancel request
	tooManyConnections      = "53300"
	lockNotAvailable        = "55P03" // lock_timeout
	connectionExceptionCode = "08"    // class 08: connection exceptions
)

func sqlState(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func dialect() *sqlstore.Dialect {
	return &sqlstore.Dialect{
		Name:        "postgres",
		CreateTable: createTable,
		GuardDDL:    guardDDL,
		// On a conflict, DO NOTHING leaves the existing row as it is. At
		// REPEATABLE READ and SERIALIZABLE, a row inserted by a
		// transaction this one cannot see is a serialization failure,
		// retried.
		IgnoreDuplicate: ` ON CONFLICT (biz_tag) DO NOTHING`,
		// A locking read waits for the row's lock and then reads its
		// latest version at READ COMMITTED; at the stricter levels a row
		// changed since the snapshot is a serialization failure, retried.
		ForUpdate:   ` FOR UPDATE`,
		Folds:       folds,
		Rebind:      sqlstore.NumberedPlaceholders,
		Unavailable: unavailable,
		// The database rolled the whole transaction back: running it again
		// is safe. A write refused as read-only (25006) wrote nothing: the
		// node became a standby under the connection (a switchover); a
		// new connection goes to the new primary when the DSN lists every
		// node with target_session_attrs=read-write.
		Retryable: func(err error) bool {
			switch sqlState(err) {
			case serializationFailure, deadlockDetected, readOnlyTransaction:
				return true
			}
			return false
		},
		Ambiguous:     func(err error) bool { return sqlState(err) == statementUnknown },
		NoTable:       func(err error) bool { return sqlState(err) == undefinedTable },
		Denied:        func(err error) bool { return sqlState(err) == insufficientPrivilege },
		Grant:         grant,
		ReadOnly:      func(err error) bool { return sqlState(err) == readOnlyTransaction },
		ReadOnlyState: readOnlyState,
		Returning:     true,
		// A Take with the guard is one statement, one round trip.
		OneStatementTake: true,
		// Connections are recycled below common proxy and server idle
		// limits.
		MaxOpenConns:    10,
		ConnMaxLifetime: 3 * time.Minute,
		// leaf_mode is joined with leaf_alloc on biz_tag: the same
		// collation, as for leaf_guard.
		ClusterDDL: func(ctx context.Context, q sqlstore.Querier) []string {
			return sqlstore.ClusterDDL("VARCHAR(128)"+bizTagCollation(ctx, q), "")
		},
		// The clock when the statement runs, not the transaction's start
		// (now()): a lease is measured from when it was written.
		Now:      `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`,
		IfAbsent: func(key string) string { return " ON CONFLICT (" + key + ") DO NOTHING" },
	}
}

// grant is the GRANT of privileges on table, in the session's schema, to
// the connected role.
func grant(ctx context.Context, q sqlstore.Querier, privileges, table string) string {
	var role, schema sql.NullString
	_ = q.QueryRowContext(ctx, `SELECT current_user, current_schema()`).Scan(&role, &schema)
	name := pgx.Identifier{table}
	if schema.String != "" {
		name = pgx.Identifier{schema.String, table}
	}
	return fmt.Sprintf("GRANT %s ON %s TO %s", privileges, name.Sanitize(), pgx.Identifier{role.String}.Sanitize())
}

// readOnlyState says why the session's transactions are read-only ("" when
// they are not): a standby, or default_transaction_read_only set for the
// role, the database or the DSN.
func readOnlyState(ctx context.Context, q sqlstore.Querier) string {
	var recovery sql.NullBool
	var ro sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only')`).Scan(&recovery, &ro); err != nil {
		return ""
	}
	switch {
	case recovery.Bool:
		return "a standby in recovery"
	case ro.String == "on":
		return "transaction_read_only is on: default_transaction_read_only is set for the role, the database or in the DSN"
	}
	return ""
}

// unavailable tells the errors of a database that cannot be reached, is
// going away, or did not answer in time, beyond the net and context errors
// the core checks itself. A refused password or a missing database is not
// one: no wait fixes it.
func unavailable(err error) bool {
	switch code := sqlState(err); {
	case code == "":
	case strings.HasPrefix(code, connectionExceptionCode):
		return true
	default:
		switch code {
		case serializationFailure, deadlockDetected, statementUnknown, readOnlyTransaction,
			adminShutdown, crashShutdown, cannotConnectNow, queryCanceled, tooManyConnections, lockNotAvailable:
			return true
		}
		return false
	}
	return pgconn.Timeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}

// Open connects with a DSN in pgx's form, a URL
// ("postgres://leaf:secret@127.0.0.1:5432/leaf?sslmode=disable") or
// key=value pairs ("host=127.0.0.1 user=leaf password=secret dbname=leaf"),
// with libpq's settings and environment variables (PGHOST, PGPASSWORD,
// ...). It sets connect_timeout=5s, application_name=leaf and a UTC
// session time zone unless the DSN sets them. The pool holds 10
// connections, recycled after 3 minutes, unless opts says otherwise.
// Errors never include the DSN: the caller names it, redacted.
func Open(ctx context.Context, dsn string, opts persist.Options) (*Store, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("persist: open postgres: %w", err)
	}
	s, err := open(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("persist: open postgres: %w", err)
	}
	return s, nil
}

// OpenDeferred is Open for a server that must start while the database is
// down (sqlstore.Deferred): when it cannot be reached (persist.ErrUnavailable:
// refused, timed out, starting up), the store opens it on first use.
// Every other error, a bad DSN or a refused password, is returned, as by
// Open, without the DSN.
func OpenDeferred(ctx context.Context, dsn string, opts persist.Options) (*sqlstore.Deferred, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("persist: open postgres: %w", err)
	}
	return sqlstore.OpenDeferred(ctx, "postgres", func(ctx context.Context) (persist.Backend, error) {
		s, err := open(ctx, cfg, opts)
		if err != nil {
			return nil, fmt.Errorf("persist: open postgres: %w", err)
		}
		return s, nil
	}, opts.Log(), where(cfg)...)
}

func open(ctx context.Context, cfg *pgx.ConnConfig, opts persist.Options) (*Store, error) {
	c := sqlstore.NewCore(stdlib.OpenDB(*cfg), dialect(), opts)
	if err := c.InitSchema(ctx, opts.CreateSchema); err != nil {
		_ = c.Close()
		return nil, err
	}
	opts.Log().Info("persist: postgres open", where(cfg)...)
	return &Store{Store: sqlstore.NewStore(c), core: c}, nil
}

// where names the database for the log: host, port, database, never the
// password.
func where(cfg *pgx.ConnConfig) []any {
	return []any{"addr", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), "db", cfg.Database}
}

// config parses dsn and applies the settings Open documents.
func config(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: bad DSN: %s", persist.ErrInvalid, parseError(err))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	// Each statement in one round trip, an unnamed statement with the
	// parameters' types taken from their Go types: the default prepares
	// every statement it has not seen on the connection first, a second
	// round trip, and a TakeBatch's statements vary with its tags. (Also
	// what pgbouncer in transaction mode needs.) A DSN that sets it keeps
	// its choice.
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "leaf"
	}
	// update_time is TIMESTAMPTZ in the tables leaf creates; a table made
	// by hand with TIMESTAMP is read in the session's zone: UTC.
	if _, ok := cfg.RuntimeParams["timezone"]; !ok {
		cfg.RuntimeParams["timezone"] = "UTC"
	}
	return cfg, nil
}

// parseError is pgx's reason for refusing a DSN without the DSN, which its
// message quotes with a redaction of its own: the caller names the DSN in
// leaf's one redacted form.
func parseError(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	msg := pe.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		return msg[i+3:]
	}
	return "cannot parse the DSN"
}
