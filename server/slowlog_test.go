package server_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// SLOWLOG, LATENCY and CONFIG GET compared with redis-server's: the same
// commands to both, the replies side by side.

// comparePair is a leaf and a redis-server with a client each speaking
// proto, both set to log every command in SLOWLOG.
type comparePair struct {
	leaf, rds *redis.Client
	in        *servertest.Instance
}

func newComparePair(t *testing.T, proto int, opts server.Options) comparePair {
	t.Helper()
	raddr := redistest.Start(t)
	in := servertest.Start(t, servertest.Options{Server: opts})
	mk := func(addr string) *redis.Client {
		c := redis.NewClient(redistest.Options(&redis.Options{
			Addr: addr, Protocol: proto, PoolSize: 1, MaxRetries: -1, DisableIdentity: true,
		}))
		t.Cleanup(func() { c.Close() })
		return c
	}
	p := comparePair{leaf: mk(in.Addr), rds: mk(raddr), in: in}
	ctx := context.Background()
	if err := p.rds.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// both runs args on both servers and returns the replies and errors.
func (p comparePair) both(args ...any) (lv, rv any, lerr, rerr error) {
	ctx := context.Background()
	lv, lerr = p.leaf.Do(ctx, args...).Result()
	rv, rerr = p.rds.Do(ctx, args...).Result()
	return lv, rv, lerr, rerr
}

// same checks that args get the same reply (or error) from both.
func (p comparePair) same(t *testing.T, args ...any) any {
	t.Helper()
	lv, rv, lerr, rerr := p.both(args...)
	if fmt.Sprint(lerr) != fmt.Sprint(rerr) || !reflect.DeepEqual(lv, rv) {
		t.Errorf("%v:\n leaf  %#v, %v\n Redis %#v, %v", args, lv, lerr, rv, rerr)
	}
	return lv
}

// TestSlowlogLikeRedis: with every command logged, the same commands
// leave the same entries in both SLOWLOGs: arguments as Redis keeps them
// (32 at most, 128 bytes each, passwords redacted), the client's name
// and address, newest first; and the subcommands answer as Redis's.
func TestSlowlogLikeRedis(t *testing.T) {
	p := newComparePair(t, 2, server.Options{SlowlogThreshold: time.Nanosecond})
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	many := []any{"COMMAND", "INFO"}
	for i := range 40 {
		many = append(many, "c"+strconv.Itoa(i))
	}
	start := time.Now().Unix()
	for _, c := range []*redis.Client{p.leaf, p.rds} {
		for _, args := range [][]any{
			{"PING"}, // connects first, so RESET is the first entry
			{"SLOWLOG", "RESET"},
			{"CLIENT", "SETNAME", "slow"},
			{"INCR", "a"},
			{"ECHO", long},
			{"AUTH", "secret"},
			{"HELLO", "2", "AUTH", "default", "secret"},
			many,
			{"INCR"}, // refused: not logged
		} {
			_ = c.Do(ctx, args...).Err()
		}
	}
	entries := func(c *redis.Client) []redis.SlowLog {
		t.Helper()
		logs, err := c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return logs
	}
	le, re := entries(p.leaf), entries(p.rds)
	if len(le) != len(re) || len(le) != 7 {
		t.Fatalf("%d entries, Redis %d, want 7:\n leaf  %+v\n Redis %+v", len(le), len(re), le, re)
	}
	for i := range le {
		l, r := le[i], re[i]
		if !reflect.DeepEqual(l.Args, r.Args) || l.ClientName != r.ClientName {
			t.Errorf("entry %d: leaf %q (name %q), Redis %q (name %q)", i, l.Args, l.ClientName, r.Args, r.ClientName)
		}
		if !strings.HasPrefix(l.ClientAddr, "127.0.0.1:") {
			t.Errorf("entry %d: client address %q", i, l.ClientAddr)
		}
		if l.Time.Unix() < start || l.Time.After(time.Now()) || l.Duration < 0 {
			t.Errorf("entry %d: time %v, duration %v", i, l.Time, l.Duration)
		}
		if i > 0 && l.ID != le[i-1].ID-1 {
			t.Errorf("entry %d: id %d after %d: newest first, one apart", i, l.ID, le[i-1].ID)
		}
	}
	for _, args := range [][]any{
		{"SLOWLOG", "GET", "-5"}, {"SLOWLOG", "GET", "x"}, {"SLOWLOG", "GET", "1", "2"},
		{"SLOWLOG", "LEN", "x"}, {"SLOWLOG", "RESET", "x"}, {"SLOWLOG", "NOPE"}, {"SLOWLOG"},
		{"SLOWLOG", "HELP"}, {"SLOWLOG", "GET", "0"},
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { p.same(t, args...) })
	}
	// After RESET, only the RESET itself (and LEN after it) is logged.
	p.same(t, "SLOWLOG", "RESET")
	p.same(t, "SLOWLOG", "LEN")
	if got, err := p.leaf.SlowLogGet(ctx, 10).Result(); err != nil || len(got) != 2 || got[0].Args[1] != "LEN" {
		t.Fatalf("after RESET: %+v, %v", got, err)
	}
}

// TestSlowlogThresholdServed: over a real connection, a negative
// threshold logs nothing and 1ns every command that ran. (Which commands
// the default 10 ms logs depends on the machine's speed: TestRunTiming
// checks the threshold with a clock of its own.)
func TestSlowlogThresholdServed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		want      []string // the commands logged, oldest first
	}{
		{"off", -1, nil},
		{"every command", time.Nanosecond, []string{"incr a", "incr a", "ping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := servertest.Start(t, servertest.Options{Server: server.Options{SlowlogThreshold: tc.threshold}})
			c := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1, DisableIdentity: true}))
			t.Cleanup(func() { c.Close() })
			if err := c.Ping(ctx).Err(); err != nil { // connects
				t.Fatal(err)
			}
			if err := c.SlowLogReset(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			redistest.Incr(t, c, "a")
			redistest.Incr(t, c, "a")
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			logs, err := c.SlowLogGet(ctx, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := len(logs) - 1; i >= 0; i-- {
				if cmd := strings.Join(logs[i].Args, " "); !strings.EqualFold(cmd, "slowlog reset") {
					got = append(got, cmd)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("logged %q, want %q", got, tc.want)
			}
		})
	}
}

// histogramShape is a LATENCY HISTOGRAM reply (RESP3) with the bucket
// keys and counts kept, as name -> calls and the cumulative counts.
func histogramShape(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	m, ok := v.(map[any]any)
	if !ok {
		t.Fatalf("LATENCY HISTOGRAM: %T, want a map", v)
	}
	for name, e := range m {
		em := e.(map[any]any)
		hist := em["histogram_usec"].(map[any]any)
		var cum []int64
		for _, c := range hist {
			cum = append(cum, c.(int64))
		}
		out[name.(string)] = fmt.Sprintf("calls=%d buckets=%d", em["calls"], len(cum))
		for k, c := range hist {
			if _, ok := k.(int64); !ok || c.(int64) > em["calls"].(int64) {
				t.Errorf("%s: bucket %v: %v (calls %v)", name, k, c, em["calls"])
			}
		}
	}
	return out
}

// TestLatencyLikeRedis: LATENCY answers as Redis's: the same errors, the
// same empty replies, a histogram per command that ran with its calls
// and cumulative buckets keyed as Redis keys them; and the events leaf
// records (every command here) in Redis's shapes.
func TestLatencyLikeRedis(t *testing.T) {
	p := newComparePair(t, 3, server.Options{SlowlogThreshold: time.Nanosecond})
	ctx := context.Background()
	t.Run("help", func(t *testing.T) {
		// leaf has no DOCTOR nor GRAPH (reports for a human's eyes):
		// Redis's help without those two.
		lv, rv, lerr, rerr := p.both("LATENCY", "HELP")
		var want []any
		lines := rv.([]any)
		for i := 0; i < len(lines); i++ {
			if l := lines[i].(string); strings.HasPrefix(l, "DOCTOR") || strings.HasPrefix(l, "GRAPH") {
				i++ // and its explanation
				continue
			}
			want = append(want, lines[i])
		}
		if lerr != nil || rerr != nil || !reflect.DeepEqual(lv, want) {
			t.Fatalf("leaf %q, %v\nwant %q, %v", lv, lerr, want, rerr)
		}
	})
	for _, args := range [][]any{
		{"LATENCY", "HISTORY"}, {"LATENCY", "NOPE"}, {"LATENCY"},
		{"LATENCY", "HISTORY", "nosuch"}, {"LATENCY", "RESET", "nosuch"},
		{"LATENCY", "HISTOGRAM", "nosuch"}, {"LATENCY", "HISTOGRAM", "decr"}, {"LATENCY", "LATEST", "x"},
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { p.same(t, args...) })
	}
	for _, c := range []*redis.Client{p.leaf, p.rds} {
		for range 3 {
			if err := c.Incr(ctx, "a").Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Do(ctx, "CLIENT", "GETNAME").Err(); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
	}
	t.Run("histogram", func(t *testing.T) {
		for _, args := range [][]any{
			{"LATENCY", "HISTOGRAM", "incr"},
			{"LATENCY", "HISTOGRAM", "INCR", "incr"}, // twice: answered twice (a map with one key here)
			{"LATENCY", "HISTOGRAM", "client"},       // a container: its subcommands that ran
			{"LATENCY", "HISTOGRAM", "client|getname", "nosuch"},
		} {
			lv, rv, lerr, rerr := p.both(args...)
			if lerr != nil || rerr != nil {
				t.Fatalf("%v: %v, %v", args, lerr, rerr)
			}
			// The bucket counts depend on each server's speed: compare the
			// commands and their calls.
			calls := func(m map[string]string) map[string]string {
				out := map[string]string{}
				for k, v := range m {
					out[k] = strings.Fields(v)[0]
				}
				return out
			}
			if l, r := calls(histogramShape(t, lv)), calls(histogramShape(t, rv)); !reflect.DeepEqual(l, r) {
				t.Errorf("%v: leaf %v, Redis %v", args, l, r)
			}
		}
		// Bucket keys: Redis's, 1024 ns times powers of two in
		// microseconds as HdrHistogram rounds them.
		v, _ := p.leaf.Do(ctx, "LATENCY", "HISTOGRAM", "incr").Result()
		valid := map[int64]bool{}
		for k := 10; k <= 35; k++ {
			top := int64(1) << k
			valid[(top+max(top>>7, 1)-1)/1000] = true
		}
		for key := range v.(map[any]any)["incr"].(map[any]any)["histogram_usec"].(map[any]any) {
			if !valid[key.(int64)] {
				t.Errorf("bucket key %v is none of Redis's", key)
			}
		}
	})
	t.Run("events", func(t *testing.T) {
		latest, err := p.leaf.Do(ctx, "LATENCY", "LATEST").Slice()
		if err != nil {
			t.Fatal(err)
		}
		events := map[string][]any{}
		for _, e := range latest {
			row := e.([]any)
			if len(row) != 4 {
				t.Fatalf("LATENCY LATEST row %v: want [event, time, latest, max]", row)
			}
			for _, v := range row[1:] {
				if n, ok := v.(int64); !ok || n < 0 {
					t.Fatalf("LATENCY LATEST row %v", row)
				}
			}
			events[row[0].(string)] = row
		}
		// The first INCR of a waited for its tag; the others and the rest
		// were answered from memory.
		if events["command"] == nil || events["fast-command"] == nil {
			t.Fatalf("events %v, want command and fast-command", latest)
		}
		hist, err := p.leaf.Do(ctx, "LATENCY", "HISTORY", "fast-command").Slice()
		if err != nil || len(hist) == 0 {
			t.Fatalf("LATENCY HISTORY fast-command: %v, %v", hist, err)
		}
		if row := hist[len(hist)-1].([]any); len(row) != 2 || row[0] != events["fast-command"][1] {
			t.Fatalf("HISTORY's last sample %v, LATEST's %v", row, events["fast-command"])
		}
		// (LATENCY itself is a "command": it may block.)
		if n, err := p.leaf.Do(ctx, "LATENCY", "RESET", "fast-command", "nosuch").Int(); err != nil || n != 1 {
			t.Fatalf("LATENCY RESET fast-command nosuch: %d, %v; want 1", n, err)
		}
		if h, err := p.leaf.Do(ctx, "LATENCY", "HISTORY", "fast-command").Slice(); err != nil || len(h) != 0 {
			t.Fatalf("HISTORY after RESET: %v, %v", h, err)
		}
	})
}

// TestConfigGetLikeRedis: the parameters tools read answer as Redis's,
// with leaf's values: no memory limit, no eviction, the databases SELECT
// may choose, no snapshots nor AOF, SLOWLOG's settings.
func TestConfigGetLikeRedis(t *testing.T) {
	p := newComparePair(t, 2, server.Options{SlowlogThreshold: 25 * time.Millisecond})
	ctx := context.Background()
	for _, name := range []string{"maxmemory", "maxmemory-policy", "maxclients", "save", "appendonly", "timeout", "slowlog-max-len"} {
		t.Run(name, func(t *testing.T) { p.same(t, "CONFIG", "GET", name) })
	}
	for _, tc := range []struct{ name, want string }{
		{"databases", "16"},
		{"slowlog-log-slower-than", "25000"},
	} {
		got, err := p.leaf.ConfigGet(ctx, tc.name).Result()
		if err != nil || got[tc.name] != tc.want {
			t.Errorf("CONFIG GET %s = %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// CONFIG GET *, as the exporter asks: pairs, numbers where Redis's are.
	all, err := p.leaf.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"maxmemory", "maxclients", "databases"} {
		if _, err := strconv.Atoi(all[k]); err != nil {
			t.Errorf("CONFIG GET * %s = %q", k, all[k])
		}
	}
}

// TestStrlenLikeRedis: STRLEN of a tag is the length of GET's reply, 0
// for a tag this server never handed out, as Redis answers for a string
// key and a missing one.
func TestStrlenLikeRedis(t *testing.T) {
	p := newComparePair(t, 2, server.Options{})
	ctx := context.Background()
	if err := p.leaf.IncrBy(ctx, "k", 12345).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.rds.Set(ctx, "k", "12345", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{"STRLEN", "k"}, {"STRLEN", "missing"}, {"STRLEN"}, {"STRLEN", "a", "b"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { p.same(t, args...) })
	}
}
