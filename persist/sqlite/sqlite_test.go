package sqlite_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/persist/storetest"
)

func TestSQLite(t *testing.T) { storetest.Run(t, newDB) }

func TestSQLiteRegistry(t *testing.T) {
	storetest.RunRegistry(t, func(t *testing.T) storetest.Opener { return newDB(t).Open })
}

// newDB prepares a fresh SQLite database file for the conformance suite,
// on a memory file system where there is one (memDir), as make test keeps
// etcd's data: the suite checks what the store does, and its tests of
// 10,000 Takes otherwise wait on the disk's syncs a fifth of their time.
// The tests of the file itself, below, keep it in t.TempDir().
func newDB(t *testing.T) *storetest.DB {
	t.Helper()
	path := filepath.Join(memDir(t), "data", "leaf.db")
	// The driver this package registers; the busy timeout as the suite's.
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(path)}).EscapedPath() + "?_busy_timeout=30000"
	return storetest.NewDB(t, "sqlite", dsn, func(t *testing.T, opts persist.Options) (persist.Store, error) {
		return sqlite.Open(t.Context(), path, opts)
	})
}

// memDir is a fresh directory on /dev/shm, removed at cleanup, or
// t.TempDir() where there is none.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "leaf-sqlite-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func openSQLite(t *testing.T, path string, create bool) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, persist.Options{CreateSchema: create, BusyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenPaths(t *testing.T) {
	tests := []struct {
		name string
		rel  string
	}{
		{"MissingParents", filepath.Join("a", "b", "c", "leaf.db")},
		{"OddCharacters", filepath.Join("we?ird #dir %20", "leaf db?x=1.db")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.rel)
			s := openSQLite(t, path, true)
			if s.Path() != path {
				t.Errorf("Path() = %q, want %q", s.Path(), path)
			}
			if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
				t.Fatalf("database file at %q: %v", path, err)
			}
		})
	}
}

func TestOpenRefusesNonFiles(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db?mode=memory"} {
		_, err := sqlite.Open(t.Context(), path, persist.Options{CreateSchema: true})
		if !errors.Is(err, persist.ErrInvalid) {
			t.Errorf("Open(%q) err = %v, want ErrInvalid", path, err)
		}
	}
}

func TestOpenWithoutSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	_, err := sqlite.Open(t.Context(), path, persist.Options{})
	if !errors.Is(err, persist.ErrSchema) || !strings.Contains(err.Error(), "leaf_alloc") {
		t.Fatalf("Open without the table and without CreateSchema: err = %v, want ErrSchema naming leaf_alloc", err)
	}
	s := openSQLite(t, path, true)
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	// Now the table exists: opening without CreateSchema works and sees it.
	s2 := openSQLite(t, path, false)
	if tag, err := s2.Tag(t.Context(), "t"); err != nil || tag.Step != 10 {
		t.Fatalf("Tag on the second handle = %+v, %v", tag, err)
	}
}

// A leaf_guard table that is not leaf's (made by another tool) stops Open:
// leaf would otherwise run without the guard the table promises.
func TestSQLiteForeignGuardTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	openSQLite(t, path, true).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`DROP TABLE leaf_guard`, `CREATE TABLE leaf_guard (name TEXT PRIMARY KEY, hi INTEGER)`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()
	for _, create := range []bool{false, true} {
		_, err := sqlite.Open(t.Context(), path, persist.Options{CreateSchema: create})
		if !errors.Is(err, persist.ErrSchema) || !strings.Contains(err.Error(), "leaf_guard") {
			t.Errorf("Open (CreateSchema %v) with a foreign leaf_guard: err = %v, want ErrSchema naming leaf_guard", create, err)
		}
	}
}

// A file laid out as Leaf's (the table made by hand, a row inserted the way
// Leaf's docs do) is used as it is.
func TestSQLiteExistingTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE leaf_alloc (
		  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
		  max_id      BIGINT       NOT NULL DEFAULT 1,
		  step        INT          NOT NULL,
		  description VARCHAR(256) DEFAULT NULL,
		  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
		  PRIMARY KEY (biz_tag))`,
		`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	s := openSQLite(t, path, false)
	r, err := s.Take(t.Context(), "leaf-segment-test", 0)
	if err != nil || r != (persist.Range{Start: 1, End: 2001, Step: 2000}) {
		t.Fatalf("Take = %+v, %v", r, err)
	}
	tag, err := s.Tag(t.Context(), "leaf-segment-test")
	if err != nil || tag.Description != "Test leaf Segment Mode Get Id" || tag.UpdateTime.IsZero() {
		t.Fatalf("Tag = %+v, %v", tag, err)
	}
}

func TestSQLiteFileIsWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	s := openSQLite(t, path, true)
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	// journal_mode=WAL is a property of the file: another, plain
	// connection sees it.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// envChild tells the test binary, re-run by TestSQLiteProcesses, to act as
// one of the processes sharing the file.
const envChild = "LEAF_TEST_SQLITE_CHILD"

// TestSQLiteProcesses runs several processes taking ranges of one tag in
// one file at once: their ranges must not overlap and must leave no hole.
func TestSQLiteProcesses(t *testing.T) {
	if path := os.Getenv(envChild); path != "" {
		sqliteChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "leaf.db")
	s := openSQLite(t, path, true)
	if _, err := s.Create(t.Context(), "hot", 10, ""); err != nil {
		t.Fatal(err)
	}
	const procs = 4
	outs := make([][]byte, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteProcesses$", "-test.count=1")
			cmd.Env = append(os.Environ(), envChild+"="+path, quickRaceExit())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("process %d: %v\n%s%s", i, err, out, stderr.Bytes())
			}
			outs[i] = out
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var ranges []persist.Range
	for i, out := range outs {
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r persist.Range
			if _, err := fmt.Sscanf(sc.Text(), "range %d %d %d", &r.Start, &r.End, &r.Step); err == nil {
				ranges = append(ranges, r)
				n++
			}
		}
		if n != childTakes {
			t.Fatalf("process %d reported %d ranges, want %d:\n%s", i, n, childTakes, out)
		}
	}
	slices.SortFunc(ranges, func(a, b persist.Range) int { return cmp.Compare(a.Start, b.Start) })
	next := int64(1)
	for _, r := range ranges {
		if r.Start != next || r.Size() <= 0 {
			t.Fatalf("range %+v, want one starting at %d", r, next)
		}
		next = r.End
	}
	tag, err := s.Tag(t.Context(), "hot")
	if err != nil || tag.MaxID != next {
		t.Fatalf("max_id = %d, %v; ranges end at %d", tag.MaxID, err, next)
	}
}

const childTakes = 300

// quickRaceExit is GORACE for the processes TestSQLiteProcesses starts:
// the race runtime holds a clean exit a second (atexit_sleep_ms) for
// reports of goroutines that outlive main; a race found before the exit
// still fails it. An atexit_sleep_ms of the caller's GORACE wins.
func quickRaceExit() string {
	gorace := os.Getenv("GORACE")
	if !strings.Contains(gorace, "atexit_sleep_ms") {
		gorace = strings.TrimSpace(gorace + " atexit_sleep_ms=0")
	}
	return "GORACE=" + gorace
}

func sqliteChild(t *testing.T, path string) {
	s, err := sqlite.Open(t.Context(), path, persist.Options{BusyTimeout: 30 * time.Second, QueryTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := range childTakes {
		r, err := s.Take(t.Context(), "hot", int64(i%4)) // 0 is the row's step
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "range %d %d %d\n", r.Start, r.End, r.Step)
	}
}

// A write lock held elsewhere (another process) makes Take wait; the query
// timeout bounds the wait and the failure is ErrUnavailable.
func TestSQLiteLockedTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	s, err := sqlite.Open(t.Context(), path, persist.Options{
		// Long enough for the set-up's queries on a busy machine, far
		// below the busy timeout.
		CreateSchema: true, BusyTimeout: 5 * time.Minute, QueryTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	// The handle that meets the lock: a query timeout of a second, which
	// is all the test waits; its Open's queries have the context's
	// deadline instead, long enough for a busy machine.
	openCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	locked, err := sqlite.Open(openCtx, path, persist.Options{BusyTimeout: 5 * time.Minute, QueryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer locked.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = locked.Take(t.Context(), "t", 0)
	if !errors.Is(err, persist.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		// DeadlineExceeded is the query timeout's: the lock's own wait
		// (busy_timeout, innodb_lock_wait_timeout) ends with another error.
		t.Fatalf("Take under a held lock: err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if _, err := conn.ExecContext(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Take(t.Context(), "t", 0); err != nil || r.Start != 1 {
		t.Fatalf("Take after the lock = %+v, %v; want the first range", r, err)
	}
}

// One handle's writers take turns in the order they came, not by polling
// SQLite's lock: with a busy timeout of a millisecond, far shorter than a
// synced commit, 16 connections taking, giving back and stepping one tag
// at once never meet a busy database, and the ranges taken cover
// [1, max_id) without overlap or hole.
func TestSQLiteWritersTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	s, err := sqlite.Open(t.Context(), path, persist.Options{
		CreateSchema: true, MaxOpenConns: 16, BusyTimeout: time.Millisecond, QueryTimeout: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	const workers, takes = 16, 25
	var mu sync.Mutex
	var got []persist.Range
	var wg sync.WaitGroup
	errs := make(chan error, workers*takes)
	for w := range workers {
		wg.Go(func() {
			for i := range takes {
				r, err := s.Take(t.Context(), "t", 0)
				if err != nil {
					errs <- fmt.Errorf("Take: %w", err)
					continue
				}
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				// Writes that change nothing still take their turn.
				if _, err := s.GiveBack(t.Context(), "t", r.Start, r.Start-1); err != nil && !errors.Is(err, persist.ErrInvalid) {
					errs <- fmt.Errorf("GiveBack: %w", err)
				}
				if err := s.SetStep(t.Context(), "t", int64(10+(w+i)%2)); err != nil {
					errs <- fmt.Errorf("SetStep: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a writer met the database busy: %v", err)
	}
	slices.SortFunc(got, func(a, b persist.Range) int { return cmp.Compare(a.Start, b.Start) })
	next := int64(1)
	for _, r := range got {
		if r.Start != next {
			t.Fatalf("range %+v after IDs up to %d: overlap or hole", r, next-1)
		}
		next = r.End
	}
	tag, err := s.Tag(t.Context(), "t")
	if err != nil || tag.MaxID != next || len(got) != workers*takes {
		t.Fatalf("%d ranges up to %d, row %+v (%v); want %d ranges, max_id at their end", len(got), next, tag, err, workers*takes)
	}
}
