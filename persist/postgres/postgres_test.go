package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
	"github.com/leaf-id/leaf/persist/storetest"
)

// The conformance suite at PostgreSQL's default, READ COMMITTED, and again
// with every session SERIALIZABLE, as on CockroachDB: there, Takes of one
// tag that overlap in time are rolled back (40001) and run again, which
// the suite requires to happen when two handles contend on one tag (no
// overlap, no hole either way).
func TestPostgres(t *testing.T) {
	for _, tc := range []struct{ name, isolation string }{
		{"ReadCommitted", ""},
		{"Serializable", "serializable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) *storetest.DB { return postgrestest.DB(t, tc.isolation) })
		})
	}
}

// The registry's suite at both levels too: under SERIALIZABLE, nodes
// leasing worker ids and publishing changes at once are rolled back and
// run again.
func TestPostgresRegistry(t *testing.T) {
	for _, tc := range []struct{ name, isolation string }{
		{"ReadCommitted", ""},
		{"Serializable", "serializable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunRegistry(t, func(t *testing.T) storetest.Opener { return postgrestest.DB(t, tc.isolation).Open })
		})
	}
}

// An existing Leaf database and the grants a DBA gives an application.
func TestPostgresGrants(t *testing.T) {
	storetest.RunGrants(t, func(t *testing.T) storetest.Grants {
		dsn := postgrestest.DSN(t)
		open := func(dsn string) storetest.OpenFunc {
			return func(t *testing.T, opts persist.Options) (persist.Store, error) {
				return postgres.Open(t.Context(), dsn, opts)
			}
		}
		return storetest.Grants{
			DB:      storetest.NewDBOn(t, postgrestest.Raw(t, dsn), open(dsn)),
			LeafDDL: postgrestest.LeafDDL,
			User: func(t *testing.T, grants ...string) storetest.OpenFunc {
				return open(postgrestest.Role(t, dsn, grants...))
			},
			ReadOnly: open(postgrestest.WithParam(t, dsn, "default_transaction_read_only", "on")),
		}
	})
}

// openRaw is a plain handle on dsn for the test's own SQL, closed at cleanup.
func openRaw(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func maxID(t *testing.T, db *sql.DB, tag string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), `SELECT max_id FROM leaf_alloc WHERE biz_tag = $1`, tag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// openStore opens the backend on dsn with a deadline a starved machine
// does not reach (a serializable Take of a hot row may lose to the others
// for half a minute at a load average of 20); guard
// false opens it on a database without leaf_guard (a Take is then one
// UPDATE ... RETURNING).
func openStore(t *testing.T, dsn string, guard bool) *postgres.Store {
	t.Helper()
	if !guard {
		s, err := postgres.Open(t.Context(), dsn, persist.Options{CreateSchema: true, QueryTimeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		postgrestest.Exec(t, dsn, `DROP TABLE leaf_guard`)
	}
	s, err := postgres.Open(t.Context(), dsn, persist.Options{CreateSchema: guard, QueryTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.GuardEnabled() != guard {
		t.Fatalf("GuardEnabled() = %v, want %v", s.GuardEnabled(), guard)
	}
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Take(t.Context(), "t", 0); err != nil || r != (persist.Range{Start: 1, End: 11, Step: 10}) {
		t.Fatalf("first Take = %+v, %v", r, err)
	}
	return s
}

// takeBehind runs a Take of tag t that waits for a lock other holds,
// commits other once the Take waits, and returns what the Take answered.
func takeBehind(t *testing.T, s persist.Store, raw *sql.DB, other *sql.Tx) (persist.Range, error) {
	t.Helper()
	done := storetest.TakeAsync(s, "t", 0)
	waitLockWait(t, raw)
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	return res.Range, res.Err
}

// waitLockWait polls until a session of the database waits for a lock.
func waitLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for a session to wait on a lock: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no session ever waited on the row lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A Take meets a concurrent update of its row, forced: another session
// holds the row lock, the Take queues for it, the other session commits.
// At READ COMMITTED the Take proceeds on the new row; at REPEATABLE READ
// and SERIALIZABLE the database rolls it back (40001) and the store runs it
// again: one retry, and the range follows the other session's change.
// Each with the guard (a transaction) and without (one statement).
func TestConflictRetried(t *testing.T) {
	tests := []struct {
		isolation   string
		wantRetries int
	}{
		{"read committed", 0},
		{"repeatable read", 1},
		{"serializable", 1},
	}
	for _, tc := range tests {
		for _, guard := range []bool{true, false} {
			name := strings.ReplaceAll(tc.isolation, " ", "_")
			if !guard {
				name += "/NoGuard"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dsn := postgrestest.DSN(t)
				postgrestest.SetDefault(t, dsn, "default_transaction_isolation", tc.isolation)
				s := openStore(t, dsn, guard)
				raw := openRaw(t, dsn)

				other, err := raw.BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Rollback()
				if _, err := other.ExecContext(t.Context(), `UPDATE leaf_alloc SET max_id = max_id + 100 WHERE biz_tag = 't'`); err != nil {
					t.Fatal(err)
				}
				r, err := takeBehind(t, s, raw, other)
				want := persist.Range{Start: 111, End: 121, Step: 10, Retries: tc.wantRetries}
				if err != nil || r != want {
					t.Fatalf("Take = %+v, %v; want %+v", r, err, want)
				}
				if got := maxID(t, raw, "t"); got != 121 {
					t.Fatalf("max_id = %d, want 121", got)
				}
			})
		}
	}
}

// A commit whose answer is lost, forced by a proxy that breaks the
// connection once the client sent it: the Take fails with ErrAmbiguous
// (and ErrUnavailable), is not run again by the store (max_id moved once
// at most), and the next Take starts at max_id, above the lost range
// whether or not it was taken.
func TestAmbiguousCommit(t *testing.T) {
	tests := []struct {
		name      string
		cut       postgrestest.Cut
		guard     bool
		lowered   bool  // max_id lowered by hand to 5, below the guard: the Take is a transaction that repairs
		wantMaxID int64 // after the lost Take of [11, 21)
	}{
		{"CommittedStatement", postgrestest.AfterCommit, true, false, 21},
		{"CommittedStatementNoGuard", postgrestest.AfterCommit, false, false, 21},
		{"CommittedTx", postgrestest.AfterCommit, true, true, 21},
		{"RolledBack", postgrestest.BeforeCommit, true, true, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := postgrestest.DSN(t)
			p := postgrestest.NewProxy(t, postgrestest.Addr(t, dsn))
			s := openStore(t, postgrestest.WithAddr(t, dsn, p.Addr()), tc.guard)
			raw := openRaw(t, dsn)
			if tc.lowered {
				if _, err := raw.ExecContext(t.Context(), `UPDATE leaf_alloc SET max_id = 5 WHERE biz_tag = 't'`); err != nil {
					t.Fatal(err)
				}
			}

			p.Arm(tc.cut)
			_, err := s.Take(t.Context(), "t", 0)
			if !errors.Is(err, persist.ErrAmbiguous) || !errors.Is(err, persist.ErrUnavailable) {
				t.Fatalf("Take across a cut connection: err = %v, want ErrAmbiguous and ErrUnavailable", err)
			}
			select {
			case <-p.Cuts():
			case <-time.After(time.Minute):
				t.Fatal("the proxy cut no connection")
			}
			if got := maxID(t, raw, "t"); got != tc.wantMaxID {
				t.Fatalf("max_id after the lost Take = %d, want %d (taken once, never twice)", got, tc.wantMaxID)
			}
			want := persist.Range{Start: tc.wantMaxID, End: tc.wantMaxID + 10, Step: 10}
			if tc.wantMaxID < 11 { // below the guard: repaired
				want = persist.Range{Start: 11, End: 21, Step: 10, Repaired: true, Answered: tc.wantMaxID}
			}
			if r, err := s.Take(t.Context(), "t", 0); err != nil || r != want {
				t.Fatalf("next Take = %+v, %v; want %+v", r, err, want)
			}
		})
	}
}

// TestOneStatementTakeBelowLockedGuard: the guard is raised by another
// transaction while a one-statement Take waits for its row: the Take finds
// its range below the guard once it holds the row, leaves that range
// unused and takes the next one above the guard, repaired.
func TestOneStatementTakeBelowLockedGuard(t *testing.T) {
	t.Parallel()
	dsn := postgrestest.DSN(t)
	s := openStore(t, dsn, true) // max_id 11, guard 11
	raw := openRaw(t, dsn)

	other, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(t.Context(), `UPDATE leaf_guard SET high = 1000 WHERE biz_tag = 't'`); err != nil {
		t.Fatal(err)
	}
	r, err := takeBehind(t, s, raw, other)
	// [11, 21) was reserved by the statement and is never handed out.
	want := persist.Range{Start: 1000, End: 1010, Step: 10, Repaired: true, Answered: 21}
	if err != nil || r != want {
		t.Fatalf("Take = %+v, %v; want %+v", r, err, want)
	}
	if got := maxID(t, raw, "t"); got != 1010 {
		t.Fatalf("max_id = %d, want 1010", got)
	}
}
