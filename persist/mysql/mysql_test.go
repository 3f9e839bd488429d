package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/storetest"
)

func TestMySQL(t *testing.T) { storetest.Run(t, mysqltest.DB) }

// An existing Leaf database and the grants a DBA gives an application.
func TestMySQLGrants(t *testing.T) {
	storetest.RunGrants(t, func(t *testing.T) storetest.Grants {
		dsn := mysqltest.DSN(t)
		open := func(dsn string) storetest.OpenFunc {
			return func(t *testing.T, opts persist.Options) (persist.Store, error) {
				return mysql.Open(t.Context(), dsn, opts)
			}
		}
		return storetest.Grants{
			DB:      storetest.NewDB(t, "mysql", dsn, open(dsn)),
			LeafDDL: mysqltest.LeafDDL,
			User: func(t *testing.T, grants ...string) storetest.OpenFunc {
				return open(mysqltest.User(t, dsn, grants...))
			},
			ReadOnly: open(withParam(t, dsn, "tx_read_only", "1")),
		}
	})
}

func TestMySQLRegistry(t *testing.T) {
	storetest.RunRegistry(t, func(t *testing.T) storetest.Opener { return mysqltest.DB(t).Open })
}

// Open errors say what went wrong without the password.
func TestOpenErrors(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name string
		dsn  string
		want error
	}{
		{"Unreachable", "leaf:" + pw + "@tcp(127.0.0.1:1)/leaf", persist.ErrUnavailable},
		{"BadDSN", "leaf:" + pw + "@tcp(127.0.0.1:3306/leaf?x=(", persist.ErrInvalid},
		{"BadParam", "leaf:" + pw + "@tcp(127.0.0.1:3306)/leaf?timeout=soon", persist.ErrInvalid},
		{"OddPassword", "leaf:" + pw + "@/)(@tcp(127.0.0.1:1)/leaf", persist.ErrUnavailable},
		{"NoDatabase", "leaf:" + pw + "@tcp(127.0.0.1:3306)/", persist.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := mysql.Open(ctx, tc.dsn, persist.Options{CreateSchema: true})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

func TestMySQLWithoutSchema(t *testing.T) {
	dsn := mysqltest.DSN(t)
	_, err := mysql.Open(t.Context(), dsn, persist.Options{})
	if !errors.Is(err, persist.ErrSchema) || !strings.Contains(err.Error(), "leaf_alloc") {
		t.Fatalf("err = %v, want ErrSchema naming leaf_alloc", err)
	}
	cfg, _ := gomysql.ParseDSN(dsn)
	if strings.Contains(err.Error(), cfg.Passwd) {
		t.Fatalf("error shows the password: %v", err)
	}
}

// A table made with Leaf's DDL verbatim, in a database whose default
// collation is case-insensitive (as most are), works as it is; the store
// warns that such tags share rows.
func TestMySQLExistingLeafTable(t *testing.T) {
	dsn := mysqltest.DSN(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		`ALTER DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci`,
		`CREATE TABLE leaf_alloc (
		  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
		  max_id      BIGINT       NOT NULL DEFAULT 1,
		  step        INT          NOT NULL,
		  description VARCHAR(256) DEFAULT NULL,
		  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
		  PRIMARY KEY (biz_tag)
		)`,
		`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')`,
	} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	var logs logbuf.Buffer
	s, err := mysql.Open(t.Context(), dsn, persist.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "not compared byte for byte") {
		t.Errorf("no collation warning; logs:\n%s", logs.String())
	}
	r, err := s.Take(t.Context(), "leaf-segment-test", 0)
	if err != nil || r != (persist.Range{Start: 1, End: 2001, Step: 2000}) {
		t.Fatalf("Take = %+v, %v", r, err)
	}
	// Case-insensitive: the same row, so still no repeated ID.
	r, err = s.Take(t.Context(), "LEAF-SEGMENT-TEST", 0)
	if err != nil || r != (persist.Range{Start: 2001, End: 4001, Step: 2000}) {
		t.Fatalf("Take in other case = %+v, %v", r, err)
	}
	tag, err := s.Tag(t.Context(), "leaf-segment-test")
	if err != nil || tag.MaxID != 4001 || tag.Description != "Test leaf Segment Mode Get Id" || tag.UpdateTime.IsZero() {
		t.Fatalf("Tag = %+v, %v", tag, err)
	}

	// The warning's statements are the fix: run as they are, the next
	// start warns of nothing and the row keeps its place.
	s.Close()
	var warning string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "not compared byte for byte") {
			warning = line
		}
	}
	for _, key := range []string{"sql", "sql_guard"} {
		m := regexp.MustCompile(`\b` + key + `=("(?:[^"\\]|\\.)*")`).FindStringSubmatch(warning)
		if m == nil && key == "sql_guard" {
			continue // no leaf_guard: schema creation is off
		}
		if m == nil {
			t.Fatalf("the collation warning has no %s; logs:\n%s", key, logs.String())
		}
		stmt, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var again logbuf.Buffer
	s2, err := mysql.Open(t.Context(), dsn, persist.Options{Logger: slog.New(slog.NewTextHandler(&again, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if strings.Contains(again.String(), "compared byte for byte") || strings.Contains(again.String(), "is not compared as") {
		t.Errorf("collation warnings after the fix:\n%s", again.String())
	}
	if r, err := s2.Take(t.Context(), "leaf-segment-test", 0); err != nil || r.Start != 4001 {
		t.Fatalf("Take after the fix = %+v, %v", r, err)
	}
}

// leaf_guard, created next to a table made with Leaf's DDL in a
// case-insensitive database, compares tags as leaf_alloc does: "x" and
// "X" share one row of leaf_alloc, so they must share one guard, else the
// guard of "x" misses the ranges taken as "X" and a re-created row repeats
// them. A leaf_guard made by hand with another collation is warned about.
func TestMySQLGuardFollowsLeafCollation(t *testing.T) {
	dsn := mysqltest.DSN(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(stmt string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	collation := func(table string) string {
		t.Helper()
		var c string
		if err := db.QueryRowContext(t.Context(), `SELECT COLLATION_NAME FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'biz_tag'`, table).Scan(&c); err != nil {
			t.Fatalf("collation of %s.biz_tag: %v", table, err)
		}
		return c
	}
	exec(`ALTER DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci`)
	exec(`CREATE TABLE leaf_alloc (
	  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
	  max_id      BIGINT       NOT NULL DEFAULT 1,
	  step        INT          NOT NULL,
	  description VARCHAR(256) DEFAULT NULL,
	  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
	  PRIMARY KEY (biz_tag))`)
	exec(`INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('x', 1, 100)`)

	s, err := mysql.Open(t.Context(), dsn, persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := collation("leaf_guard"), collation("leaf_alloc"); got != want {
		t.Fatalf("leaf_guard.biz_tag collation %s, leaf_alloc.biz_tag %s", got, want)
	}
	steps := []struct {
		tag  string
		want persist.Range
	}{
		{"x", persist.Range{Start: 1, End: 101, Step: 100}},
		{"X", persist.Range{Start: 101, End: 201, Step: 100}},
	}
	for _, st := range steps {
		if r, err := s.Take(t.Context(), st.tag, 0); err != nil || r != st.want {
			t.Fatalf("Take(%q) = %+v, %v; want %+v", st.tag, r, err, st.want)
		}
	}
	exec(`DELETE FROM leaf_alloc WHERE biz_tag = 'x'`)
	exec(`INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('x', 1, 100)`)
	want := persist.Range{Start: 201, End: 301, Step: 100, Repaired: true, Answered: 1}
	if r, err := s.Take(t.Context(), "x", 0); err != nil || r != want {
		t.Fatalf("Take(x) after the row was re-created = %+v, %v; want %+v", r, err, want)
	}

	exec(`DROP TABLE leaf_guard`)
	exec(`CREATE TABLE leaf_guard (biz_tag VARCHAR(128) NOT NULL, high BIGINT NOT NULL, PRIMARY KEY (biz_tag)) COLLATE utf8mb4_bin`)
	var logs logbuf.Buffer
	s2, err := mysql.Open(t.Context(), dsn, persist.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !s2.GuardEnabled() || !strings.Contains(logs.String(), "leaf_guard.biz_tag is not compared as leaf_alloc.biz_tag") {
		t.Fatalf("GuardEnabled() = %v; want true and a warning about leaf_guard's collation; logs:\n%s", s2.GuardEnabled(), logs.String())
	}
}

// A row lock held by another session makes Take wait; the query timeout
// bounds the wait and the failure is ErrUnavailable.
func TestMySQLLockedTimesOut(t *testing.T) {
	dsn := mysqltest.DSN(t)
	// The timeout is long enough for the set-up's queries on a busy
	// machine, far below innodb_lock_wait_timeout (50 s).
	s, err := mysql.Open(t.Context(), dsn, persist.Options{CreateSchema: true, QueryTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var maxID int64
	if err := tx.QueryRowContext(t.Context(), `SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' FOR UPDATE`).Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Take(t.Context(), "t", 0)
	if !errors.Is(err, persist.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		// DeadlineExceeded is the query timeout's: the lock's own wait
		// (busy_timeout, innodb_lock_wait_timeout) ends with another error.
		t.Fatalf("Take under a held lock: err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The abandoned statement may hold the lock until the server notices;
	// give this call a deadline of its own.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if r, err := s.Take(ctx, "t", 0); err != nil || r.Start != 1 {
		t.Fatalf("Take after the lock = %+v, %v; want the first range", r, err)
	}
}
