package open_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/open"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

func storeConfig(driver, dsn string) config.StoreConfig {
	c := config.Default().Store
	c.Driver, c.DSN = driver, dsn
	return c
}

// openOK opens c and takes one range of a new tag: the store works.
func openOK(t *testing.T, c config.StoreConfig, o open.Options) persist.Backend {
	t.Helper()
	s, err := open.Store(t.Context(), c, o)
	if err != nil {
		t.Fatalf("open.Store(%s): %v", c.RedactedDSN(), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Take(t.Context(), "t", 0); err != nil || r != (persist.Range{Start: 1, End: 11, Step: 10}) {
		t.Fatalf("Take = %+v, %v; want [1, 11)", r, err)
	}
	if !s.GuardEnabled() {
		t.Error("GuardEnabled() = false with the schema created")
	}
	return s
}

func TestSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "leaf.db")
	c := storeConfig("sqlite", path)

	// Read-only creates nothing: no file, no table.
	_, err := open.Store(t.Context(), c, open.Options{ReadOnly: true})
	want := "store.driver=sqlite store.dsn=" + path + ": no database: the file does not exist"
	if !errors.Is(err, open.ErrNoDatabase) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("read-only open of a missing file: err = %v, want ErrNoDatabase starting %q", err, want)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open created the file: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Store(t.Context(), c, open.Options{ReadOnly: true}); !errors.Is(err, persist.ErrSchema) {
		t.Fatalf("read-only open of a file without the table: err = %v, want ErrSchema", err)
	}

	_ = openOK(t, c, open.Options{LoadTimeout: 30 * time.Second}).Close()
	ro, err := open.Store(t.Context(), c, open.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of the database: %v", err)
	}
	defer ro.Close()
	if tag, err := ro.Tag(t.Context(), "t"); err != nil || tag.MaxID != 11 {
		t.Fatalf("read-only Tag = %+v, %v; want max_id 11", tag, err)
	}
}

// A SQLite file that does not exist is created only in ./data/ or with
// store.create_database, and its creation is logged at warn: a mistyped
// path elsewhere stops start-up instead of starting every tag at 1 again.
func TestSQLiteCreatesOnlyWhereAllowed(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // ./data/ is relative to the working directory
	tests := []struct {
		name, dsn string
		create    bool
		want      string // "" when the open must create the file
	}{
		{"the default path", config.DefaultSQLiteDSN, false, ""},
		{"another file in data/", "data/orders.db", false, ""},
		{"a mistyped directory", "/nonexistent/dir/x.db", false, "no database: the file does not exist, and a new file would be an empty store"},
		{"a file beside data/", "leaf.db", false, "set store.create_database: true"},
		{"a directory under data/", "data/sub/leaf.db", false, "no database"},
		{"anywhere with create_database", filepath.Join(dir, "elsewhere", "leaf.db"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := storeConfig("sqlite", tt.dsn)
			c.CreateDatabase = tt.create
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			s, err := open.Store(t.Context(), c, open.Options{Logger: log})
			if tt.want != "" {
				if !errors.Is(err, open.ErrNoDatabase) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("open = %v, want ErrNoDatabase saying %q", err, tt.want)
				}
				if _, err := os.Stat(tt.dsn); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the refused open left a file behind: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			_ = s.Close()
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "created a new, empty SQLite database") {
				t.Errorf("creating the file logged %q, want a warning", logs.String())
			}
			// Opened again, the file exists: no warning.
			logs.Reset()
			c.CreateDatabase = false
			s, err = open.Store(t.Context(), c, open.Options{Logger: log})
			if err != nil {
				t.Fatalf("open of the existing file: %v", err)
			}
			_ = s.Close()
			if logs.Len() != 0 {
				t.Errorf("opening an existing file logged %q", logs.String())
			}
		})
	}
}

// An unreachable database fails at once, unless the open is lazy: then the
// store answers ErrUnavailable until the database answers. The password
// never shows, and the DSN shows in leaf's one redacted form.
func TestUnreachable(t *testing.T) {
	const secret = "hunter2-secret"
	tests := []struct {
		driver, dsn, want string
	}{
		{"mysql", "leaf:" + secret + "@tcp(127.0.0.1:1)/leaf",
			"store.driver=mysql store.dsn=leaf:REDACTED@tcp(127.0.0.1:1)/leaf: persist: open mysql: "},
		{"postgres", "postgres://leaf:" + secret + "@127.0.0.1:1/leaf?sslmode=disable",
			"store.driver=postgres store.dsn=postgres://leaf:REDACTED@127.0.0.1:1/leaf?sslmode=disable: persist: open postgres: "},
		{"postgres", "host=127.0.0.1 port=1 user=leaf password=" + secret + " dbname=leaf sslmode=disable",
			"store.driver=postgres store.dsn=host=127.0.0.1 port=1 user=leaf password=REDACTED dbname=leaf sslmode=disable: persist: open postgres: "},
	}
	for _, tc := range tests {
		t.Run(tc.driver, func(t *testing.T) {
			c := storeConfig(tc.driver, tc.dsn)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			_, err := open.Store(ctx, c, open.Options{LoadTimeout: 10 * time.Second})
			if !errors.Is(err, persist.ErrUnavailable) || !strings.HasPrefix(err.Error(), tc.want) || leaks(err, secret) {
				t.Fatalf("err = %v\nwant ErrUnavailable starting %q, without the password or another redaction", err, tc.want)
			}

			s, err := open.Store(ctx, c, open.Options{LoadTimeout: 10 * time.Second, Lazy: true})
			if err != nil {
				t.Fatalf("lazy open with the database down: %v", err)
			}
			defer s.Close()
			if _, err := s.Take(ctx, "t", 0); !errors.Is(err, persist.ErrUnavailable) || leaks(err, secret) {
				t.Fatalf("Take with the database down: err = %v, want ErrUnavailable without the password", err)
			}
			if s.GuardEnabled() {
				t.Error("GuardEnabled() = true before the database was reached")
			}
		})
	}
}

// leaks reports whether err shows the password, or a redaction other
// than leaf's (pgx masks passwords as xxxxx).
func leaks(err error, secret string) bool {
	return strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "xxxxx")
}

// A refused password is not waited for, lazy or not.
func TestWrongPassword(t *testing.T) {
	const secret = "wrong-hunter2"
	tests := []struct {
		driver   string
		dsn      func(t *testing.T) string
		wrong    func(t *testing.T, dsn string) string
		redacted string
	}{
		{"mysql", func(t *testing.T) string { return mysqltest.DSN(t) }, func(t *testing.T, dsn string) string {
			return "leaf:" + secret + dsn[strings.LastIndexByte(dsn, '@'):]
		}, "leaf:REDACTED@"},
		{"postgres", func(t *testing.T) string { return postgrestest.DSN(t) }, func(t *testing.T, dsn string) string {
			return postgrestest.WithUser(t, dsn, "leaf", secret)
		}, "leaf:REDACTED@"},
	}
	for _, tc := range tests {
		t.Run(tc.driver, func(t *testing.T) {
			dsn := tc.dsn(t)
			openOK(t, storeConfig(tc.driver, dsn), open.Options{LoadTimeout: 30 * time.Second, Lazy: true})

			c := storeConfig(tc.driver, tc.wrong(t, dsn))
			for _, lazy := range []bool{false, true} {
				_, err := open.Store(t.Context(), c, open.Options{LoadTimeout: 30 * time.Second, Lazy: lazy})
				if err == nil || errors.Is(err, persist.ErrUnavailable) || leaks(err, secret) ||
					!strings.Contains(err.Error(), tc.redacted) {
					t.Errorf("lazy %v, wrong password: err = %v, want a refusal naming the redacted DSN", lazy, err)
				}
			}
		})
	}
}

// A DSN pgx cannot parse fails naming the problem, in leaf's redaction
// only.
func TestPostgresBadDSN(t *testing.T) {
	const secret = "hunter2-secret"
	c := storeConfig("postgres", "postgres://leaf:"+secret+"@127.0.0.1:notaport/leaf")
	_, err := open.Store(t.Context(), c, open.Options{})
	if !errors.Is(err, persist.ErrInvalid) || leaks(err, secret) || !strings.Contains(err.Error(), "bad DSN") {
		t.Fatalf("err = %v, want ErrInvalid naming a bad DSN, without the password", err)
	}
}

func TestUnknownDriver(t *testing.T) {
	_, err := open.Store(t.Context(), storeConfig("oracle", "scott/tiger@db"), open.Options{})
	if !errors.Is(err, persist.ErrInvalid) || strings.Contains(err.Error(), "tiger") {
		t.Fatalf("err = %v, want ErrInvalid without the DSN's secret", err)
	}
}

// etcd opens on the test cluster under a prefix of the test's own.
func TestEtcd(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	c := storeConfig("etcd", eps)
	c.EtcdPrefix = etcdtest.Prefix(t, eps)
	s := openOK(t, c, open.Options{LoadTimeout: 30 * time.Second})
	if tag, err := s.Tag(t.Context(), "t"); err != nil || tag.MaxID != 11 {
		t.Fatalf("Tag = %+v, %v; want max_id 11", tag, err)
	}
}

// An unreachable etcd cluster fails at once, unless the open is lazy:
// then the store answers ErrUnavailable until it answers. The password
// never shows.
func TestEtcdUnreachable(t *testing.T) {
	const secret = "hunter2-secret"
	c := storeConfig("etcd", "http://root:"+secret+"@127.0.0.1:1,http://root:"+secret+"@127.0.0.1:2")
	_, err := open.Store(t.Context(), c, open.Options{LoadTimeout: time.Second})
	want := "store.driver=etcd store.dsn=http://root:REDACTED@127.0.0.1:1,http://root:REDACTED@127.0.0.1:2: persist: open etcd: "
	if !errors.Is(err, persist.ErrUnavailable) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), secret) {
		t.Fatalf("err = %v\nwant ErrUnavailable starting %q, without the password", err, want)
	}
	s, err := open.Store(t.Context(), c, open.Options{LoadTimeout: time.Second, Lazy: true})
	if err != nil {
		t.Fatalf("lazy open with the cluster down: %v", err)
	}
	defer s.Close()
	if _, err := s.Take(t.Context(), "t", 0); !errors.Is(err, persist.ErrUnavailable) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Take with the cluster down: err = %v, want ErrUnavailable without the password", err)
	}
}

// A read-only open (leaf tags list) needs no right to write: it lists the
// tags of a database whose sessions are read-only, where the server's open
// refuses to start.
func TestReadOnlyOpenOfReadOnlyDatabase(t *testing.T) {
	dsn := postgrestest.DSN(t)
	openOK(t, storeConfig("postgres", dsn), open.Options{LoadTimeout: 30 * time.Second}).Close()
	c := storeConfig("postgres", postgrestest.WithParam(t, dsn, "default_transaction_read_only", "on"))
	if _, err := open.Store(t.Context(), c, open.Options{LoadTimeout: 30 * time.Second}); !errors.Is(err, persist.ErrReadOnly) {
		t.Fatalf("open for serving of a read-only database: err = %v, want ErrReadOnly", err)
	}
	ro, err := open.Store(t.Context(), c, open.Options{LoadTimeout: 30 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a read-only database: %v", err)
	}
	defer ro.Close()
	if tags, err := ro.Tags(t.Context()); err != nil || len(tags) != 1 || tags[0].MaxID != 11 {
		t.Fatalf("Tags = %+v, %v; want t with max_id 11", tags, err)
	}
}
