package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// counters is the fixture: 1,000 integer counters with spread values, and
// the keys that must not be imported.
type fixture struct {
	counters map[string]int64
	nonInt   map[string]string // strings that are not integers
	invalid  map[string]string // names that cannot be tags
	nonStr   []string          // a hash and a list
}

func fill(t *testing.T, rdb *redis.Client) fixture {
	t.Helper()
	ctx := context.Background()
	f := fixture{
		counters: map[string]int64{},
		nonInt: map[string]string{"name": "alice", "price": "3.5", "padded": " 12", "huge": "99999999999999999999",
			"toobig": "9223372036854775000"},
		invalid: map[string]string{"bad\nkey": "5", "trailing ": "6"},
		nonStr:  []string{"profile", "queue"},
	}
	var pairs []any
	for i := range 1000 {
		key := fmt.Sprintf("counter:%03d", i)
		v := int64(i)*1013 + int64(i%7)*1_000_000
		switch i {
		case 1:
			v = 0
		case 2:
			v = 1 << 40
		}
		f.counters[key] = v
		pairs = append(pairs, key, v)
	}
	for k, v := range f.nonInt {
		pairs = append(pairs, k, v)
	}
	for k, v := range f.invalid {
		pairs = append(pairs, k, v)
	}
	if err := rdb.MSet(ctx, pairs...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "profile", "name", "alice", "visits", 7).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, "queue", 1, 2, 3).Err(); err != nil {
		t.Fatal(err)
	}
	return f
}

// snapshot is every row of the store.
func snapshot(t *testing.T, path string) []persist.Tag {
	t.Helper()
	s := openStore(t, path)
	tags, err := s.Tags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return tags
}

// incrAll takes the next ID of every counter's tag through a real leaf
// server on the store and checks each is above the Redis value and above
// the floor already seen (after).
func incrAll(t *testing.T, path string, f fixture, after map[string]int64) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	// A thousand new tags, each created, loaded, and given back when the
	// server stops: on a busy machine that queue of SQLite writes takes
	// longer than the default load_timeout allows each of them.
	so := segment.DefaultOptions()
	so.LoadTimeout = time.Minute
	in := servertest.Start(t, servertest.Options{Path: path, Segment: &so})
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, PoolSize: 1, MaxRetries: -1}))
	defer c.Close()
	keys := make([]string, 0, len(f.counters))
	for k := range f.counters {
		keys = append(keys, k)
	}
	cmds := make([]*redis.IntCmd, len(keys))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Incr(ctx, k)
		}
		return nil
	}); err != nil {
		t.Fatalf("INCR through leaf: %v", err)
	}
	got := map[string]int64{}
	for i, k := range keys {
		id := cmds[i].Val()
		if id <= f.counters[k] {
			t.Errorf("INCR %s = %d, not above the Redis value %d", k, id, f.counters[k])
		}
		if id <= after[k] {
			t.Errorf("INCR %s = %d, not above the ID handed out before, %d", k, id, after[k])
		}
		got[k] = id
	}
	if err := in.Stop(); err != nil { // gives the unused IDs back, as leaf does on SIGTERM
		t.Fatal(err)
	}
	return got
}

// countPrefix counts the lines of s that start with prefix.
func countPrefix(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestImportRedis: 1,000 counters (and keys that are not counters) in a
// real redis-server are imported; afterwards every tag's next INCR through
// leaf is above its Redis value. A dry run changes nothing; importing again
// changes nothing.
func TestImportRedis(t *testing.T) {
	addr := redistest.Start(t)
	rdb := redis.NewClient(redistest.Options(&redis.Options{Addr: addr}))
	t.Cleanup(func() { rdb.Close() })
	f := fill(t, rdb)
	path := filepath.Join(t.TempDir(), "data", "leaf.db")
	dsn := "--store.dsn=" + path
	from := "--from=redis://" + addr
	const nonCounters = "5 skipped not an integer, 2 skipped not a string, 2 invalid tag names, 0 vanished\n"

	t.Run("dry run without a database", func(t *testing.T) {
		r := mustRun(t, nil, "import", "redis", from, "--dry-run", dsn)
		if want := "1009 keys: 1000 would be imported (1000 new tags), 0 already above, " + nonCounters; !strings.HasSuffix(r.stdout, want) {
			t.Fatalf("summary:\n%s\nwant it to end with %q", r.stdout, want)
		}
		// The progress line says it too: nothing was imported.
		if !strings.Contains(r.stderr, "1009 keys: 1000 would be imported, 0 already above") {
			t.Fatalf("progress of a dry run:\n%s", r.stderr)
		}
		if n := countPrefix(r.stdout, "would create "); n != 1000 {
			t.Fatalf("%d 'would create' lines, want 1000", n)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a dry run created the database: %v", err)
		}
	})

	// Rows that exist before the import: one already above its counter,
	// one below.
	const high = 1_000_000_000_000_000
	func() {
		s := openStore(t, path)
		ctx := context.Background()
		if _, err := s.Create(ctx, "counter:000", 10, "before"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.RaiseFloor(ctx, "counter:000", high); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, "counter:003", 10, "before"); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}()

	t.Run("dry run changes nothing", func(t *testing.T) {
		before := snapshot(t, path)
		r := mustRun(t, nil, "import", "redis", from, "--dry-run", dsn)
		if want := "1009 keys: 999 would be imported (998 new tags), 1 already above, " + nonCounters; !strings.HasSuffix(r.stdout, want) {
			t.Fatalf("summary:\n%s\nwant it to end with %q", r.stdout, want)
		}
		wantRaise := fmt.Sprintf("would raise   counter:003  floor %d: max_id 1 -> %d\n", f.counters["counter:003"], f.counters["counter:003"]+1)
		if !strings.Contains(r.stdout, wantRaise) {
			t.Fatalf("dry run output lacks %q", wantRaise)
		}
		if after := snapshot(t, path); !reflect.DeepEqual(before, after) {
			t.Fatalf("a dry run changed the rows")
		}
	})

	var first map[string]int64
	t.Run("import", func(t *testing.T) {
		r := mustRun(t, nil, "import", "redis", from, dsn, "--progress-every=250")
		if want := "1009 keys: 999 imported (998 new tags), 1 already above, " + nonCounters; !strings.HasSuffix(r.stdout, want) {
			t.Fatalf("summary:\n%s\nwant it to end with %q", r.stdout, want)
		}
		for _, want := range []string{
			"skip          name  not an integer: \"alice\"\n",
			"skip          huge  not an integer: \"99999999999999999999\"\n",
			"skip          toobig  9223372036854775000 plus headroom 0 is beyond the IDs leaf hands out (at most 9223370937343148030)\n",
			"skip          profile  not a string counter (hash)\n",
			"skip          queue  not a string counter (list)\n",
			"invalid       \"bad\\nkey\"  invalid tag name: control character U+000A\n",
			"invalid       \"trailing \"  invalid tag name: ends with a space\n",
			fmt.Sprintf("raised        counter:003  floor %d: max_id %d\n", f.counters["counter:003"], f.counters["counter:003"]+1),
			"created       counter:001  floor 0: max_id 1, step 1000\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		// Progress without a terminal: a line every 250 keys, and the end.
		if n := countPrefix(r.stderr, "["); n != 5 {
			t.Errorf("%d progress lines, want 5 (250, 500, 750, 1000, 1009):\n%s", n, r.stderr)
		}
		// The floor of the tag that existed is announced to the servers
		// (none runs here, so none is waited for).
		changes, _, err := openStore(t, path).Changes(context.Background(), 0)
		if want := (persist.Change{Seq: 1, Kind: persist.ChangeFloor, Tag: "counter:003", Value: f.counters["counter:003"]}); err != nil ||
			len(changes) != 1 || changes[0] != want {
			t.Errorf("changes announced: %+v, %v; want %+v", changes, err, want)
		}
		if !strings.Contains(r.stderr, "100% of 1009, 1009 keys: 999 imported, 1 already above, 7 skipped, 2 invalid\n") {
			t.Errorf("last progress line missing:\n%s", r.stderr)
		}
		s := openStore(t, path)
		for k, v := range f.counters {
			row := getRow(t, s, k)
			if row.MaxID <= v {
				t.Errorf("%s: max_id %d, not above the Redis value %d", k, row.MaxID, v)
			}
		}
		for _, k := range []string{"name", "price", "padded", "huge", "toobig", "profile", "queue", "bad\nkey", "trailing "} {
			// Not found, or a name the store refuses outright.
			if _, err := s.Tag(context.Background(), k); !errors.Is(err, persist.ErrNotFound) && !errors.Is(err, persist.ErrInvalid) {
				t.Errorf("%q was imported (%v)", k, err)
			}
		}
		if row := getRow(t, s, "counter:000"); row.MaxID != high+1 || row.Description != "before" {
			t.Errorf("counter:000 = %+v, want untouched at max_id %d", row, high+1)
		}
		if row := getRow(t, s, "counter:005"); row.Description != "imported from Redis" || row.Step != 1000 {
			t.Errorf("created tag = %+v, want step 1000 (default_step), description \"imported from Redis\"", row)
		}
		s.Close()
		first = incrAll(t, path, f, nil)
	})

	t.Run("import again is idempotent", func(t *testing.T) {
		if first == nil {
			t.Skip("the import failed")
		}
		before := snapshot(t, path)
		r := mustRun(t, nil, "import", "redis", from, dsn)
		if want := "1009 keys: 0 imported (0 new tags), 1000 already above, " + nonCounters; !strings.HasSuffix(r.stdout, want) {
			t.Fatalf("summary:\n%s\nwant it to end with %q", r.stdout, want)
		}
		if after := snapshot(t, path); !reflect.DeepEqual(before, after) {
			t.Fatalf("a second import changed the rows")
		}
		incrAll(t, path, f, first)
	})

	t.Run("match and headroom", func(t *testing.T) {
		r := mustRun(t, nil, "import", "redis", from, dsn, "--match", "counter:99*", "--headroom", "1000000")
		if want := "10 keys: 10 imported (0 new tags), 0 already above, 0 skipped not an integer, 0 skipped not a string, 0 invalid tag names, 0 vanished\n"; !strings.HasSuffix(r.stdout, want) {
			t.Fatalf("summary:\n%s\nwant it to end with %q", r.stdout, want)
		}
		s := openStore(t, path)
		for i := 990; i < 1000; i++ {
			k := fmt.Sprintf("counter:%03d", i)
			if row := getRow(t, s, k); row.MaxID != f.counters[k]+1_000_001 {
				t.Errorf("%s: max_id %d, want the value plus the headroom plus 1, %d", k, row.MaxID, f.counters[k]+1_000_001)
			}
		}
	})

	// The Redis values were only read.
	for k, v := range f.counters {
		if got, err := rdb.Get(context.Background(), k).Int64(); err != nil || got != v {
			t.Fatalf("redis %s = %d, %v; want %d unchanged", k, got, err, v)
		}
	}
}

// TestImportErrors: bad arguments and an unreachable Redis are clear
// errors, and a password in --from never shows.
func TestImportErrors(t *testing.T) {
	const secret = "hunter2-secret"
	dsn := "--store.dsn=" + filepath.Join(t.TempDir(), "leaf.db")
	cases := []struct {
		name string
		args []string
		want string // prefix of the error
	}{
		{"no source", []string{"import", dsn}, "import: want a source: leaf import redis --from redis://host:port"},
		{"other source", []string{"import", "memcached", "--from=x", dsn}, `import: unexpected arguments ["memcached"]: the only source is redis`},
		{"no from", []string{"import", "redis", dsn}, "import: --from is required"},
		{"negative headroom", []string{"import", "redis", "--from=127.0.0.1:1", "--headroom=-5", dsn}, "import: --headroom -5: must be >= 0"},
		{"bad scheme", []string{"import", "redis", "--from=http://u:" + secret + "@127.0.0.1:1", dsn}, "import: --from http://u:REDACTED@127.0.0.1:1: redis: invalid URL scheme: http"},
		{"unreachable", []string{"import", "redis", "--from=redis://u:" + secret + "@127.0.0.1:1", dsn}, "import: redis at redis://u:REDACTED@127.0.0.1:1: dial tcp 127.0.0.1:1:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, tc.args...)
			if r.err == nil {
				t.Fatalf("no error; stdout %q", r.stdout)
			}
			if !strings.HasPrefix(r.err.Error(), tc.want) {
				t.Fatalf("error:\n got %q\nwant prefix %q", r.err, tc.want)
			}
			if strings.Contains(r.err.Error()+r.stdout+r.stderr, secret) {
				t.Fatalf("the password shows: %v %s %s", r.err, r.stdout, r.stderr)
			}
		})
	}
}
