package e2e

// Helpers of the fault tests (chaos_test.go, outage_test.go,
// faults_test.go): databases the tests own, a client that waits as long as
// the test does, and readers of LEAF.INFO and INFO.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
	"github.com/leaf-id/leaf/persist/sqlstore"
	"github.com/leaf-id/leaf/persist/storetest"
)

// store is a database the leaf processes of a test share: the environment
// that points leaf at it, a handle for the test's own SQL (SQL stores),
// and the changes an operator makes by hand (raw).
type store struct {
	name string // "sqlite", "mysql", "postgres" or "etcd"
	env  []string
	db   *sql.DB
	raw  storetest.Raw
	// rebind turns the ? placeholders of exec's statements into the
	// database's form; nil keeps them.
	rebind func(string) string
}

// sqliteStore is a fresh SQLite file in dir.
func sqliteStore(t *testing.T, dir string) store {
	t.Helper()
	path := filepath.Join(dir, "shared.db")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_busy_timeout=30000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return store{name: "sqlite", env: []string{"LEAF_STORE_DRIVER=sqlite", "LEAF_STORE_DSN=" + path, "LEAF_STORE_CREATE_DATABASE=true"}, db: db, raw: storetest.SQLRaw(db)}
}

// forEachSharedStore runs f on a fresh SQLite file in dir, on a fresh
// database of the MariaDB of LEAF_TEST_MYSQL_DSN and on one of the
// PostgreSQL of LEAF_TEST_POSTGRES_DSN: env points leaf at it.
func forEachSharedStore(t *testing.T, f func(t *testing.T, dir string, env []string)) {
	forEachStoreOf(t, sharedStores, f)
}

// forEachBackend is forEachSharedStore and, beside them, a fresh prefix
// of the etcd cluster of LEAF_TEST_ETCD_ENDPOINTS: every backend.
func forEachBackend(t *testing.T, f func(t *testing.T, dir string, env []string)) {
	forEachStoreOf(t, append(sharedStores[:len(sharedStores):len(sharedStores)], namedStore{"Etcd", func(t *testing.T, _ string) store {
		eps := etcdtest.Endpoints(t)
		return etcdStoreAt(t, eps, etcdtest.Prefix(t, eps))
	}}), f)
}

// namedStore opens a fresh store of one backend for a subtest.
type namedStore struct {
	name string
	open func(t *testing.T, dir string) store
}

var sharedStores = []namedStore{
	{"SQLite", sqliteStore},
	{"MySQL", func(t *testing.T, _ string) store { return mysqlStore(t) }},
	{"PostgreSQL", func(t *testing.T, _ string) store { return postgresStore(t) }},
}

// forEachStoreOf runs f on a fresh store of each of tests, in parallel
// subtests: the stores share nothing.
func forEachStoreOf(t *testing.T, tests []namedStore, f func(t *testing.T, dir string, env []string)) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			f(t, dir, tc.open(t, dir).env)
		})
	}
}

// mysqlStore is a fresh database on the MariaDB of LEAF_TEST_MYSQL_DSN
// (skipped when unset, failed when CI=true: mysqltest.DSN).
func mysqlStore(t *testing.T) store {
	t.Helper()
	return mysqlStoreAt(t, mysqltest.DSN(t))
}

func mysqlStoreAt(t *testing.T, dsn string) store {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return store{name: "mysql", env: []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + dsn}, db: db, raw: storetest.SQLRaw(db)}
}

// postgresStore is a fresh database on the PostgreSQL of
// LEAF_TEST_POSTGRES_DSN (skipped when unset, failed when CI=true:
// postgrestest.DSN).
func postgresStore(t *testing.T) store {
	t.Helper()
	return postgresStoreAt(t, postgrestest.DSN(t))
}

func postgresStoreAt(t *testing.T, dsn string) store {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return store{name: "postgres", env: []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + dsn}, db: db,
		raw: storetest.SQL{DB: db, Rebind: sqlstore.NumberedPlaceholders}, rebind: sqlstore.NumberedPlaceholders}
}

// exec runs one statement on the store, as an operator would by hand.
func (s store) exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.rebind != nil {
		stmt = s.rebind(stmt)
	}
	if _, err := s.db.ExecContext(ctx, stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// dbServer is a database server of one test alone (scripts/mariadb.sh
// or scripts/postgres.sh in a temporary directory), so the test may kill,
// pause and restart it.
type dbServer struct {
	t      *testing.T
	driver string // store.driver: "mysql" or "postgres"
	script string // its script in scripts/
	envKey string // the variable the script prints the DSN in
	dir    string
	dsn    string
}

// ownMariaDB starts a MariaDB for t alone, stopped at cleanup. Without the
// MariaDB programs the test is skipped, or failed when CI=true.
func ownMariaDB(t *testing.T) *dbServer {
	t.Helper()
	need(t, haveProgram("mariadbd", "mariadb-install-db"), "mariadbd not found: install mariadb-server (make test does, as root)")
	return ownServer(t, &dbServer{driver: "mysql", script: "mariadb.sh", envKey: "LEAF_TEST_MYSQL_DSN"}, "stop")
}

// ownPostgres starts a PostgreSQL for t alone, removed at cleanup. Without
// the PostgreSQL programs the test is skipped, or failed when CI=true.
func ownPostgres(t *testing.T) *dbServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	need(t, len(bins) > 0 || haveProgram("initdb", "postgres"), "initdb not found: install postgresql (make test does, as root)")
	return ownServer(t, &dbServer{driver: "postgres", script: "postgres.sh", envKey: "LEAF_TEST_POSTGRES_DSN"}, "destroy")
}

// need skips t, or fails it when CI=true, unless ok.
func need(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// ownServer starts s in a temporary directory of t; cleanup runs the
// script's cleanup command on it.
func ownServer(t *testing.T, s *dbServer, cleanup string) *dbServer {
	t.Helper()
	s.t, s.dir = t, t.TempDir()
	t.Cleanup(func() {
		if out, err := s.run(cleanup); err != nil {
			t.Errorf("%s %s: %v\n%s", s.script, cleanup, err, out)
		}
	})
	s.start()
	return s
}

// haveProgram reports whether every one of names is on the PATH or in a
// system directory off a non-root PATH.
func haveProgram(names ...string) bool {
	for _, name := range names {
		if _, err := exec.LookPath(name); err == nil {
			continue
		}
		found := false
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// run runs the server's script with cmd on the test's directory.
func (s *dbServer) run(cmd string) (string, error) {
	out, err := exec.Command("bash", scriptPath(s.script), cmd, s.dir).CombinedOutput()
	return string(out), err
}

// start starts the server, again on the same port and data after kill or
// stop, so the DSN that leaf holds stays valid.
func (s *dbServer) start() {
	s.t.Helper()
	cmd := exec.Command("bash", scriptPath(s.script), "start", s.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("%s start: %v\n%s", s.script, err, stderr.String())
	}
	dsn, ok := strings.CutPrefix(strings.TrimSpace(string(out)), s.envKey+"=")
	if !ok {
		s.t.Fatalf("%s start printed %q", s.script, out)
	}
	if s.dsn != "" && dsn != s.dsn {
		s.t.Fatalf("the database came back as %s, was %s: its port was taken", dsn, s.dsn)
	}
	s.dsn = dsn
}

// kill crashes the server (SIGKILL) and waits until it is gone.
func (s *dbServer) kill() { s.t.Helper(); s.must("kill") }

// pause stops the server (SIGSTOP): connections are accepted by the kernel
// and never answered. resume continues it.
func (s *dbServer) pause()  { s.t.Helper(); s.must("pause") }
func (s *dbServer) resume() { s.t.Helper(); s.must("resume") }

// stop shuts the server down cleanly.
func (s *dbServer) stop() { s.t.Helper(); s.must("stop") }

func (s *dbServer) must(cmd string) {
	s.t.Helper()
	if out, err := s.run(cmd); err != nil {
		s.t.Fatalf("%s %s: %v\n%s", s.script, cmd, err, out)
	}
}

// password is the password in the server's DSN.
func (s *dbServer) password() string {
	if s.driver == "mysql" {
		cfg, err := mysql.ParseDSN(s.dsn)
		if err != nil {
			s.t.Fatal(err)
		}
		return cfg.Passwd
	}
	u, err := url.Parse(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	pw, _ := u.User.Password()
	return pw
}

// rootSQL runs stmt as MariaDB's root over its socket (the root account
// authenticates the system's root user: the tests run as root).
func (s *dbServer) rootSQL(stmt string) {
	s.t.Helper()
	out, err := exec.Command("mariadb", "--no-defaults", "--socket="+filepath.Join(s.dir, "mariadb.sock"),
		"-u", "root", "-e", stmt).CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s as root: %v\n%s", stmt, err, out)
	}
}

// env points leaf at the server.
func (s *dbServer) env() []string {
	return []string{"LEAF_STORE_DRIVER=" + s.driver, "LEAF_STORE_DSN=" + s.dsn}
}

// patientClient is a single-connection client that waits for a reply as
// long as the test runs: how fast leaf answers is never asserted, only that
// it answers.
func patientClient(t testing.TB, p *proc) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: p.Addr, PoolSize: 1, MaxRetries: -1,
		ReadTimeout: 5 * time.Minute, WriteTimeout: 5 * time.Minute,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// infoInt is an integer field of LEAF.INFO.
func infoInt(t testing.TB, f map[string]any, key string) int64 {
	t.Helper()
	n, ok := f[key].(int64)
	if !ok {
		t.Fatalf("LEAF.INFO %s = %#v, want an integer", key, f[key])
	}
	return n
}

// infoField is one field of INFO section, "" when absent.
func infoField(t testing.TB, c *redis.Client, section, key string) string {
	t.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for line := range strings.SplitSeq(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return v
		}
	}
	return ""
}

// waitInfo polls LEAF.INFO tag until cond holds; it fails the test when
// the test's context ends first.
func waitInfo(t testing.TB, c *redis.Client, tag, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var f map[string]any
	poll(t, func() bool {
		f = redistest.LeafInfo(t, c, tag)
		return cond(f)
	}, func() string { return fmt.Sprintf("LEAF.INFO %s never showed %s: %v", tag, what, f) })
	return f
}

// waitStoreOK polls INFO until store_ok is want ("0" or "1").
func waitStoreOK(t testing.TB, c *redis.Client, want string) {
	t.Helper()
	var v string
	poll(t, func() bool {
		v = infoField(t, c, "leaf", "store_ok")
		return v == want
	}, func() string { return fmt.Sprintf("INFO store_ok stayed %q, want %q", v, want) })
}

// waitServing waits until the server's node in the cluster registry
// serves: registered, its lease current and the changes made meanwhile
// read (it registers at its first heartbeat once the database answers).
// A server without the registry serves from the start.
func waitServing(t testing.TB, c *redis.Client) {
	t.Helper()
	var enabled, serving string
	poll(t, func() bool {
		enabled, serving = infoField(t, c, "cluster", "leaf_cluster"), infoField(t, c, "cluster", "node_serving")
		return enabled == "0" || serving == "1"
	}, func() string { return fmt.Sprintf("INFO leaf_cluster %q, node_serving stayed %q", enabled, serving) })
}

// poll calls cond every 10 ms until it holds, and fails the test with
// failure's text when a minute passes first (a bound on a hang, not a
// timing assertion).
func poll(t testing.TB, cond func() bool, failure func() string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(failure())
		}
	}
}

// nextReady waits until tag has both segments cached.
func nextReady(t testing.TB, c *redis.Client, tag string) map[string]any {
	t.Helper()
	return waitInfo(t, c, tag, "next_ready", func(f map[string]any) bool {
		return f["next_ready"] == int64(1) && f["loading"] == int64(0)
	})
}

// incrErr is INCR tag; an error reply comes back as its text.
func incrErr(c *redis.Client, tag string) (int64, string, error) {
	id, err := c.Incr(context.Background(), tag).Result()
	var re redis.Error
	if errors.As(err, &re) {
		return 0, re.Error(), nil
	}
	return id, "", err
}

// incrAfterRecovery is INCR tag once the database is back and a probe has
// found it (store_ok:1): an error reply (TRYAGAIN) is accepted only a few
// times, for a load that started before the database answered; it returns
// the ID and the replies it retried.
func incrAfterRecovery(t testing.TB, c *redis.Client, tag string) (int64, []string) {
	t.Helper()
	waitStoreOK(t, c, "1")
	waitServing(t, c)
	var tries []string
	for len(tries) < 5 {
		id, reply, err := incrErr(c, tag)
		if err != nil {
			t.Fatalf("INCR %s: %v", tag, err)
		}
		if reply == "" {
			return id, tries
		}
		if !strings.HasPrefix(reply, "TRYAGAIN ") {
			t.Fatalf("INCR %s once the database is back: %q", tag, reply)
		}
		tries = append(tries, reply)
	}
	t.Fatalf("INCR %s: no ID once the database is back: %q", tag, tries)
	return 0, nil
}

// incrRising sends INCR tag n times: each reply must be an ID above the
// one before, the first above last; what names the IDs in a failure. It
// returns the last ID.
func incrRising(t testing.TB, c *redis.Client, tag, what string, last, n int64) int64 {
	t.Helper()
	for i := range n {
		id, reply, err := incrErr(c, tag)
		if err != nil || reply != "" {
			t.Fatalf("%s %d of %d: INCR = %v, %q", what, i+1, n, err, reply)
		}
		if id <= last {
			t.Fatalf("%s %d of %d: INCR = %d after %d", what, i+1, n, id, last)
		}
		last = id
	}
	return last
}

// mustInt parses an INFO value.
func mustInt(t testing.TB, key, v string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO %s = %q, want an integer", key, v)
	}
	return n
}
