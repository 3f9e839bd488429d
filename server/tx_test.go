package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/idtest"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// What only leaf can show: the IDs of transactions and scripts, among
// other connections' INCRs, are unique; a transaction's are consecutive;
// WATCH sees the other connections of this server.

// TestTxConsecutiveAndUnique: while other connections INCR the same tag,
// each EXEC of INCRs and INCRBYs gets consecutive IDs, and no ID of any
// connection, in a transaction, a script or alone, comes twice.
func TestTxConsecutiveAndUnique(t *testing.T) {
	ctx := context.Background()
	// A small step makes the transactions cross segment loads.
	so := segment.DefaultOptions()
	so.DefaultStep, so.MaxStep = 16, 16
	in := servertest.Start(t, servertest.Options{Segment: &so})
	const workers, rounds = 4, 40
	ids := make(chan int64, workers*rounds*10)
	var wg sync.WaitGroup
	errs := make(chan error, workers*3)
	for w := range workers {
		// A connection that sends transactions.
		tx := newClient(t, in.Addr, 3, "")
		// One that INCRs alone, around them.
		alone := newClient(t, in.Addr, 2, "")
		// One that runs scripts.
		lua := newClient(t, in.Addr, 3, "")
		wg.Add(3)
		go func() {
			defer wg.Done()
			for range rounds {
				cmds, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Incr(ctx, "tx")
					p.Expire(ctx, "tx", time.Hour)
					p.Incr(ctx, "tx")
					p.IncrBy(ctx, "tx", 3)
					p.Incr(ctx, "other")
					p.Incr(ctx, "tx")
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				a, b, c, d := cmds[0].(*redis.IntCmd).Val(), cmds[2].(*redis.IntCmd).Val(), cmds[3].(*redis.IntCmd).Val(), cmds[5].(*redis.IntCmd).Val()
				if b != a+1 || c != b+3 || d != c+1 {
					errs <- fmt.Errorf("worker %d: a transaction's IDs are not consecutive: %d %d %d %d", w, a, b, c, d)
					return
				}
				for id := a; id <= d; id++ {
					ids <- id
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				id, err := alone.Incr(ctx, "tx").Result()
				if err != nil {
					errs <- err
					return
				}
				ids <- id
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				v, err := lua.Eval(ctx, "local a = redis.call('INCR', KEYS[1]) local b = redis.call('INCRBY', KEYS[1], 2) return {a, b}", []string{"tx"}).Slice()
				if err != nil {
					errs <- err
					return
				}
				a, b := v[0].(int64), v[1].(int64)
				ids <- a
				ids <- b - 1
				ids <- b
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(ids)
	idtest.Unique(t, ids, workers*rounds*(6+1+3))
}

// TestTxExecAbortTakesNoID: a transaction refused while queueing takes no
// ID, whatever it queued.
func TestTxExecAbortTakesNoID(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	redistest.Incr(t, c, "abort")
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "abort")
		p.IncrBy(ctx, "abort", 1000)
		p.Do(ctx, "incr") // wrong arity
		p.Incr(ctx, "abort")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC: %v, want EXECABORT", err)
	}
	if got := redistest.Incr(t, c, "abort"); got != 2 {
		t.Fatalf("INCR after EXECABORT = %d, want 2: the transaction took IDs", got)
	}
}

// TestTxWatch: EXEC answers nil once another connection of this server
// took an ID of a watched tag or raised its floor; untouched, it runs.
func TestTxWatch(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 3, "")
	other := newClient(t, in.Addr, 2, "")
	cases := []struct {
		name    string
		touch   func(tag string) error
		aborted bool
	}{
		{"untouched", func(string) error { return nil }, false},
		{"incr by another connection", func(tag string) error { return other.Incr(ctx, tag).Err() }, true},
		{"incr of another tag", func(tag string) error { return other.Incr(ctx, tag+"x").Err() }, false},
		{"floor raised", func(tag string) error { return other.Do(ctx, "leaf.floor", tag, 1000).Err() }, true},
		{"set raised", func(tag string) error { return other.Set(ctx, tag, 500, 0).Err() }, true},
		{"exists and ttl read", func(tag string) error {
			if err := other.Exists(ctx, tag).Err(); err != nil {
				return err
			}
			return other.TTL(ctx, tag).Err()
		}, false},
	}
	for i, tc := range cases {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s fresh=%v", tc.name, fresh), func(t *testing.T) {
				tag := fmt.Sprintf("w%d-%v", i, fresh)
				if !fresh {
					redistest.Incr(t, c, tag)
				}
				err := c.Watch(ctx, func(tx *redis.Tx) error {
					if err := tc.touch(tag); err != nil {
						return err
					}
					_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Incr(ctx, tag)
						return nil
					})
					return err
				}, tag)
				if aborted := err == redis.TxFailedErr; aborted != tc.aborted || (err != nil && !aborted) {
					t.Fatalf("EXEC: %v, want aborted=%v", err, tc.aborted)
				}
			})
		}
	}
}

// TestScriptTimeLimit: a script that never ends is stopped at the time
// limit with an error, and the connection and server carry on.
func TestScriptTimeLimit(t *testing.T) {
	ctx := context.Background()
	in := servertest.Start(t, servertest.Options{Server: server.Options{ScriptTimeLimit: 50 * time.Millisecond}})
	c := newClient(t, in.Addr, 2, "")
	const forever = "redis.call('INCR', KEYS[1]) while true do end"
	err := c.Eval(ctx, forever, []string{"loop"}).Err()
	want := "ERR script stopped after 50ms (server.script_time_limit): script: " + sha1Hex(forever) + "; the IDs it took are skipped"
	if err == nil || err.Error() != want {
		t.Fatalf("EVAL of an endless loop: %v, want %q", err, want)
	}
	if got := redistest.Incr(t, c, "loop"); got != 2 {
		t.Fatalf("INCR after the stopped script = %d, want 2", got)
	}
}

// TestScriptStringRepBounded: string.rep cannot make the server allocate
// beyond its bound.
func TestScriptStringRepBounded(t *testing.T) {
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	err := c.Eval(context.Background(), "return string.rep('x', 1e12)", nil).Err()
	if err == nil || !strings.Contains(err.Error(), "string.rep: result longer than") {
		t.Fatalf("EVAL string.rep of 1e12: %v", err)
	}
	if v, err := c.Eval(context.Background(), "return string.rep('ab', 3)", nil).Text(); err != nil || v != "ababab" {
		t.Fatalf("string.rep('ab', 3) = %q, %v", v, err)
	}
}

// TestSelectNamespaces: a tag of database n is stored under a name no tag
// of another database can have; its name may be as long as the column
// allows with the prefix; INFO keyspace counts each database.
func TestSelectNamespaces(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	redistest.Incr(t, c, "a")
	if err := c.Do(ctx, "select", 12).Err(); err != nil {
		t.Fatal(err)
	}
	if got := redistest.Incr(t, c, "a"); got != 1 {
		t.Fatalf("INCR a in db 12 = %d, want 1: the databases share the tag", got)
	}
	long := strings.Repeat("x", segment.MaxTagLen-4)
	if got := redistest.Incr(t, c, long); got != 1 {
		t.Fatalf("INCR of a %d-byte name in db 12 = %d", len(long), got)
	}
	wantErr(t, c, fmt.Sprintf("ERR invalid tag name: %d bytes, the limit is %d", len(long)+1, len(long)), "incr", long+"x")
	rows, err := in.Store.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, r := range rows {
		stored[r.Name] = true
	}
	for _, name := range []string{"a", "\x1f12\x1fa", "\x1f12\x1f" + long} {
		if !stored[name] {
			t.Errorf("no row %q among %v", name, stored)
		}
	}
	info, err := c.Info(ctx, "keyspace").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"db0:keys=1,expires=0,avg_ttl=0\r\n", "db12:keys=2,expires=0,avg_ttl=0\r\n"} {
		if !strings.Contains(info, line) {
			t.Errorf("INFO keyspace lacks %q:\n%s", line, info)
		}
	}
	if got, err := c.Do(ctx, "client", "info").Text(); err != nil || !strings.Contains(got, " db=12 ") {
		t.Errorf("CLIENT INFO = %q, %v: want db=12", got, err)
	}
	// The stored name of db 12's tag, typed in db 0, is a bad name there,
	// not a way into db 12.
	if err := c.Do(ctx, "select", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, c, "ERR invalid tag name: control character U+001F", "incr", "\x1f12\x1fa")
	if v, err := c.Get(ctx, "\x1f12\x1fa").Result(); err != redis.Nil {
		t.Errorf("GET of db 12's stored name in db 0 = %q, %v; want nil", v, err)
	}
}

// TestExistsNeverCreates: EXISTS, TYPE and TTL of an unknown name leave no
// row behind.
func TestExistsNeverCreates(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	for _, args := range [][]any{{"exists", "ghost"}, {"type", "ghost"}, {"ttl", "ghost"}, {"mget", "ghost"}, {"get", "ghost"}} {
		if err := c.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	if rows, err := in.Store.Tags(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("rows after EXISTS: %v, %v; want none", rows, err)
	}
}

// TestScanWhileCreating: tags created during a SCAN move the cursor's
// later names on, never back: every tag that existed when the scan began
// is returned.
func TestScanWhileCreating(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 3, "")
	before := map[string]bool{}
	for i := range 100 {
		name := fmt.Sprintf("t%03d", i)
		redistest.Incr(t, c, name)
		before[name] = true
	}
	cursor := uint64(0)
	for n := 0; ; n++ {
		keys, next, err := c.Scan(ctx, cursor, "", 7).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			delete(before, k)
		}
		// New names before, among and after the ones scanned.
		for _, p := range []string{"a", "t050", "t999", "z"} {
			redistest.Incr(t, c, fmt.Sprintf("%s-%d", p, n))
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(before) > 0 {
		t.Fatalf("SCAN missed %d tags that existed all along: %v", len(before), before)
	}
}

// TestScriptsLeaveNoTrace: interpreters are kept between runs, yet no run
// sees what another changed, with plain assignments (refused) or around
// the guards.
func TestScriptsLeaveNoTrace(t *testing.T) {
	ctx := context.Background()
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	for _, change := range []string{
		"rawset(_G, 'leaked', 1)",
		"setmetatable(_G, nil) leaked = 1",
		"getmetatable(_G).__index = nil",
		"string.leaked = 1",
		"string.len = nil",
		"getmetatable('').__index = {}",
		"redis.call = nil",
		"table.insert = nil",
		"math.floor = nil",
	} {
		t.Run(change, func(t *testing.T) {
			if err := c.Eval(ctx, change+" return 1", nil).Err(); err != nil && !strings.Contains(err.Error(), "readonly") {
				t.Fatalf("EVAL %s: %v", change, err)
			}
			check := "local ok = pcall(function() return leaked end) " +
				"return {ok and 1 or 0, string.leaked == nil and 1 or 0, type(string.len), type(('x').len), type(redis.call), type(table.insert), type(math.floor)}"
			v, err := c.Eval(ctx, check, nil).Slice()
			if err != nil {
				t.Fatal(err)
			}
			want := []any{int64(0), int64(1), "function", "function", "function", "function", "function"}
			if fmt.Sprint(v) != fmt.Sprint(want) {
				t.Fatalf("after %q the next script sees %v, want %v", change, v, want)
			}
		})
	}
}
