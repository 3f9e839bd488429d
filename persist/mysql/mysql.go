// Package mysql is leaf's store on MySQL 5.7+, MariaDB 10.x and TiDB
// (go-sql-driver/mysql), on the SQL engine of persist/sqlstore and Leaf's
// own leaf_alloc table, so existing Leaf databases work unchanged.
// OpenDeferred opens it lazily, for a server that must start while the
// database is down.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlstore"
)

// Store is the MySQL backend: every method of persist.Backend, from the
// SQL engine (sqlstore.Store).
type Store struct {
	sqlstore.Store
	core *sqlstore.Core // for the durability check (durability.go)
}

// The DDL of DESIGN.md §2, columns verbatim. The table options matter when
// we create the table: InnoDB for row locks, and a binary collation so that
// tags are compared byte for byte ("Order" and "order", "é" and "e" are
// different tags), as SQLite does. An existing table is used as it is.
const createTable = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// The persistent guard: per tag, the end (exclusive) of the highest range
// leaf handed out, with the table options leaf creates leaf_alloc with.
// Not Leaf's: Leaf servers ignore it. %s is biz_tag's character set and
// collation, those of leaf_alloc.biz_tag (guardDDL).
const createGuard = `CREATE TABLE IF NOT EXISTS leaf_guard (
  biz_tag VARCHAR(128)%s NOT NULL,
  high    BIGINT       NOT NULL,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// guardDDL is the CREATE TABLE of leaf_guard, its biz_tag compared as
// leaf_alloc's is: a table made with Leaf's DDL in a case-insensitive
// database shares one row between "Order" and "order", and so must the
// guard, else the guard of one spelling would miss the ranges taken with
// the other. Without leaf_alloc (or its catalogue), utf8mb4_bin.
func guardDDL(ctx context.Context, q sqlstore.Querier) string {
	return fmt.Sprintf(createGuard, bizTagCollation(ctx, q))
}

// bizTagCollation is " CHARACTER SET x COLLATE y", those of
// leaf_alloc.biz_tag, for the tables of leaf that hold tags; "" without
// leaf_alloc (or its catalogue).
func bizTagCollation(ctx context.Context, q sqlstore.Querier) string {
	var cs, coll sql.NullString
	err := q.QueryRowContext(ctx, `SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leaf_alloc' AND COLUMN_NAME = 'biz_tag'`).Scan(&cs, &coll)
	if err != nil || !identifier(cs.String) || !identifier(coll.String) {
		return ""
	}
	return " CHARACTER SET " + cs.String + " COLLATE " + coll.String
}

// identifier reports whether s is a plain name (letters, digits, '_'),
// safe to put into a statement as it is.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// Server error numbers.
const (
	erLockWaitTimeout  = 1205
	erLockDeadlock     = 1213
	erNoSuchTable      = 1146
	erConCount         = 1040 // too many connections
	erServerShutdown   = 1053
	erQueryInterrupted = 1317
	erReadOnly         = 1290 // --read-only, e.g. a demoted primary
	erReadOnlyTx       = 1792
	erReadOnlyMode     = 1836
	erConnKilled       = 1927 // MariaDB
	erMaxExecTime      = 3024
	erTiDBWriteConfl   = 9007 // TiDB optimistic transaction conflict
	erTiDBTxnRetry     = 8022
	erTiDBForUpdConfl  = 8002
	erDBAccessDenied   = 1044
	erAccessDenied     = 1227 // a global privilege (SUPER, ...)
	erTableAccess      = 1142 // SELECT, INSERT, UPDATE, CREATE ... denied on a table
	erColumnAccess     = 1143
)

// Galera's server error numbers.
const (
	// A node outside the cluster's primary component (it lost its quorum,
	// or is still joining) answers every statement with 1047 and writes
	// nothing.
	erWsrepNotReady = 1047
	// COMMIT failed; on Galera "WSREP replication failed", when the node
	// loses the cluster as it replicates: the write-set may have reached
	// the others, so the outcome is unknown.
	erErrorDuringCommit = 1180
)

func dialect() *sqlstore.Dialect {
	return &sqlstore.Dialect{
		Name:        "mysql",
		CreateTable: createTable,
		GuardDDL:    guardDDL,
		ForUpdate:   ` FOR UPDATE`,
		// On a small table the optimizer scans rather than look up a list
		// of keys, and an UPDATE or a locking read locks every row it
		// scans: batches of other tags would wait on each other.
		ByKey: ` FORCE INDEX (PRIMARY)`,
		Folds: func(ctx context.Context, q sqlstore.Querier) bool {
			return folds(collation(ctx, q, "leaf_alloc"))
		},
		// Not INSERT IGNORE: it turns errors such as truncation into
		// warnings. On a duplicate primary key InnoDB locks the existing
		// row (a record lock, no gap lock), and the no-op update leaves it
		// as it is, counting 0 rows (CLIENT_FOUND_ROWS is off).
		IgnoreDuplicate: ` ON DUPLICATE KEY UPDATE biz_tag = biz_tag`,
		Unavailable: func(err error) bool {
			if errors.Is(err, mysql.ErrInvalidConn) {
				return true
			}
			switch errNo(err) {
			case erLockWaitTimeout, erLockDeadlock, erConCount, erServerShutdown, erQueryInterrupted,
				erReadOnly, erReadOnlyTx, erReadOnlyMode, erConnKilled, erMaxExecTime,
				erTiDBWriteConfl, erTiDBTxnRetry, erTiDBForUpdConfl, erWsrepNotReady, erErrorDuringCommit:
				return true
			}
			return false
		},
		// The server rolled the transaction (1205: the statement; the core
		// rolls back the rest) back, so running it again is safe. On
		// Galera 1213 is also a certification failure at COMMIT, and 1047
		// a node that replicated nothing.
		Retryable: func(err error) bool {
			switch errNo(err) {
			case erLockWaitTimeout, erLockDeadlock, erTiDBWriteConfl, erTiDBTxnRetry, erTiDBForUpdConfl,
				erWsrepNotReady:
				return true
			}
			return false
		},
		Drop:    func(err error) bool { return errNo(err) == erWsrepNotReady },
		NoTable: func(err error) bool { return errNo(err) == erNoSuchTable },
		Denied: func(err error) bool {
			switch errNo(err) {
			case erTableAccess, erColumnAccess, erDBAccessDenied, erAccessDenied:
				return true
			}
			return false
		},
		Grant: grant,
		ReadOnly: func(err error) bool {
			switch errNo(err) {
			case erReadOnly, erReadOnlyTx, erReadOnlyMode:
				return true
			}
			return false
		},
		ReadOnlyState: readOnlyState,
		// Connections are recycled below common proxy and server idle
		// limits.
		MaxOpenConns:    10,
		ConnMaxLifetime: 3 * time.Minute,
		// leaf_mode is joined with leaf_alloc on biz_tag: the same
		// character set and collation, as for leaf_guard.
		ClusterDDL: func(ctx context.Context, q sqlstore.Querier) []string {
			return sqlstore.ClusterDDL("VARCHAR(128)"+bizTagCollation(ctx, q),
				" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
		},
		// NOW(3) in the session's time zone, which Open sets to UTC.
		Now:      `SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)`,
		IfAbsent: func(key string) string { return " ON DUPLICATE KEY UPDATE " + key + " = " + key },
	}
}

// grant is the GRANT of privileges on table to the connected account
// (CURRENT_USER(): the account the server matched, user@host).
func grant(ctx context.Context, q sqlstore.Querier, privileges, table string) string {
	var account, db sql.NullString
	_ = q.QueryRowContext(ctx, `SELECT CURRENT_USER(), DATABASE()`).Scan(&account, &db)
	user, host := account.String, "%"
	if at := strings.LastIndexByte(user, '@'); at >= 0 {
		user, host = user[:at], user[at+1:]
	}
	quote := func(s, q string) string { return q + strings.ReplaceAll(s, q, q+q) + q }
	return fmt.Sprintf("GRANT %s ON %s.%s TO %s@%s", privileges, quote(db.String, "`"), quote(table, "`"),
		quote(user, "'"), quote(host, "'"))
}

// readOnlyState says why the server takes no writes ("" when it does): a
// write's error would not, as the driver turns it into a lost connection
// (RejectReadOnly, so that the pool finds a new primary).
func readOnlyState(ctx context.Context, q sqlstore.Querier) string {
	is := func(variable string) (on, known bool) {
		var v sql.NullInt64
		err := q.QueryRowContext(ctx, `SELECT `+variable).Scan(&v)
		return v.Int64 != 0, err == nil
	}
	if on, _ := is(`@@global.read_only`); on {
		return "the server's read_only is ON: a replica, or a primary made read-only"
	}
	// MySQL 8 knows transaction_read_only, MariaDB tx_read_only.
	for _, v := range []string{`@@session.transaction_read_only`, `@@session.tx_read_only`} {
		if on, known := is(v); known {
			if on {
				return "the session's transactions are read-only (" + v[len("@@session."):] + ", set for the user or in the DSN)"
			}
			break
		}
	}
	return ""
}

func errNo(err error) uint16 {
	var e *mysql.MySQLError
	if errors.As(err, &e) {
		return e.Number
	}
	return 0
}

// Open connects with a go-sql-driver DSN such as
// "leaf:secret@tcp(127.0.0.1:3306)/leaf". It forces parseTime=true and
// clientFoundRows=false, sets timeout=5s, readTimeout=30s, writeTimeout=30s,
// a UTC session time zone and a strict sql_mode unless the DSN sets them,
// and on TiDB pessimistic transactions (an optimistic transaction's
// automatic retry could hand out a range twice). The pool holds 10
// connections, recycled after 3 minutes, unless opts says otherwise.
// Errors never include the DSN: the caller names it, redacted.
func Open(ctx context.Context, dsn string, opts persist.Options) (*Store, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("persist: open mysql: %w", err)
	}
	m, err := open(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("persist: open mysql: %w", err)
	}
	return m, nil
}

// OpenDeferred is Open for a server that must start while the database is
// down (sqlstore.Deferred): when it cannot be reached (persist.ErrUnavailable:
// refused, timed out, shutting down), the store opens it on first use.
// Every other error, a bad DSN or a refused password, is returned, as by
// Open, without the DSN.
func OpenDeferred(ctx context.Context, dsn string, opts persist.Options) (*sqlstore.Deferred, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("persist: open mysql: %w", err)
	}
	return sqlstore.OpenDeferred(ctx, "mysql", func(ctx context.Context) (persist.Backend, error) {
		// open sets parameters of its own (TiDB's): each attempt gets a copy.
		m, err := open(ctx, cfg.Clone(), opts)
		if err != nil {
			return nil, fmt.Errorf("persist: open mysql: %w", err)
		}
		return m, nil
	}, opts.Log(), "addr", cfg.Addr, "db", cfg.DBName)
}

func open(ctx context.Context, cfg *mysql.Config, opts persist.Options) (*Store, error) {
	d := dialect()
	c, err := connect(cfg, opts, d)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Params["tidb_txn_mode"]; !ok {
		tidb, err := isTiDB(ctx, c)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		if tidb {
			_ = c.Close()
			cfg.Params["tidb_txn_mode"] = "'pessimistic'"
			if c, err = connect(cfg, opts, d); err != nil {
				return nil, err
			}
			opts.Log().Info("persist: TiDB detected, using pessimistic transactions")
		}
	}
	// TiDB is left on one statement per round trip: whether it takes
	// several at once depends on its settings.
	d.Batched = cfg.InterpolateParams && cfg.Params["tidb_txn_mode"] == ""
	if err := galera(ctx, c, d, opts.Log()); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := c.InitSchema(ctx, opts.CreateSchema); err != nil {
		_ = c.Close()
		return nil, err
	}
	warnCollation(ctx, c, opts.Log())
	opts.Log().Info("persist: mysql open", "addr", cfg.Addr, "db", cfg.DBName)
	return &Store{Store: sqlstore.NewStore(c), core: c}, nil
}

func connect(cfg *mysql.Config, opts persist.Options, d *sqlstore.Dialect) (*sqlstore.Core, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sqlstore.NewCore(sql.OpenDB(conn), d, opts), nil
}

// galera turns on the commit check of Dialect.Verify when the server is
// a Galera node (wsrep_on): MariaDB can lose a brute-force abort, after
// which the session's next statements each commit alone and COMMIT
// commits nothing, so a range would be handed out that another server
// also holds. The check reads @@in_transaction (MariaDB) and the
// session's last written GTID. On other servers it changes nothing.
func galera(ctx context.Context, c *sqlstore.Core, d *sqlstore.Dialect, log *slog.Logger) error {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	var on sql.NullInt64
	if err := c.DB().QueryRowContext(ctx, `SELECT @@wsrep_on`).Scan(&on); err != nil {
		if errNo(err) != 0 {
			return nil // no such variable: not a Galera server (MySQL, TiDB)
		}
		return c.Wrap(err)
	}
	if on.Int64 == 0 {
		return nil
	}
	const verify, written = `SELECT @@in_transaction, WSREP_LAST_WRITTEN_GTID()`, `SELECT WSREP_LAST_WRITTEN_GTID()`
	var in sql.NullInt64
	var gtid sql.NullString
	if err := c.DB().QueryRowContext(ctx, verify).Scan(&in, &gtid); err != nil {
		if errNo(err) == 0 {
			return c.Wrap(err)
		}
		// A Galera server without @@in_transaction (MySQL's): the GTID
		// alone still proves each commit that changed rows.
		log.Warn("persist: a Galera server without @@in_transaction: commits are checked by their GTID only", "err", err)
		d.Verify, d.Written = `SELECT 1, WSREP_LAST_WRITTEN_GTID()`, written
		return nil
	}
	d.Verify, d.Written = verify, written
	log.Info("persist: Galera cluster: every commit is checked against lost brute-force aborts")
	return nil
}

// config parses dsn and applies the settings Open documents.
func config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's messages quote at most a parameter's value or the
		// database's name, never the password.
		return nil, fmt.Errorf("%w: bad DSN: %w", persist.ErrInvalid, err)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w: the DSN names no database", persist.ErrInvalid)
	}
	cfg.ParseTime = true
	// Parameters written into the statement by the driver: one round trip
	// a statement, where a server-side prepare would take two (a distant
	// database makes a load wait for each). The driver escapes them for
	// the connection's character set and sql_mode, and falls back to a
	// prepare where it cannot (a few Asian multi-byte character sets).
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	// A Take's statements go to the server together (sqlstore's
	// Dialect.Batched): with the parameters interpolated above, two round
	// trips instead of six.
	cfg.MultiStatements = true
	// Create and SetStep read RowsAffected as changed rows.
	cfg.ClientFoundRows = false
	// A read-only server (a demoted primary) drops the connection, so the
	// pool finds the new primary.
	cfg.RejectReadOnly = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// TIMESTAMP values come back in the session time zone and the driver
	// reads them in cfg.Loc (UTC by default): make the two agree.
	if _, ok := cfg.Params["time_zone"]; !ok && cfg.Loc == time.UTC {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	// Strict mode turns truncation and bad characters into errors instead
	// of silently storing another tag.
	if _, ok := cfg.Params["sql_mode"]; !ok {
		cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
	}
	return cfg, nil
}

func isTiDB(ctx context.Context, c *sqlstore.Core) (bool, error) {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	var v string
	if err := c.DB().QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v); err != nil {
		return false, c.Wrap(err)
	}
	return strings.Contains(strings.ToLower(v), "tidb"), nil
}

// warnCollation logs when biz_tag compares case- or accent-insensitively
// (a table made by Leaf's DDL in a database with such a default): then
// tags like "Order" and "order" share one row. IDs stay unique, but the two
// tags share one sequence. It also logs when leaf_guard.biz_tag compares
// otherwise than leaf_alloc.biz_tag (a table made by hand): then the guard
// of one spelling may miss ranges taken with another.
func warnCollation(ctx context.Context, c *sqlstore.Core, log *slog.Logger) {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	alloc := collation(ctx, c.DB(), "leaf_alloc")
	if folds(alloc) {
		cs, _, _ := strings.Cut(alloc, "_")
		attrs := []any{"collation", alloc,
			"sql", "ALTER TABLE leaf_alloc MODIFY biz_tag VARCHAR(128) CHARACTER SET " + cs + " COLLATE " + cs + "_bin NOT NULL DEFAULT ''"}
		if c.GuardEnabled() {
			attrs = append(attrs, "sql_guard", "ALTER TABLE leaf_guard MODIFY biz_tag VARCHAR(128) CHARACTER SET "+cs+" COLLATE "+cs+"_bin NOT NULL")
		}
		log.Warn("persist: leaf_alloc.biz_tag is not compared byte for byte: tags that differ only in case or accents share one row; "+
			"to compare names byte for byte, stop the servers and run the statements below (sql, then sql_guard), "+
			"once every client spells each tag as its row does: afterwards another spelling is another tag", attrs...)
	}
	if !c.GuardEnabled() {
		return
	}
	if guard := collation(ctx, c.DB(), "leaf_guard"); alloc != "" && guard != "" && guard != alloc {
		log.Warn("persist: leaf_guard.biz_tag is not compared as leaf_alloc.biz_tag is, so the guard of one spelling of a tag may miss ranges taken with another: "+
			"give leaf_guard.biz_tag leaf_alloc.biz_tag's character set and collation (ALTER TABLE leaf_guard MODIFY biz_tag ...), keeping the highest high of rows that then collide",
			"leaf_alloc", alloc, "leaf_guard", guard)
	}
}

// collation is the collation of table.biz_tag; "" when it cannot be read.
func collation(ctx context.Context, q sqlstore.Querier, table string) string {
	var coll sql.NullString
	err := q.QueryRowContext(ctx, `SELECT COLLATION_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'biz_tag'`, table).Scan(&coll)
	if err != nil {
		return ""
	}
	return coll.String
}

// folds reports whether the collation coll compares names otherwise than
// byte for byte.
func folds(coll string) bool {
	return coll != "" && coll != "binary" && !strings.HasSuffix(coll, "_bin")
}
