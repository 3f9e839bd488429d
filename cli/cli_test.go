package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/cli"
	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/server/servertest"
)

// result is what one subcommand run printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// run runs `leaf args...` in-process with the given LEAF_* environment.
func run(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Run(context.Background(), args, environ, &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

// mustRun runs a subcommand that must succeed.
func mustRun(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	r := run(t, environ, args...)
	if r.err != nil {
		t.Fatalf("leaf %s: %v\nstderr: %s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r
}

// openStore opens the SQLite file for checks, closed at cleanup.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, persist.Options{CreateSchema: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func getRow(t *testing.T, s persist.Store, tag string) persist.Tag {
	t.Helper()
	r, err := s.Tag(context.Background(), tag)
	if err != nil {
		t.Fatalf("row %q: %v", tag, err)
	}
	return r
}

func TestIsCommand(t *testing.T) {
	for name, want := range map[string]bool{"tags": true, "import": true, "--server.addr=:0": false, "": false, "serve": false} {
		if got := cli.IsCommand(name); got != want {
			t.Errorf("IsCommand(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestTags drives leaf tags create, floor, step and list against one
// SQLite file, the configuration flags in every position and form.
func TestTags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leaf.db")
	dsn := "--store.dsn=" + path
	env := []string{"LEAF_STORE_DSN=" + path}

	t.Run("list before the database exists", func(t *testing.T) {
		r := run(t, env, "tags", "list")
		want := "tags: store.driver=sqlite store.dsn=" + path + ": no database: the file does not exist " +
			"(set store.dsn to the file the server uses, or run from the server's working directory)"
		if r.err == nil || r.err.Error() != want {
			t.Fatalf("err = %v\nwant %s", r.err, want)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("list created the database file: %v", err)
		}
	})

	steps := []struct {
		name   string
		args   []string
		stdout string
	}{
		{"create with defaults", []string{"tags", "create", "order", dsn, "--store.create_database"},
			"created order: step 1000, first ID 1\n"},
		{"create with flags, config flag first", []string{"tags", dsn, "create", "--step", "50", "--desc", "invoice IDs", "invoice"},
			"created invoice: step 50, first ID 1\n"},
		{"create with default_step as two words", []string{"tags", "create", "--store.dsn", path, "--segment.default_step", "7", "user"},
			"created user: step 7, first ID 1\n"},
		{"create from the environment", []string{"tags", "create", "env"},
			"created env: step 1000, first ID 1\n"},
		{"floor raises", []string{"tags", "floor", "order", "1000", dsn},
			"raised order to floor 1000: max_id 1001, every later ID is above 1000\n"},
		{"floor never lowers", []string{"tags", "floor", "order", "10", dsn},
			"order already above 10: max_id 1001, nothing changed\n"},
		{"floor creates", []string{"tags", "floor", "fresh", "5", dsn},
			"created fresh with floor 5: max_id 6, every later ID is above 5\n"},
		{"step", []string{"tags", "step", "order", "70", dsn},
			"order: step 70 (servers use it from their next segment)\n"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			env := env
			if strings.Contains(strings.Join(st.args, " "), "--store.dsn") {
				env = nil // the flag alone must be enough
			}
			r := mustRun(t, env, st.args...)
			if r.stdout != st.stdout {
				t.Fatalf("stdout:\n got %q\nwant %q", r.stdout, st.stdout)
			}
		})
	}

	s := openStore(t, path)
	want := map[string]persist.Tag{
		"env":     {Name: "env", MaxID: 1, Step: 1000},
		"fresh":   {Name: "fresh", MaxID: 6, Step: 1000},
		"invoice": {Name: "invoice", MaxID: 1, Step: 50, Description: "invoice IDs"},
		"order":   {Name: "order", MaxID: 1001, Step: 70},
		"user":    {Name: "user", MaxID: 1, Step: 7},
	}
	t.Run("rows", func(t *testing.T) {
		tags, err := s.Tags(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(tags) != len(want) {
			t.Fatalf("%d rows, want %d: %+v", len(tags), len(want), tags)
		}
		for _, got := range tags {
			w := want[got.Name]
			if got.MaxID != w.MaxID || got.Step != w.Step || got.Description != w.Description {
				t.Errorf("row %+v, want %+v", got, w)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		r := mustRun(t, nil, "tags", "list", dsn)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if got := strings.Fields(lines[0]); !reflect.DeepEqual(got, []string{"TAG", "MODE", "MAX_ID", "STEP", "DESCRIPTION", "UPDATE_TIME"}) {
			t.Fatalf("header %q", lines[0])
		}
		wantLines := [][]string{
			{"env", "segment", "1", "1000"},
			{"fresh", "segment", "6", "1000"},
			{"invoice", "segment", "1", "50", "invoice", "IDs"},
			{"order", "segment", "1001", "70"},
			{"user", "segment", "1", "7"},
		}
		if len(lines) != 1+len(wantLines) {
			t.Fatalf("list:\n%s", r.stdout)
		}
		for i, w := range wantLines {
			f := strings.Fields(lines[i+1])
			if len(f) != len(w)+1 || !reflect.DeepEqual(f[:len(w)], w) {
				t.Errorf("line %q, want %q then the update time", lines[i+1], w)
			}
		}
	})

	t.Run("a server continues above the floor", func(t *testing.T) {
		in := servertest.Start(t, servertest.Options{Path: path})
		id, err := in.Alloc.Next(context.Background(), "order")
		if err != nil {
			t.Fatal(err)
		}
		if id != 1001 {
			t.Fatalf("first ID of order after leaf tags floor order 1000 = %d, want 1001", id)
		}
	})
}

// TestTagsErrors: every refusal is an error that says what is wrong, and
// nothing changes.
func TestTagsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	dsn := "--store.dsn=" + path
	mustRun(t, nil, "tags", "create", "order", dsn, "--store.create_database")
	mustRun(t, nil, "tags", "create", "sf", "--mode=snowflake", dsn)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"tags"}, "tags: want a subcommand: list, create, floor or step (see leaf tags --help)"},
		{"unknown subcommand", []string{"tags", "drop", "order"}, `tags: unknown subcommand "drop": want list, create, floor or step (see leaf tags --help)`},
		{"create twice", []string{"tags", "create", "order", dsn}, `tags: tag "order" already exists (leaf tags list shows it)`},
		{"create bad tag", []string{"tags", "create", "bad ", dsn}, `tags: tag "bad ": invalid tag name: ends with a space`},
		{"create step zero", []string{"tags", "create", "x", "--step=0", dsn}, "tags: --step 0: must be between 1 and 2147483647"},
		{"create unknown flag", []string{"tags", "create", "x", "--color=red", dsn}, "tags: unknown flag: --color (see leaf tags create --help)"},
		{"create no tag", []string{"tags", "create", dsn}, "tags: want 1 arguments ([TAG]), got 0: [] (see leaf tags --help)"},
		{"floor negative", []string{"tags", "floor", "order", "-1", dsn}, "tags: -1: must be >= 0"},
		{"floor beyond the ID space", []string{"tags", "floor", "order", "9223370937343148031", dsn}, "tags: floor 9223370937343148031: must be between 0 and 9223370937343148030"},
		{"floor word", []string{"tags", "floor", "order", "ten", dsn}, `tags: floor "ten": not an integer`},
		{"floor missing n", []string{"tags", "floor", "order", dsn}, `tags: want 2 arguments ([TAG N]), got 1: ["order"] (see leaf tags --help)`},
		{"step unknown tag", []string{"tags", "step", "nosuch", "5", dsn}, `tags: unknown tag "nosuch" (create it with leaf tags create)`},
		// The words of LEAF.FLOOR and LEAF.STEP on a Snowflake tag.
		{"floor snowflake", []string{"tags", "floor", "sf", "100", dsn}, `tags: not in this tag's mode: tag "sf" is a snowflake tag: a floor applies to segment tags`},
		{"step snowflake", []string{"tags", "step", "sf", "100", dsn}, `tags: not in this tag's mode: tag "sf" is a snowflake tag: a step applies to segment tags`},
		{"step too large", []string{"tags", "step", "order", "2147483648", dsn}, "tags: step 2147483648: must be between 1 and 2147483647"},
		{"bad config flag", []string{"tags", "list", "--store.dns=x"}, "tags: config: unknown flag: --store.dns (did you mean --store.dsn?)"},
		{"bad config value", []string{"tags", "list", dsn, "--store.driver=oracle"}, `tags: config: --store.driver: must be one of sqlite, mysql, postgres, etcd, got "oracle"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, tc.args...)
			if r.err == nil {
				t.Fatalf("no error; stdout %q", r.stdout)
			}
			if r.err.Error() != tc.want {
				t.Fatalf("error:\n got %q\nwant %q", r.err.Error(), tc.want)
			}
		})
	}
	st := openStore(t, path)
	if r := getRow(t, st, "order"); r.MaxID != 1 || r.Step != 1000 {
		t.Fatalf("row after refused commands = %+v", r)
	}
	if r := getRow(t, st, "sf"); r.MaxID != 1 || r.Mode != persist.ModeSnowflake {
		t.Fatalf("Snowflake row after refused commands = %+v", r)
	}
}

// TestBadDSN: a store that cannot be opened is a clear error that never
// shows the password.
func TestBadDSN(t *testing.T) {
	const secret = "hunter2-secret"
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"mysql unreachable", []string{"--store.driver=mysql", "--store.dsn=leaf:" + secret + "@tcp(127.0.0.1:1)/leaf"},
			[]string{"tags: store.driver=mysql store.dsn=leaf:REDACTED@tcp(127.0.0.1:1)/leaf: persist: open mysql:", "database unavailable", "connection refused"}},
		{"mysql malformed", []string{"--store.driver=mysql", "--store.dsn=leaf:" + secret + "@tcp(127.0.0.1:1/leaf"},
			[]string{"tags: config: --store.dsn: invalid mysql DSN"}},
		{"mysql no database", []string{"--store.driver=mysql", "--store.dsn=leaf:" + secret + "@tcp(127.0.0.1:1)/"},
			[]string{"store.dsn"}},
		{"sqlite a directory", []string{"--store.dsn=" + dir},
			[]string{"tags: store.driver=sqlite store.dsn=" + dir + ":"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, sub := range [][]string{{"list"}, {"floor", "order", "5"}} {
				r := run(t, nil, append(append([]string{"tags"}, sub...), tc.args...)...)
				if r.err == nil {
					t.Fatalf("%v: no error", sub)
				}
				msg := r.err.Error() + r.stdout + r.stderr
				if strings.Contains(msg, secret) {
					t.Fatalf("%v: the password shows: %s", sub, msg)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.err.Error(), w) {
						t.Fatalf("%v: error %q\nwant it to contain %q", sub, r.err, w)
					}
				}
			}
		})
	}
}

// TestHelp: each subcommand's help is its own, with examples.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"tags", "--help"}, []string{"Usage:\n  leaf tags list", "Examples:\n  leaf tags"}},
		{[]string{"tags", "-h"}, []string{"Usage:\n  leaf tags list"}},
		{[]string{"tags", "help"}, []string{"Usage:\n  leaf tags list"}},
		{[]string{"tags", "create", "--help"}, []string{"Usage:\n  leaf tags list", "leaf tags create order --step 500"}},
		{[]string{"import", "--help"}, []string{"Usage:\n  leaf import redis --from", "Examples:\n  leaf import redis --from redis://"}},
		{[]string{"import", "redis", "-h"}, []string{"Usage:\n  leaf import redis --from"}},
		{[]string{"health", "--help"}, []string{"Usage:\n  leaf health", "Examples:\n  leaf health\n"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, nil, tc.args...)
			if !errors.Is(r.err, config.ErrHelp) {
				t.Fatalf("err = %v, want config.ErrHelp", r.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Fatalf("usage lacks %q:\n%s", w, r.stdout)
				}
			}
			if !strings.HasPrefix(r.stdout, tc.want[0]) {
				t.Fatalf("usage does not start with %q:\n%s", tc.want[0], r.stdout)
			}
		})
	}
}

// TestSummary: leaf --help's list names every subcommand, one line each.
func TestSummary(t *testing.T) {
	for _, name := range []string{"tags", "import", "health"} {
		if !cli.IsCommand(name) {
			t.Fatalf("%s is not a subcommand", name)
		}
		if n := strings.Count(cli.Summary, "\n  leaf "+name+" "); n != 1 {
			t.Errorf("Summary has %d lines for leaf %s:\n%s", n, name, cli.Summary)
		}
	}
	if !strings.Contains(cli.Summary, "leaf --version") {
		t.Errorf("Summary lacks the version command:\n%s", cli.Summary)
	}
}
