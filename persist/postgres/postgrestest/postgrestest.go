// Package postgrestest gives tests a fresh database of their own on a real
// PostgreSQL (the one scripts/postgres.sh starts), for the conformance
// suite and for other packages' tests.
package postgrestest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of storetest's raw handle

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/sqlstore"
	"github.com/leaf-id/leaf/persist/storetest"
)

// LeafDDL is Meituan Leaf's CREATE TABLE of leaf_alloc in PostgreSQL's
// types, as a user moving a Leaf database over would write it (Leaf's own
// is MySQL's), for tests of existing Leaf databases.
const LeafDDL = `CREATE TABLE leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint       NOT NULL DEFAULT 1,
  step        integer      NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// EnvDSN names the environment variable that holds the DSN of a
// PostgreSQL role allowed to create databases and roles.
const EnvDSN = "LEAF_TEST_POSTGRES_DSN"

// DB prepares a fresh database (see DSN) for the conformance suite, its
// sessions at the given default isolation level ("" for the server's,
// READ COMMITTED). It skips or fails the test as DSN does.
func DB(t *testing.T, isolation string) *storetest.DB {
	t.Helper()
	dsn := DSN(t)
	if isolation != "" {
		SetDefault(t, dsn, "default_transaction_isolation", isolation)
	}
	conflicts := isolation == "serializable" || isolation == "repeatable read"
	// The suite's own statements, an operator's by hand, run at READ
	// COMMITTED: they wait for a Take's row lock instead of failing.
	db := storetest.NewDBOn(t, Raw(t, WithParam(t, dsn, "default_transaction_isolation", "read committed")),
		func(t *testing.T, opts persist.Options) (persist.Store, error) {
			if conflicts && opts.MaxOpenConns == 0 {
				// Under contention every commit rolls back each Take that
				// overlapped it: fewer sessions per handle meet fewer of
				// them, and the suite's many Takes of one tag stay quick.
				opts.MaxOpenConns = 4
			}
			return postgres.Open(t.Context(), dsn, opts)
		})
	db.Conflicts = conflicts
	return db
}

// Raw is a plain handle on the database of dsn, for statements of the
// test's own (with ? placeholders), closed by t.Cleanup.
func Raw(t *testing.T, dsn string) storetest.SQL {
	t.Helper()
	h, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return storetest.SQL{DB: h, Rebind: sqlstore.NumberedPlaceholders}
}

// DSN returns the DSN of a new, empty database with a random name
// (leaf_test_<hex>), created with the DSN in LEAF_TEST_POSTGRES_DSN and
// dropped by t.Cleanup, so tests never see each other's rows. When the
// variable is unset the test is skipped, except on CI (CI=true), where it
// fails.
func DSN(t testing.TB) string {
	t.Helper()
	return NewDatabase(t, adminConfig(t).ConnString())
}

// NewDatabase creates a database with a random name (leaf_test_<hex>)
// with admin, the DSN of a role allowed to, drops it with t.Cleanup, and
// returns admin's DSN on it.
func NewDatabase(t testing.TB, admin string) string {
	t.Helper()
	name := "leaf_test_" + randomHex()
	Exec(t, admin, "CREATE DATABASE "+name)
	t.Cleanup(func() { Exec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	dsn := WithDatabase(t, admin, name)
	onEveryHost(t, dsn)
	return dsn
}

// onEveryHost waits until no host of dsn (several for a Patroni cluster)
// lacks its database: a standby replays CREATE DATABASE after the primary
// committed it, and a client that meets a standby without the database
// stops there (pgx gives up on 3D000) instead of trying the next host.
// A host that cannot be reached is not waited for: clients skip it.
func onEveryHost(t testing.TB, dsn string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Fallbacks) == 0 {
		return
	}
	hosts := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	for _, h := range hosts {
		one := cfg.Copy()
		one.Host, one.Port, one.TLSConfig, one.Fallbacks = h.Host, h.Port, h.TLSConfig, nil
		one.ValidateConnect = nil // a standby too
		for deadline := time.Now().Add(time.Minute); ; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := pgx.ConnectConfig(ctx, one)
			cancel()
			if err == nil {
				conn.Close(context.Background())
				break
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "3D000" {
				break // down, or another answer: not a missing database
			}
			if time.Now().After(deadline) {
				t.Fatalf("database %s still missing on %s:%d after a minute", cfg.Database, h.Host, h.Port)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// SetDefault makes value the default of setting for every new session on
// the database of dsn (ALTER DATABASE ... SET), as a DBA would configure
// the server.
func SetDefault(t testing.TB, dsn, setting, value string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	Exec(t, dsn, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET "+setting+" = '"+value+"'")
}

// WithDatabase returns dsn (a URL, or key=value pairs) naming database
// name instead.
func WithDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	return with(t, dsn, "dbname", name, func(u *url.URL) { u.Path = "/" + name })
}

// WithUser returns dsn (a URL, or key=value pairs) logging in as user with
// password instead.
func WithUser(t testing.TB, dsn, user, password string) string {
	t.Helper()
	dsn = with(t, dsn, "user", user, func(u *url.URL) { u.User = url.UserPassword(user, password) })
	return with(t, dsn, "password", password, func(*url.URL) {})
}

// WithParam returns dsn (a URL, or key=value pairs) with one more
// setting, e.g. a run-time parameter of its sessions.
func WithParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	return with(t, dsn, key, value, func(u *url.URL) {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		// %20, not +: pgx reads the query as a path, where + is itself.
		u.RawQuery += url.PathEscape(key) + "=" + url.PathEscape(value)
	})
}

// WithAddr returns dsn (a URL, or key=value pairs) connecting to addr
// (host:port) instead, e.g. a Proxy's.
func WithAddr(t testing.TB, dsn, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	dsn = with(t, dsn, "host", host, func(u *url.URL) { u.Host = addr })
	return with(t, dsn, "port", port, func(*url.URL) {})
}

// Addr returns the host:port dsn connects to.
func Addr(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// with returns dsn with one setting changed: edit changes a URL; key=value
// pairs get key=value appended (the last one counts).
func with(t testing.TB, dsn, key, value string, edit func(*url.URL)) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		edit(u)
		return u.String()
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

// Exec runs statements on a short-lived connection to dsn.
func Exec(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	// Not t.Context(): it is already cancelled when Cleanup runs.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func adminConfig(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	admin := storetest.EnvDSN(t, EnvDSN, "start a throwaway PostgreSQL with "+
		"`eval \"export $(scripts/postgres.sh start /tmp/leaf-postgres)\"` "+
		"(remove it with `scripts/postgres.sh destroy /tmp/leaf-postgres`)")
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
	}
	return cfg
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Role creates a role of its own for the test (leaf_u_<hex>, with a random
// password), dropped by t.Cleanup, gives it grants in the database of dsn,
// and returns dsn logging in as that role. Each grant is "PRIVILEGES ON
// OBJECT", OBJECT a table or "*" (every table of the schema public), e.g.
// "SELECT, UPDATE ON leaf_alloc": the grants a DBA gives an application,
// written as for mysqltest.User.
func Role(t testing.TB, dsn string, grants ...string) string {
	t.Helper()
	name := "leaf_u_" + randomHex()[:8]
	pw := randomHex()
	Exec(t, dsn, "CREATE ROLE "+name+" LOGIN PASSWORD '"+pw+"'")
	t.Cleanup(func() {
		// The database first (DSN's cleanup then finds it gone): its
		// privileges go with it, and a role with none can be dropped.
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		admin := adminConfig(t).ConnString()
		Exec(t, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)")
		Exec(t, admin, "DROP ROLE IF EXISTS "+name)
	})
	for _, g := range grants {
		g = strings.Replace(g, " ON *", " ON ALL TABLES IN SCHEMA public", 1)
		Exec(t, dsn, "GRANT "+g+" TO "+name)
	}
	return WithUser(t, dsn, name, pw)
}
