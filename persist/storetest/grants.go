package storetest

// Least privilege: an existing Leaf database, made with Leaf's own DDL and
// sample row, and the grants a DBA gives an application. Whatever lets
// Leaf itself run (SELECT and UPDATE on leaf_alloc) lets leaf run; each
// capability missing beyond that turns one feature off, with one warning
// at open that says what to grant.

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
)

// Grants is what a backend with users and privileges gives RunGrants.
type Grants struct {
	// DB is a fresh, empty SQL database; DB.SQL runs statements as its
	// owner.
	DB *DB
	// LeafDDL is Meituan Leaf's CREATE TABLE leaf_alloc, in the backend's
	// dialect where it has to differ.
	LeafDDL string
	// User opens handles as a new user with only the grants given, each
	// "PRIVILEGES ON OBJECT", OBJECT leaf_alloc, leaf_guard or * (every
	// table of the database).
	User func(t *testing.T, grants ...string) OpenFunc
	// ReadOnly opens handles whose sessions are read-only (a DSN setting
	// such as MySQL's tx_read_only or PostgreSQL's
	// default_transaction_read_only).
	ReadOnly OpenFunc
}

// guardOff is in each warning that the persistent guard is off.
const guardOff = "so the persistent guard is off"

// clusterOff is in the warning that the cluster registry's tables are
// missing or not granted, and what that warning shows.
const clusterOff = "so cluster features are off"

var clusterOffSays = []string{"CREATE TABLE IF NOT EXISTS leaf_node", "GRANT SELECT, INSERT, UPDATE, DELETE ON"}

// Leaf's sample row, from its README.
const (
	leafSampleTag  = "leaf-segment-test"
	leafSampleStep = 2000
)

// RunGrants runs the least-privilege tests; newGrants is called once per
// subtest, for a fresh database.
func RunGrants(t *testing.T, newGrants func(t *testing.T) Grants) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, g Grants)
	}{
		{"SelectUpdateOnly", testSelectUpdateOnly},
		{"SelectUpdateOnlyCreateSchema", testSelectUpdateOnlyCreateSchema},
		{"GuardNotGranted", testGuardNotGranted},
		{"GuardReadOnlyGranted", testGuardReadOnlyGranted},
		{"WholeDatabaseDML", testWholeDatabaseDML},
		{"SelectOnly", testSelectOnly},
		{"ReadOnlySession", testReadOnlySession},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGrants(t)
			g.DB.SQL(t).Exec(t, g.LeafDDL)
			g.DB.SQL(t).Exec(t, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 1, ?, 'Test leaf Segment Mode Get Id')`,
				leafSampleTag, leafSampleStep)
			tc.fn(t, g)
		})
	}
}

// openLogged opens a handle with open, its log kept in logs; the schema
// is created only when create is set.
func openLogged(t *testing.T, open OpenFunc, create bool, logs *logbuf.Buffer) (persist.Store, error) {
	t.Helper()
	opts := testOptions()
	opts.CreateSchema = create
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := open(t, opts)
	if err == nil {
		closeOnCleanup(t, s)
	}
	return s, err
}

// wantWarnings checks that the log holds each warning of want once,
// saying what it lists, and no other warning (but one about Leaf's DDL in
// a database whose text compares case-insensitively, which is MySQL's).
func wantWarnings(t *testing.T, logs string, want map[string][]string) {
	t.Helper()
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, "level=WARN") || strings.Contains(line, "not compared byte for byte") ||
			strings.Contains(line, `msg="persist: to turn cluster features on,`) { // the statements after the warning
			continue
		}
		wanted := false
		for what := range want {
			wanted = wanted || strings.Contains(line, what)
		}
		if !wanted {
			t.Errorf("unexpected warning: %s", line)
		}
	}
	for what, says := range want {
		if n := strings.Count(logs, what); n != 1 {
			t.Errorf("%d warnings saying %q, want 1; log:\n%s", n, what, logs)
		}
		for _, s := range says {
			if !strings.Contains(logs, s) {
				t.Errorf("no warning says %q; log:\n%s", s, logs)
			}
		}
	}
}

// servesLikeLeaf: the sample tag hands out [1, 2001) first, as Leaf does,
// gives its tail back, and continues there.
func servesLikeLeaf(t *testing.T, s persist.Store) {
	t.Helper()
	wantTake(t, s, leafSampleTag, 0, persist.Range{Start: 1, End: 2001, Step: leafSampleStep})
	if ok, err := s.GiveBack(t.Context(), leafSampleTag, 2001, 3); !ok || err != nil {
		t.Fatalf("GiveBack(2001, 3) = %v, %v; want true", ok, err)
	}
	wantTake(t, s, leafSampleTag, 0, persist.Range{Start: 3, End: 2003, Step: leafSampleStep})
}

// cannotCreate: Create answers ErrDenied naming the privilege to grant.
func cannotCreate(t *testing.T, s persist.Store) {
	t.Helper()
	_, err := s.Create(t.Context(), "new", 10, "")
	if !errors.Is(err, persist.ErrDenied) || errors.Is(err, persist.ErrUnavailable) ||
		!strings.Contains(err.Error(), "INSERT") || !strings.Contains(err.Error(), "GRANT") {
		t.Fatalf("Create without INSERT: err = %v, want ErrDenied naming INSERT and its GRANT", err)
	}
}

// The grant: SELECT and UPDATE on leaf_alloc alone, schema
// creation off. leaf opens with the guard off and tags not creatable, one
// warning each, and serves as Leaf does.
func testSelectUpdateOnly(t *testing.T, g Grants) {
	var logs logbuf.Buffer
	s, err := openLogged(t, g.User(t, "SELECT, UPDATE ON leaf_alloc"), false, &logs)
	if err != nil {
		t.Fatalf("open with SELECT, UPDATE on leaf_alloc: %v", err)
	}
	if guardOf(t, s) {
		t.Error("GuardEnabled() = true without leaf_guard")
	}
	wantWarnings(t, logs.String(), map[string][]string{
		guardOff:                         {"CREATE TABLE IF NOT EXISTS leaf_guard", "GRANT SELECT, INSERT, UPDATE ON"},
		"may not insert into leaf_alloc": {"GRANT INSERT ON"},
		clusterOff:                       clusterOffSays,
	})
	if id := storeID(t, s); id != "" {
		t.Errorf("StoreID = %q without leaf_store, want none", id)
	}
	servesLikeLeaf(t, s)
	cannotCreate(t, s)
}

// The same grant with schema creation on (the default): the tables cannot
// be created, which is said once, and the rest is as without it.
func testSelectUpdateOnlyCreateSchema(t *testing.T, g Grants) {
	var logs logbuf.Buffer
	s, err := openLogged(t, g.User(t, "SELECT, UPDATE ON leaf_alloc"), true, &logs)
	if err != nil {
		t.Fatalf("open with SELECT, UPDATE on leaf_alloc and schema creation on: %v", err)
	}
	if guardOf(t, s) {
		t.Error("GuardEnabled() = true without leaf_guard")
	}
	wantWarnings(t, logs.String(), map[string][]string{
		"may not create tables":          nil,
		guardOff:                         {"CREATE TABLE IF NOT EXISTS leaf_guard", "GRANT SELECT, INSERT, UPDATE ON"},
		"may not insert into leaf_alloc": {"GRANT INSERT ON"},
		clusterOff:                       clusterOffSays,
	})
	servesLikeLeaf(t, s)
	cannotCreate(t, s)
}

// leaf_guard exists (made by someone allowed to), but the user may not
// touch it: the guard is off, and the warning shows the GRANT.
func testGuardNotGranted(t *testing.T, g Grants) {
	_ = g.DB.Open(t) // as the owner: creates leaf_guard
	var logs logbuf.Buffer
	s, err := openLogged(t, g.User(t, "SELECT, UPDATE ON leaf_alloc"), false, &logs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if guardOf(t, s) {
		t.Error("GuardEnabled() = true without privileges on leaf_guard")
	}
	wantWarnings(t, logs.String(), map[string][]string{
		guardOff:                         {"GRANT SELECT, INSERT, UPDATE ON"},
		"may not insert into leaf_alloc": {"GRANT INSERT ON"},
		clusterOff:                       clusterOffSays,
	})
	servesLikeLeaf(t, s)
}

// leaf_guard readable but not writable: the guard is off as well (it
// would fail every Take), with the same warning.
func testGuardReadOnlyGranted(t *testing.T, g Grants) {
	_ = g.DB.Open(t)
	var logs logbuf.Buffer
	s, err := openLogged(t, g.User(t, "SELECT, INSERT, UPDATE ON leaf_alloc", "SELECT ON leaf_guard"), false, &logs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if guardOf(t, s) {
		t.Error("GuardEnabled() = true with SELECT alone on leaf_guard")
	}
	wantWarnings(t, logs.String(), map[string][]string{
		guardOff:   {"may not read and write it", "GRANT SELECT, INSERT, UPDATE ON"},
		clusterOff: clusterOffSays,
	})
	servesLikeLeaf(t, s)
	mustCreate(t, s, "new", 10, "")
}

// SELECT, INSERT, UPDATE on the whole database, as the second
// grant: leaf works as Leaf does, tags can be created; without leaf_guard
// (and no right to create it) the guard is off.
func testWholeDatabaseDML(t *testing.T, g Grants) {
	var logs logbuf.Buffer
	s, err := openLogged(t, g.User(t, "SELECT, INSERT, UPDATE ON *"), false, &logs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	wantWarnings(t, logs.String(), map[string][]string{
		guardOff:   {"CREATE TABLE IF NOT EXISTS leaf_guard"},
		clusterOff: clusterOffSays,
	})
	servesLikeLeaf(t, s)
	mustCreate(t, s, "new", 10, "")
	wantTake(t, s, "new", 0, persist.Range{Start: 1, End: 11, Step: 10})

	// Once leaf_guard exists, the same user runs with the guard on, and
	// reads the identity the owner gave the store.
	owner := g.DB.Open(t)
	again, err := openLogged(t, g.User(t, "SELECT, INSERT, UPDATE ON *"), false, &logs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if !guardOf(t, again) {
		t.Error("GuardEnabled() = false with leaf_guard there and granted")
	}
	if id, want := storeID(t, again), storeID(t, owner); id != want || id == "" {
		t.Errorf("StoreID as the user = %q, as the owner %q", id, want)
	}
	// The registry's tables are there now, but the registry deletes rows
	// too: without DELETE it is off, saying what to grant; with it, on.
	if _, err := registry(t, again).Join(t.Context(), nodeInfo("a"), lease); !errors.Is(err, persist.ErrNoCluster) {
		t.Errorf("Join without DELETE on the registry's tables: %v, want ErrNoCluster", err)
	}
	if !strings.Contains(logs.String(), "GRANT SELECT, INSERT, UPDATE, DELETE ON") {
		t.Errorf("no warning shows the registry's GRANT; log:\n%s", logs.String())
	}
	withDelete, err := openLogged(t, g.User(t, "SELECT, INSERT, UPDATE, DELETE ON *"), false, &logs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	r := registry(t, withDelete)
	mustJoin(t, r, "a", lease)
	wantNodes(t, r, "a/-1/0")
}

// SELECT alone is not enough to run: the open fails, naming what to grant.
func testSelectOnly(t *testing.T, g Grants) {
	var logs logbuf.Buffer
	_, err := openLogged(t, g.User(t, "SELECT ON leaf_alloc"), false, &logs)
	if !errors.Is(err, persist.ErrDenied) || errors.Is(err, persist.ErrUnavailable) ||
		!strings.Contains(err.Error(), "SELECT and UPDATE on leaf_alloc") || !strings.Contains(err.Error(), "GRANT SELECT, UPDATE ON") {
		t.Fatalf("open with SELECT alone: err = %v, want ErrDenied naming SELECT and UPDATE and the GRANT", err)
	}
}

// Read-only sessions (a replica's DSN by mistake, or transactions made
// read-only for the user): the open fails, saying so.
func testReadOnlySession(t *testing.T, g Grants) {
	_ = g.DB.Open(t)
	var logs logbuf.Buffer
	_, err := openLogged(t, g.ReadOnly, false, &logs)
	if !errors.Is(err, persist.ErrReadOnly) || errors.Is(err, persist.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("open with read-only sessions: err = %v, want ErrReadOnly", err)
	}
}
