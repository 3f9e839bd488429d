package server_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// The commands Redis code runs around counters, each compared with a real
// redis-server's reply: the same sequence runs on a connection to each,
// and every reply must be equal, but where leaf documents a difference
// (want), which the step says.

// step is one command of a compared sequence. When leaf must differ,
// differs says why and want is leaf's reply (a value, or an error text).
type step struct {
	args    []any
	differs string
	want    any
	// fresh runs the step on new connections: the step before closed
	// them (QUIT), and a client may not have seen the close yet.
	fresh bool
}

// pair is a connection to leaf and one to redis-server, on one protocol.
type pair struct {
	leaf, redis         *redis.Client
	leafAddr, redisAddr string
	proto               int
}

// startPair starts leaf and redis-server and connects to both.
func startPair(t *testing.T, proto int) pair {
	t.Helper()
	raddr := redistest.Start(t)
	in := start(t)
	return pair{leaf: newClient(t, in.Addr, proto, ""), redis: newClient(t, raddr, proto, ""),
		leafAddr: in.Addr, redisAddr: raddr, proto: proto}
}

// fresh is p on new connections to the same servers.
func (p pair) fresh(t *testing.T) pair {
	p.leaf, p.redis = newClient(t, p.leafAddr, p.proto, ""), newClient(t, p.redisAddr, p.proto, "")
	return p
}

// reply is a command's outcome, comparable: the value or the error text.
func reply(c *redis.Client, args ...any) any {
	v, err := c.Do(context.Background(), args...).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return v
}

// run runs steps on both servers, with every "{k}" in an argument replaced
// by a name of the test's own (so each case starts with unknown names).
func (p pair) run(t *testing.T, prefix string, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.fresh {
			p = p.fresh(t)
		}
		args := make([]any, len(s.args))
		for j, a := range s.args {
			if str, ok := a.(string); ok {
				a = strings.ReplaceAll(str, "{k}", prefix)
			}
			args[j] = a
		}
		got := reply(p.leaf, args...)
		if s.differs == "" {
			want := reply(p.redis, args...)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d %v:\nleaf  %#v\nredis %#v", i, args, got, want)
			}
			continue
		}
		// Redis is still sent the command, so later steps compare states
		// that went through the same sequence.
		rv := reply(p.redis, args...)
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d %v (%s):\nleaf %#v\nwant %#v (redis-server: %#v)", i, args, s.differs, got, s.want, rv)
		}
	}
}

func TestCompatTransactions(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		p := startPair(t, proto)
		noExpiry := "tags never expire"
		cases := []struct {
			name  string
			steps []step
		}{
			{"incr expire exec", []step{
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"expire", "{k}", 60}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec"}, differs: noExpiry, want: []any{int64(1), int64(0), int64(2)}},
				{args: []any{"get", "{k}"}},
				{args: []any{"ttl", "{k}"}, differs: noExpiry, want: int64(-1)},
			}},
			{"runs of incrs around reads and floors", []step{
				{args: []any{"multi"}},
				{args: []any{"incrby", "{k}", 5}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"incr", "{k}b"}},
				{args: []any{"ttl", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"get", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"set", "{k}", 100}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"select", 1}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"select", 0}},
				{args: []any{"incrby", "{k}", 2}},
				{args: []any{"exec"}},
				{args: []any{"get", "{k}"}},
			}},
			{"execabort takes no id", []step{
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"incr"}},
				{args: []any{"nosuchcommand", "x"}},
				{args: []any{"exec"}},
				{args: []any{"incr", "{k}"}},
			}},
			{"discard takes no id", []step{
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"discard"}},
				{args: []any{"discard"}},
				{args: []any{"incr", "{k}"}},
			}},
			{"errors at exec are answered in the array", []step{
				{args: []any{"multi"}},
				{args: []any{"incrby", "{k}", "x"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"incrby", "{k}", 5}},
				{args: []any{"exec"}},
			}},
			{"nesting and misuse", []step{
				{args: []any{"exec"}},
				{args: []any{"exec", "x"}},
				{args: []any{"multi", "x"}},
				{args: []any{"discard", "x"}},
				{args: []any{"multi"}},
				{args: []any{"multi"}},
				{args: []any{"watch", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec"}},
				{args: []any{"multi"}},
				{args: []any{"exec"}},
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec", "x"}},
				{args: []any{"exec"}},
				{args: []any{"get", "{k}"}},
			}},
			{"quit inside multi runs at once", []step{
				{args: []any{"multi"}, fresh: true}, // the QUIT closes these, not the other cases
				{args: []any{"incr", "{k}"}},
				{args: []any{"quit"}},
				{args: []any{"incr", "{k}"}, fresh: true},
			}},
			{"watch untouched", []step{
				{args: []any{"watch", "{k}", "{k}b"}},
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec"}},
				{args: []any{"watch"}},
				{args: []any{"unwatch"}},
			}},
			{"watch touched by this connection", []step{
				{args: []any{"incr", "{k}"}},
				{args: []any{"watch", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec"}},
				{args: []any{"get", "{k}"}},
			}},
			{"unwatch forgets", []step{
				{args: []any{"watch", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"unwatch"}},
				{args: []any{"multi"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exec"}},
			}},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { p.run(t, fmt.Sprintf("tx%d:%d", proto, i), tc.steps) })
		}
	})
}

func TestCompatKeys(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		p := startPair(t, proto)
		noExpiry := "tags never expire"
		refused := func(args []any, want string) step {
			return step{args: args, differs: "IDs never go back nor repeat", want: "error: " + want}
		}
		cases := []struct {
			name  string
			steps []step
		}{
			{"expiry family", []step{
				{args: []any{"ttl", "{k}"}},
				{args: []any{"pttl", "{k}"}},
				{args: []any{"expiretime", "{k}"}},
				{args: []any{"expire", "{k}", 10}},
				{args: []any{"persist", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"ttl", "{k}"}},
				{args: []any{"pttl", "{k}"}},
				{args: []any{"pexpiretime", "{k}"}},
				{args: []any{"persist", "{k}"}},
				{args: []any{"expire", "{k}", 100}, differs: noExpiry, want: int64(0)},
				{args: []any{"pexpire", "{k}", 100000}, differs: noExpiry, want: int64(0)},
				{args: []any{"expireat", "{k}", 4102444800}, differs: noExpiry, want: int64(0)},
				{args: []any{"pexpireat", "{k}", "4102444800000"}, differs: noExpiry, want: int64(0)},
				{args: []any{"expire", "{k}", 0}, differs: noExpiry, want: int64(0)},
				{args: []any{"ttl", "{k}"}, differs: noExpiry, want: int64(-1)},
				{args: []any{"get", "{k}"}, differs: noExpiry, want: "1"},
			}},
			{"expire arguments", []step{
				{args: []any{"expire", "{k}", "x"}},
				{args: []any{"expire", "{k}", 10, "foo"}},
				{args: []any{"expire", "{k}", 10, "nx", "xx"}},
				{args: []any{"expire", "{k}", 10, "gt", "lt"}},
				{args: []any{"expire", "{k}", "9223372036854775807"}},
				{args: []any{"pexpire", "{k}", "9223372036854775807"}},
				{args: []any{"expire", "{k}"}},
				{args: []any{"ttl", "{k}", "x"}},
				{args: []any{"persist"}},
			}},
			{"exists type mget", []step{
				{args: []any{"exists", "{k}"}},
				{args: []any{"type", "{k}"}},
				{args: []any{"mget", "{k}", "{k}b"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"exists", "{k}", "{k}b", "{k}"}},
				{args: []any{"type", "{k}"}},
				{args: []any{"mget", "{k}", "{k}b"}},
				{args: []any{"exists"}},
				{args: []any{"type"}},
			}},
			{"set nx then incr", []step{
				{args: []any{"set", "{k}", 100, "nx"}},
				{args: []any{"get", "{k}"}},
				{args: []any{"set", "{k}", 5, "nx"}},
				{args: []any{"setnx", "{k}", 7}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"setnx", "{k}b", 1000}},
				{args: []any{"incr", "{k}b"}},
				{args: []any{"setnx", "{k}b"}},
			}},
			{"set zero then get", []step{
				{args: []any{"set", "{k}", 0}},
				{args: []any{"get", "{k}"}},
				{args: []any{"incr", "{k}"}},
			}},
			{"set then get", []step{
				{args: []any{"set", "{k}", 41}},
				{args: []any{"get", "{k}"}},
				{args: []any{"incr", "{k}"}},
				{args: []any{"get", "{k}"}},
			}},
			{"set options refused", []step{
				{args: []any{"set", "{k}", 1, "ex", 10}, differs: noExpiry,
					want: "error: ERR SET with EX is refused: tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"},
				{args: []any{"set", "{k}", 1, "nx", "px", 10}, differs: noExpiry,
					want: "error: ERR SET with PX is refused: tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"},
				{args: []any{"set", "{k}", 1, "keepttl"}, differs: noExpiry,
					want: "error: ERR SET with KEEPTTL is refused: tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"},
				{args: []any{"set", "{k}", 2, "get"}, differs: "SET raises a floor",
					want: "error: ERR SET with GET is refused: SET tag n raises the tag's floor, and GET tag reads the last ID"},
				{args: []any{"set", "{k}", 1, "foo"}},
				{args: []any{"exists", "{k}b"}},
			}},
			{"refused", []step{
				{args: []any{"incr", "{k}"}},
				refused([]any{"decr", "{k}"}, "ERR DECR is refused: IDs never go back: an ID handed out is never handed out again"),
				refused([]any{"decrby", "{k}", 1}, "ERR DECRBY is refused: IDs never go back: an ID handed out is never handed out again"),
				refused([]any{"getset", "{k}", 1}, "ERR GETSET is refused: it would set a tag back and repeat IDs; SET tag n raises the floor, and GET reads it"),
				refused([]any{"getdel", "{k}"}, "ERR GETDEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1); GET answers without deleting"),
				refused([]any{"unlink", "{k}"}, "ERR UNLINK is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1); tags are never deleted"),
				refused([]any{"incrbyfloat", "{k}", 1.5}, "ERR INCRBYFLOAT is refused: IDs are integers; INCRBY tag n reserves n of them"),
				refused([]any{"rename", "{k}", "{k}b"}, "ERR RENAME is refused: a tag's name is its row: the new name would start again at 1, and the old one again too"),
				refused([]any{"flushdb"}, "ERR FLUSHDB is refused: deleting tags risks repeated IDs (a re-created row starts again at 1); tags are never deleted"),
				refused([]any{"flushall"}, "ERR FLUSHALL is refused: deleting tags risks repeated IDs (a re-created row starts again at 1); tags are never deleted"),
				{args: []any{"decr"}},
				{args: []any{"getset", "{k}"}},
			}},
			{"time", []step{
				{args: []any{"time", "x"}},
			}},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { p.run(t, fmt.Sprintf("keys%d:%d", proto, i), tc.steps) })
		}
	})
}

// TestCompatListing compares DBSIZE, KEYS and SCAN over the same tags: leaf
// lists them in name order, Redis in its hash order, so the sets are
// compared, and SCAN is run to its end on both.
func TestCompatListing(t *testing.T) {
	ctx := context.Background()
	p := startPair(t, 3)
	names := []string{"a", "ab", "b", "b?", "c[1]", "order:20261202", "order:20261203", "user", "x*y", "\\z"}
	for _, n := range names {
		for _, c := range []*redis.Client{p.leaf, p.redis} {
			if err := c.Incr(ctx, n).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	sortedSet := func(v any) []string {
		var out []string
		for _, x := range v.([]any) {
			out = append(out, x.(string))
		}
		return sorted(out)
	}
	p.run(t, "", []step{{args: []any{"dbsize"}}, {args: []any{"keys"}}, {args: []any{"scan"}},
		{args: []any{"scan", "x"}}, {args: []any{"scan", 0, "count", 0}}, {args: []any{"scan", 0, "count", "x"}},
		{args: []any{"scan", 0, "type"}}, {args: []any{"scan", 0, "foo", 1}}})
	for _, pat := range []string{"*", "order:*", "?", "b\\?", "c\\[1\\]", "[ab]*", "[^a]*", "[a-b]", "x\\*y", "\\\\z", "*2026120[2]", "nomatch"} {
		t.Run("keys "+pat, func(t *testing.T) {
			got, want := reply(p.leaf, "keys", pat), reply(p.redis, "keys", pat)
			if g, w := sortedSet(got), sortedSet(want); !reflect.DeepEqual(g, w) {
				t.Fatalf("KEYS %s: leaf %q, redis %q", pat, g, w)
			}
			if g := got.([]any); !reflect.DeepEqual(sortedSet(got), toStrings(g)) {
				t.Fatalf("KEYS %s: leaf's are not sorted: %q", pat, g)
			}
		})
	}
	for _, opts := range [][]any{nil, {"match", "order:*"}, {"count", 3}, {"match", "*b*", "count", 1}, {"type", "string"}, {"type", "hash"}} {
		t.Run(fmt.Sprint("scan ", opts), func(t *testing.T) {
			got, want := scanAll(t, p.leaf, opts), scanAll(t, p.redis, opts)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("SCAN %v: leaf %q, redis %q", opts, got, want)
			}
		})
	}
}

// scanAll runs SCAN from cursor 0 to its end and returns the names, sorted
// and without repeats.
func scanAll(t *testing.T, c *redis.Client, opts []any) []string {
	t.Helper()
	seen := map[string]bool{}
	cursor := "0"
	for {
		v, err := c.Do(context.Background(), append([]any{"scan", cursor}, opts...)...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range v[1].([]any) {
			seen[n.(string)] = true
		}
		if cursor = v[0].(string); cursor == "0" {
			break
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	return sorted(out)
}

func toStrings(v []any) []string {
	var out []string
	for _, x := range v {
		out = append(out, x.(string))
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestCompatScripts(t *testing.T) {
	const daily = "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n"
	forEachProtocol(t, func(t *testing.T, proto int) {
		p := startPair(t, proto)
		cases := []struct {
			name  string
			steps []step
		}{
			{"incr and expire if first", []step{
				{args: []any{"eval", daily, 1, "{k}", 172800}},
				{args: []any{"eval", daily, 1, "{k}", 172800}},
				{args: []any{"evalsha", sha1Hex(daily), 1, "{k}", 172800}},
				{args: []any{"script", "exists", sha1Hex(daily), "ffffffffffffffffffffffffffffffffffffffff"}},
				{args: []any{"ttl", "{k}"}, differs: "tags never expire", want: int64(-1)},
			}},
			{"script load and evalsha", []step{
				{args: []any{"script", "load", "return redis.call('incrby', KEYS[1], ARGV[1])"}},
				{args: []any{"evalsha", sha1Hex("return redis.call('incrby', KEYS[1], ARGV[1])"), 1, "{k}", 10}},
				{args: []any{"evalsha", strings.ToUpper(sha1Hex("return redis.call('incrby', KEYS[1], ARGV[1])")), 1, "{k}", 5}},
				{args: []any{"script", "flush"}},
				{args: []any{"evalsha", sha1Hex("return redis.call('incrby', KEYS[1], ARGV[1])"), 1, "{k}", 5}},
				{args: []any{"script", "flush", "async"}},
				{args: []any{"script", "flush", "x"}},
				{args: []any{"script", "nope"}},
				{args: []any{"script"}},
			}},
			{"reply conversions", []step{
				{args: []any{"eval", "return 3.7", 0}},
				{args: []any{"eval", "return {1, 'two', {3}, nil, 5}", 0}},
				{args: []any{"eval", "return true", 0}},
				{args: []any{"eval", "return false", 0}},
				{args: []any{"eval", "return nil", 0}},
				{args: []any{"eval", "return {ok='fine'}", 0}},
				{args: []any{"eval", "return {err='My Err'}", 0}},
				{args: []any{"eval", "return redis.status_reply('S')", 0}},
				{args: []any{"eval", "return redis.error_reply('ERR custom')", 0}},
				{args: []any{"eval", "return redis.call('ping')", 0}},
				{args: []any{"eval", "return redis.call('get', KEYS[1])", 1, "{k}"}},
				{args: []any{"eval", "return redis.call('exists', KEYS[1])", 1, "{k}"}},
				{args: []any{"eval", "return {KEYS[1], ARGV[1], ARGV[2]}", 1, "{k}", "a", "b"}},
				{args: []any{"eval", "return redis.sha1hex('x')", 0}},
				{args: []any{"eval", "return type(redis.call('get', 'nokey{k}'))", 0}},
				{args: []any{"eval", "return redis.call('incrby', KEYS[1], 2) + 1", 1, "{k}"}},
			}},
			{"errors", []step{
				{args: []any{"eval", "return redis.call('incr', 'a{k}', 'b')", 0}},
				{args: []any{"eval", "return redis.call('nosuch', 'a')", 0}},
				{args: []any{"eval", "return redis.call('incrby', 'a{k}', 'x')", 0}},
				{args: []any{"eval", "return redis.pcall('incrby', 'a{k}', 'x')", 0}},
				{args: []any{"eval", "local r = redis.pcall('incrby', 'a{k}', 'x') return r['err']", 0}},
				{args: []any{"eval", "return redis.call('multi')", 0}},
				{args: []any{"eval", "error('boom')", 0}},
				{args: []any{"eval", "return 1", "x"}},
				{args: []any{"eval", "return 1", -1}},
				{args: []any{"eval", "return 1", 2, "a"}},
				{args: []any{"evalsha", "abc", 0}},
				{args: []any{"eval", "return 1"}},
			}},
			{"sandbox", []step{
				{args: []any{"eval", "return os.time()", 0}},
				{args: []any{"eval", "return io", 0}},
				{args: []any{"eval", "return require('x')", 0}},
				{args: []any{"eval", "return loadfile('x')", 0}},
				{args: []any{"eval", "return dofile('x')", 0}},
				{args: []any{"eval", "x = 1", 0}},
				{args: []any{"eval", "local t = {} t.x = 1 return t.x", 0}},
			}},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { p.run(t, fmt.Sprintf("lua%d:%d", proto, i), tc.steps) })
		}
	})
}

func TestCompatSelect(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		p := startPair(t, proto)
		p.run(t, fmt.Sprintf("db%d", proto), []step{
			{args: []any{"incr", "{k}"}},
			{args: []any{"select", 1}},
			{args: []any{"exists", "{k}"}},
			{args: []any{"incr", "{k}"}},
			{args: []any{"incr", "{k}"}},
			{args: []any{"incrby", "{k}", 10}},
			{args: []any{"get", "{k}"}},
			{args: []any{"set", "{k}b", 50, "nx"}},
			{args: []any{"incr", "{k}b"}},
			{args: []any{"dbsize"}},
			{args: []any{"keys", "{k}b"}},
			{args: []any{"eval", "redis.call('select', 2) return redis.call('incr', KEYS[1])", 1, "{k}"}},
			{args: []any{"incr", "{k}"}},
			{args: []any{"select", 0}},
			{args: []any{"incr", "{k}"}},
			{args: []any{"get", "{k}"}},
			{args: []any{"dbsize"}},
			{args: []any{"select", 15}},
			{args: []any{"dbsize"}},
			{args: []any{"select", 16}},
			{args: []any{"select", -1}},
			{args: []any{"select", "x"}},
		})
	})
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
