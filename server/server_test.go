package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

func TestIncr(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		// One server on a fresh database hands out 1, 2, 3, ... with no
		// gap, across segment switches (the default step is 1000).
		for want := int64(1); want <= 2500; want++ {
			if got := redistest.Incr(t, c, "order"); got != want {
				t.Fatalf("INCR order = %d, want %d", got, want)
			}
		}
		if got := redistest.Incr(t, c, "user"); got != 1 {
			t.Fatalf("INCR user = %d, want 1: tags are independent", got)
		}
		if got := redistest.Incr(t, c, "order"); got != 2501 {
			t.Fatalf("INCR order after another tag = %d, want 2501", got)
		}
	})
}

func TestIncrBy(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		ctx := context.Background()
		var prevLast int64 // the client owns [last-n+1, last]
		for i, n := range []int64{10, 10, 1, 999, 5000, 3, 100_000, 7} {
			last, err := c.IncrBy(ctx, "batch", n).Result()
			if err != nil {
				t.Fatalf("INCRBY batch %d: %v", n, err)
			}
			if first := last - n + 1; first <= prevLast {
				t.Fatalf("call %d: INCRBY batch %d = %d: range [%d, %d] overlaps the previous one ending at %d",
					i, n, last, first, last, prevLast)
			}
			prevLast = last
			id := redistest.Incr(t, c, "batch")
			if id <= prevLast {
				t.Fatalf("INCR after INCRBY = %d, not above %d", id, prevLast)
			}
			prevLast = id
		}
		// The first calls came from the first segment: exact values.
		in2 := start(t)
		c2 := newClient(t, in2.Addr, proto, "")
		for _, tc := range []struct{ n, want int64 }{{10, 10}, {10, 20}, {1, 21}} {
			if got, err := c2.IncrBy(ctx, "exact", tc.n).Result(); err != nil || got != tc.want {
				t.Fatalf("INCRBY exact %d = %d, %v; want %d", tc.n, got, err, tc.want)
			}
		}
	})
}

func TestPipeline(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		ctx := context.Background()
		var prev int64
		for round := range 3 {
			cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for range 1000 {
					p.Incr(ctx, "pipe")
				}
				return nil
			})
			if err != nil {
				t.Fatalf("round %d: pipeline: %v", round, err)
			}
			for i, cmd := range cmds {
				id := cmd.(*redis.IntCmd).Val()
				if id != prev+1 {
					t.Fatalf("round %d, reply %d: %d after %d, want %d", round, i, id, prev, prev+1)
				}
				prev = id
			}
		}
	})
}

// TestConcurrentClients: many connections pipelining INCR on one tag get
// disjoint IDs, each connection's strictly increasing.
func TestConcurrentClients(t *testing.T) {
	in := start(t)
	const clients, rounds, per = 8, 5, 500
	ids := make([][]int64, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := newClient(t, in.Addr, 3-i%2, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for range rounds {
				cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for range per {
						p.Incr(ctx, "shared")
					}
					p.IncrBy(ctx, "shared", 50)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				for _, cmd := range cmds {
					last := cmd.(*redis.IntCmd).Val()
					if cmd.Name() == "incrby" {
						for id := last - 49; id <= last; id++ {
							ids[i] = append(ids[i], id)
						}
						continue
					}
					ids[i] = append(ids[i], last)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for i, list := range ids {
		for j, id := range list {
			if j > 0 && id <= list[j-1] {
				t.Fatalf("client %d: %d after %d", i, id, list[j-1])
			}
			if other, dup := seen[id]; dup {
				t.Fatalf("ID %d handed to clients %d and %d", id, other, i)
			}
			seen[id] = i
		}
	}
	if want := clients * rounds * (per + 50); len(seen) != want {
		t.Fatalf("%d distinct IDs, want %d", len(seen), want)
	}
}

func TestLeafInfo(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		// 50 INCRs: below the prefetch point (10% of the 1000 step), so
		// nothing loads in the background and every value is known.
		for range 50 {
			redistest.Incr(t, c, "info")
		}
		f := redistest.LeafInfo(t, c, "info")
		fields := []string{"tag", "mode", "init", "pos", "next_ready", "loading", "step", "min_step",
			"segment0_value", "segment0_max", "segment0_step", "segment1_value", "segment1_max", "segment1_step",
			"loads", "failures", "last_load", "issued", "skipped", "runway_ids", "runway_seconds",
			"guard_high", "guard_trips", "guard_repairs", "retries", "ambiguous", "vanished", "last_error", "store_ok", "store_away_since",
			"store_replication", "store_durability"}
		for _, k := range fields {
			if _, ok := f[k]; !ok {
				t.Errorf("field %s missing", k)
			}
		}
		if len(f) != len(fields) {
			t.Errorf("%d fields, want %d: %v", len(f), len(fields), f)
		}
		pos, ok := f["pos"].(int64)
		if !ok || (pos != 0 && pos != 1) {
			t.Fatalf("pos = %v", f["pos"])
		}
		cur, other := fmt.Sprintf("segment%d_", pos), fmt.Sprintf("segment%d_", 1-pos)
		want := map[string]any{
			"tag": "info", "mode": "segment", "init": int64(1), "next_ready": int64(0), "loading": int64(0),
			"step": int64(1000), "min_step": int64(1000),
			cur + "value": int64(51), cur + "max": int64(1001), cur + "step": int64(1000),
			other + "value": int64(0), other + "max": int64(0), other + "step": int64(0),
			"loads": int64(1), "failures": int64(0), "issued": int64(50), "skipped": int64(0), "runway_ids": int64(950),
			"guard_high": int64(1001), "guard_trips": int64(0), "guard_repairs": int64(0), "retries": int64(0), "ambiguous": int64(0),
			"vanished": int64(0), "last_error": "",
			"store_ok": int64(1), "store_away_since": int64(0),
			"store_replication": "unknown", "store_durability": "unknown",
		}
		for k, w := range want {
			if f[k] != w {
				t.Errorf("%s = %#v, want %#v", k, f[k], w)
			}
		}
		if ms, ok := f["last_load"].(int64); !ok || ms <= 0 {
			t.Errorf("last_load = %#v, want unix milliseconds", f["last_load"])
		}
		switch rs := f["runway_seconds"].(type) {
		case float64: // RESP3 double
		case string:
			if _, err := strconv.ParseFloat(rs, 64); err != nil {
				t.Errorf("runway_seconds = %q: %v", rs, err)
			}
		default:
			t.Errorf("runway_seconds of type %T", rs)
		}
		// The next INCR is the value LEAF.INFO showed.
		if id := redistest.Incr(t, c, "info"); id != 51 {
			t.Errorf("INCR after LEAF.INFO = %d, want 51", id)
		}
	})
}

func TestInfo(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		ctx := context.Background()
		redistest.Incr(t, c, "a")
		redistest.Incr(t, c, "b")
		info, err := c.Info(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info, "# Server\r\nredis_version:7.0.0\r\n") {
			t.Errorf("INFO starts %q", info[:min(len(info), 40)])
		}
		for _, want := range []string{
			"\r\nuptime_in_seconds:", "\r\n\r\n# Clients\r\nconnected_clients:1\r\n",
			"\r\n# Persistence\r\nloading:0\r\n", "\r\n# Stats\r\n", "\r\n# Replication\r\nrole:master\r\n",
			"\r\n# Leaf\r\ntags:2\r\n", "\r\nguard_trips:0\r\nguard_repairs:0\r\nguard_table:1\r\nstore_retries:0\r\nstore_ambiguous:0\r\n", "\r\nstore_ok:1\r\n", "\r\n# Keyspace\r\n",
		} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO lacks %q:\n%s", want, info)
			}
		}
		if strings.Contains(strings.ReplaceAll(info, "\r\n", ""), "\n") {
			t.Errorf("INFO has a line not ending in CRLF")
		}
		for _, tc := range []struct {
			args      []string
			has, lacz string
		}{
			{[]string{"leaf"}, "# Leaf\r\ntags:2\r\nwaits:", "# Server"},
			{[]string{"SERVER", "Clients"}, "# Server\r\n", "# Leaf"},
			{[]string{"all"}, "# Keyspace\r\n", "\r\n\r\n\r\n"},
		} {
			got, err := c.Info(ctx, tc.args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.has) || strings.Contains(got, tc.lacz) {
				t.Errorf("INFO %v = %q: want %q and no %q", tc.args, got, tc.has, tc.lacz)
			}
		}
		if got, err := c.Info(ctx, "nosuch").Result(); err != nil || got != "" {
			t.Errorf("INFO nosuch = %q, %v; want empty", got, err)
		}
		if got, err := c.Info(ctx, "clients").Result(); err != nil || got != "# Clients\r\nconnected_clients:1\r\nmaxclients:10000\r\nblocked_clients:0\r\n" {
			t.Errorf("INFO clients = %q, %v", got, err)
		}
	})
}

// TestErrors asserts every error text exactly, and that the connection
// answers INCR after each.
func TestErrors(t *testing.T) {
	long := strings.Repeat("t", segment.MaxTagLen+1)
	cases := []struct {
		name string
		args []any
		want string
	}{
		{"incr no args", []any{"INCR"}, "ERR wrong number of arguments for 'incr' command"},
		{"incr two args", []any{"incr", "a", "b"}, "ERR wrong number of arguments for 'incr' command"},
		{"incrby no n", []any{"INCRBY", "t"}, "ERR wrong number of arguments for 'incrby' command"},
		{"incrby mixed case", []any{"InCrBy"}, "ERR wrong number of arguments for 'incrby' command"},
		{"incrby plus", []any{"INCRBY", "t", "+5"}, "ERR value is not an integer or out of range"},
		{"incrby leading zero", []any{"INCRBY", "t", "07"}, "ERR value is not an integer or out of range"},
		{"incrby space", []any{"INCRBY", "t", " 5"}, "ERR value is not an integer or out of range"},
		{"incrby exponent", []any{"INCRBY", "t", "1e3"}, "ERR value is not an integer or out of range"},
		{"incrby minus zero", []any{"INCRBY", "t", "-0"}, "ERR value is not an integer or out of range"},
		{"incrby word", []any{"INCRBY", "t", "five"}, "ERR value is not an integer or out of range"},
		{"incrby empty", []any{"INCRBY", "t", ""}, "ERR value is not an integer or out of range"},
		{"incrby overflow", []any{"INCRBY", "t", "9223372036854775808"}, "ERR value is not an integer or out of range"},
		{"incrby zero", []any{"INCRBY", "t", "0"}, "ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)"},
		{"incrby negative", []any{"INCRBY", "t", "-5"}, "ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)"},
		{"incrby min int", []any{"INCRBY", "t", "-9223372036854775808"}, "ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)"},
		{"incrby over max_batch", []any{"INCRBY", "t", "100001"}, "ERR increment exceeds max_batch (100000)"},
		{"empty tag", []any{"INCR", ""}, "ERR invalid tag name: empty"},
		{"tag too long", []any{"INCR", long}, "ERR invalid tag name: 129 bytes, the limit is 128"},
		{"tag with newline", []any{"INCR", "a\nb"}, "ERR invalid tag name: control character U+000A"},
		{"tag with NUL", []any{"INCRBY", "a\x00b", "2"}, "ERR invalid tag name: control character U+0000"},
		{"tag not utf8", []any{"INCR", "a\xffb"}, "ERR invalid tag name: not UTF-8"},
		{"leaf.info unknown", []any{"LEAF.INFO", "nosuch"}, "ERR unknown tag 'nosuch'"},
		{"leaf.info arity", []any{"leaf.info"}, "ERR wrong number of arguments for 'leaf.info' command"},
		{"unknown command", []any{"FOO", "a", "b"}, "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{"unknown command no args", []any{"foo"}, "ERR unknown command 'foo', with args beginning with: "},
		{"unknown command newline", []any{"FETCH", "x\r\ny"}, "ERR unknown command 'FETCH', with args beginning with: 'x  y' "},
		{"unknown command long name", []any{strings.Repeat("Z", 40)}, "ERR unknown command '" + strings.Repeat("Z", 40) + "', with args beginning with: "},
		{"client unknown sub", []any{"CLIENT", "MAINT_NOTIFICATIONS", "on"}, "ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP."},
		{"client lower unknown sub", []any{"client", "pause"}, "ERR unknown subcommand 'pause'. Try CLIENT HELP."},
		{"client no sub", []any{"CLIENT"}, "ERR wrong number of arguments for 'client' command"},
		{"client setname arity", []any{"CLIENT", "SETNAME"}, "ERR wrong number of arguments for 'client|setname' command"},
		{"client setname space", []any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
		{"client setinfo option", []any{"CLIENT", "SETINFO", "color", "red"}, "ERR Unrecognized option 'color'"},
		{"client setinfo value", []any{"CLIENT", "SETINFO", "LIB-NAME", "a b"}, "ERR LIB-NAME cannot contain spaces, newlines or special characters."},
		{"client list filter", []any{"CLIENT", "LIST", "FOO"}, "ERR syntax error"},
		{"config no sub", []any{"CONFIG"}, "ERR wrong number of arguments for 'config' command"},
		{"config get arity", []any{"CONFIG", "GET"}, "ERR wrong number of arguments for 'config|get' command"},
		{"config set", []any{"CONFIG", "SET", "save", ""}, "ERR CONFIG SET is not supported: leaf reads its settings from leaf.yaml at start"},
		{"config unknown sub", []any{"CONFIG", "REWRITE"}, "ERR unknown subcommand 'REWRITE'. Try CONFIG HELP."},
		{"command unknown sub", []any{"COMMAND", "GETKEYS", "incr", "a"}, "ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP."},
		{"select beyond databases", []any{"SELECT", "16"}, "ERR DB index is out of range"},
		{"select negative", []any{"SELECT", "-1"}, "ERR DB index is out of range"},
		{"select word", []any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
		{"hello 4", []any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{"hello 1", []any{"HELLO", "1"}, "NOPROTO unsupported protocol version"},
		{"hello word", []any{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
		{"hello bad option", []any{"HELLO", "2", "FOO"}, "ERR Syntax error in HELLO option 'FOO'"},
		{"hello auth short", []any{"HELLO", "2", "AUTH", "default"}, "ERR Syntax error in HELLO option 'AUTH'"},
		{"hello setname space", []any{"HELLO", "2", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
		{"auth no password configured", []any{"AUTH", "x"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{"auth other user", []any{"AUTH", "bob", "x"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{"auth too many", []any{"AUTH", "a", "b", "c"}, "ERR syntax error"},
		{"auth no args", []any{"AUTH"}, "ERR wrong number of arguments for 'auth' command"},
		{"ping two", []any{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
		{"echo none", []any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
	}
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		prev := redistest.Incr(t, c, "alive")
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				wantErr(t, c, tc.want, tc.args...)
				id := redistest.Incr(t, c, "alive")
				if id != prev+1 {
					t.Fatalf("INCR after the error = %d, want %d", id, prev+1)
				}
				prev = id
			})
		}
	})
}

func TestUnknownTagWithoutAutoCreate(t *testing.T) {
	so := segment.DefaultOptions()
	so.AutoCreate = false
	in := servertest.Start(t, servertest.Options{Segment: &so})
	if _, err := in.Store.Create(context.Background(), "known", 100, ""); err != nil {
		t.Fatal(err)
	}
	forEachProtocol(t, func(t *testing.T, proto int) {
		c := newClient(t, in.Addr, proto, "")
		wantErr(t, c, "ERR unknown tag 'nosuch' (auto-create is off)", "INCR", "nosuch")
		wantErr(t, c, "ERR unknown tag 'nosuch' (auto-create is off)", "INCRBY", "nosuch", "3")
		wantErr(t, c, "ERR unknown tag 'nosuch'", "LEAF.INFO", "nosuch")
		redistest.Incr(t, c, "known")
	})
}

var errOutage = errors.New("injected outage")

// TestDatabaseDown: the first request waits for its load and gets its
// error; from then on the database is away and requests that need it
// answer at once, saying since when, until a probe finds it back.
func TestDatabaseDown(t *testing.T) {
	var store *faultstore.Store
	probe := &servertest.Probes{}
	so := segment.DefaultOptions()
	so.AfterFunc = probe.AfterFunc
	in := servertest.Start(t, servertest.Options{Segment: &so, Wrap: func(s persist.Store) persist.Store {
		store = faultstore.New(s)
		return store
	}})
	forEachProtocol(t, func(t *testing.T, proto int) {
		c := newClient(t, in.Addr, proto, "")
		tag := "down" + strconv.Itoa(proto)
		store.Fail(errOutage, faultstore.OpTake)
		want := "TRYAGAIN no cached IDs for tag '" + tag + "' and the database is unavailable: "
		wantErr(t, c, want+"injected outage", "INCR", tag)
		err := c.Do(context.Background(), "INCRBY", tag, "5").Err()
		if err == nil || !strings.HasPrefix(err.Error(), want+"database away since ") || !strings.HasSuffix(err.Error(), "; last error: injected outage") {
			t.Fatalf("INCRBY while the database is away: %v, want %q, since when and the last error", err, want)
		}
		info, err := c.Info(context.Background(), "leaf").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"store_ok:0", "store_last_error:injected outage", "store_refused:" + strconv.Itoa(4-proto)} {
			if !strings.Contains(info, "\r\n"+line+"\r\n") {
				t.Errorf("INFO leaf during the outage lacks %q:\n%s", line, info)
			}
		}
		if f := redistest.LeafInfo(t, c, tag); f["store_ok"] != int64(0) || f["store_away_since"] == int64(0) {
			t.Errorf("LEAF.INFO during the outage: store_ok %v, store_away_since %v", f["store_ok"], f["store_away_since"])
		}
		store.Fail(nil)
		probe.Run(t)
		if id := redistest.Incr(t, c, tag); id != 1 {
			t.Errorf("INCR once the database is back = %d, want 1", id)
		}
	})
}

func TestAuth(t *testing.T) {
	const pw = "s3cret"
	in := servertest.Start(t, servertest.Options{Server: server.Options{Password: pw}})
	ctx := context.Background()
	forEachProtocol(t, func(t *testing.T, proto int) {
		t.Run("no password given", func(t *testing.T) {
			// go-redis's HELLO is refused (NOAUTH), it falls back to RESP2
			// and sends no AUTH: every command answers NOAUTH until AUTH.
			c := newClient(t, in.Addr, proto, "")
			wantErr(t, c, "NOAUTH Authentication required.", "INCR", "a")
			wantErr(t, c, "NOAUTH Authentication required.", "PING")
			wantErr(t, c, "NOAUTH Authentication required.", "LEAF.INFO", "a")
			// Redis checks existence and arity before authentication.
			wantErr(t, c, "ERR unknown command 'FOO', with args beginning with: ", "FOO")
			wantErr(t, c, "ERR wrong number of arguments for 'incr' command", "INCR")
			wantErr(t, c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "bad")
			wantErr(t, c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "default", "bad")
			wantErr(t, c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "bob", pw)
			wantErr(t, c, "NOAUTH Authentication required.", "INCR", "a")
			if err := c.Do(ctx, "AUTH", pw).Err(); err != nil {
				t.Fatalf("AUTH: %v", err)
			}
			redistest.Incr(t, c, "a")
			if err := c.Do(ctx, "AUTH", "default", pw).Err(); err != nil {
				t.Fatalf("AUTH default: %v", err)
			}
		})
		t.Run("password given", func(t *testing.T) {
			c := newClient(t, in.Addr, proto, pw)
			redistest.Incr(t, c, "a")
			if v, err := c.Do(ctx, "HELLO").Result(); err != nil || v == nil {
				t.Fatalf("HELLO once authenticated: %v, %v", v, err)
			}
		})
		t.Run("wrong password given", func(t *testing.T) {
			c := newClient(t, in.Addr, proto, "bad")
			err := c.Incr(ctx, "a").Err()
			if err == nil || !strings.Contains(err.Error(), "WRONGPASS invalid username-password pair or user is disabled.") {
				t.Fatalf("INCR with a wrong password: %v", err)
			}
		})
	})
}

func TestAuthRaw(t *testing.T) {
	in := servertest.Start(t, servertest.Options{Server: server.Options{Password: "pw"}})
	rc := rawresp.Dial(t, in.Addr)
	rc.Send("PING\r\n" + rawresp.Cmd("HELLO") + rawresp.Cmd("HELLO", "3") + rawresp.Cmd("HELLO", "3", "AUTH", "default", "bad") +
		rawresp.Cmd("AUTH", "bad") + rawresp.Cmd("INCR", "a"))
	noauthHello := "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> " +
		"option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
	rc.Expect("-NOAUTH Authentication required.\r\n" + noauthHello + noauthHello +
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n" +
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n" +
		"-NOAUTH Authentication required.\r\n")
	// HELLO with AUTH authenticates and switches protocol at once.
	rc.Send(rawresp.Cmd("HELLO", "3", "AUTH", "default", "pw", "SETNAME", "me") + rawresp.Cmd("CLIENT", "GETNAME") + rawresp.Cmd("INCR", "a"))
	rc.Expect(helloReply(3, 1)) // the first connection of a new server has id 1
	rc.Expect("$2\r\nme\r\n:1\r\n")
	rc.Send(rawresp.Cmd("INFO", "stats"))
	if got := rc.Line(); !strings.HasPrefix(got, "=") {
		t.Fatalf("INFO in RESP3: %q", got)
	}
	var stats strings.Builder
	for {
		l := rc.Line()
		stats.WriteString(l)
		if l == "\r\n" {
			break
		}
	}
	if !strings.Contains(stats.String(), "\r\nacl_access_denied_auth:2\r\n") {
		t.Errorf("INFO stats after two failed AUTHs:\n%s", stats.String())
	}
	// QUIT needs no authentication.
	rc2 := rawresp.Dial(t, in.Addr)
	rc2.Send("QUIT\r\n")
	rc2.Expect("+OK\r\n")
	rc2.ExpectClosed()
}

func TestConnectionCommands(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := start(t)
		c := newClient(t, in.Addr, proto, "")
		ctx := context.Background()
		if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
			t.Errorf("PING = %q, %v", got, err)
		}
		if got, err := c.Do(ctx, "PING", "hi").Text(); err != nil || got != "hi" {
			t.Errorf("PING hi = %q, %v", got, err)
		}
		if got, err := c.Echo(ctx, "x y").Result(); err != nil || got != "x y" {
			t.Errorf("ECHO = %q, %v", got, err)
		}
		if err := c.Do(ctx, "SELECT", "0").Err(); err != nil {
			t.Errorf("SELECT 0: %v", err)
		}
		if err := c.Do(ctx, "CLIENT", "GETNAME").Err(); err != redis.Nil {
			t.Errorf("CLIENT GETNAME before SETNAME: %v, want nil", err)
		}
		if err := c.Do(ctx, "CLIENT", "SETNAME", "worker-1").Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Do(ctx, "CLIENT", "GETNAME").Text(); err != nil || got != "worker-1" {
			t.Errorf("CLIENT GETNAME = %q, %v", got, err)
		}
		id, err := c.Do(ctx, "CLIENT", "ID").Int64()
		if err != nil || id <= 0 {
			t.Errorf("CLIENT ID = %d, %v", id, err)
		}
		info, err := c.Do(ctx, "CLIENT", "INFO").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{fmt.Sprintf("id=%d ", id), " name=worker-1 ", " db=0 ", fmt.Sprintf(" resp=%d ", proto), " lib-name=go-redis"} {
			if !strings.Contains(info, want) {
				t.Errorf("CLIENT INFO = %q, lacks %q", info, want)
			}
		}
		if list, err := c.Do(ctx, "CLIENT", "LIST").Text(); err != nil || !strings.Contains(list, fmt.Sprintf("id=%d ", id)) {
			t.Errorf("CLIENT LIST = %q, %v", list, err)
		}
		if got, err := c.ConfigGet(ctx, "save").Result(); err != nil || len(got) != 1 || got["save"] != "" {
			t.Errorf("CONFIG GET save = %v, %v", got, err)
		}
		if got, err := c.ConfigGet(ctx, "appendonly").Result(); err != nil || got["appendonly"] != "no" {
			t.Errorf("CONFIG GET appendonly = %v, %v", got, err)
		}
		if got, err := c.ConfigGet(ctx, "*").Result(); err != nil || len(got) < 4 {
			t.Errorf("CONFIG GET * = %v, %v", got, err)
		}
		if got, err := c.ConfigGet(ctx, "nosuch").Result(); err != nil || len(got) != 0 {
			t.Errorf("CONFIG GET nosuch = %v, %v", got, err)
		}
		n, err := c.Do(ctx, "COMMAND", "COUNT").Int64()
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := c.Command(ctx).Result()
		if err != nil {
			t.Fatalf("COMMAND: %v", err)
		}
		if int64(len(cmds)) != n {
			t.Errorf("COMMAND lists %d commands, COMMAND COUNT says %d", len(cmds), n)
		}
		for _, name := range []string{"incr", "incrby", "leaf.info", "hello", "ping", "info", "client", "config", "command"} {
			if cmds[name] == nil {
				t.Errorf("COMMAND lacks %s", name)
			}
		}
		if incr := cmds["incr"]; incr != nil && (incr.Arity != 2 || incr.FirstKeyPos != 1 || incr.LastKeyPos != 1 || incr.StepCount != 1) {
			t.Errorf("COMMAND INFO incr = %+v", incr)
		}
		v, err := c.Do(ctx, "COMMAND", "DOCS", "incrby", "nosuch").Result()
		if err != nil {
			t.Fatalf("COMMAND DOCS: %v", err)
		}
		docs := redistest.Pairs(t, v)
		if len(docs) != 1 || docs["incrby"] == nil {
			t.Fatalf("COMMAND DOCS incrby nosuch = %v", docs)
		}
		if d := redistest.Pairs(t, docs["incrby"]); d["summary"] == "" || d["group"] != "string" || d["arguments"] == nil {
			t.Errorf("COMMAND DOCS incrby = %v", d)
		}
		if _, err := c.Do(ctx, "COMMAND", "DOCS").Result(); err != nil {
			t.Errorf("COMMAND DOCS (all, as redis-cli asks): %v", err)
		}
		if got, err := c.Do(ctx, "CLIENT", "HELP").StringSlice(); err != nil || len(got) == 0 {
			t.Errorf("CLIENT HELP = %v, %v", got, err)
		}
	})
}

// TestRestartContinues: a clean stop gives the unused IDs back, so the next
// server on the same database continues at exactly the next ID.
func TestRestartContinues(t *testing.T) {
	in := start(t)
	c := newClient(t, in.Addr, 3, "")
	for range 250 { // past the prefetch point: a next segment is reserved too
		redistest.Incr(t, c, "restart")
	}
	last, err := c.IncrBy(context.Background(), "restart", 20).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Incr(context.Background(), "restart").Err(); err == nil {
		t.Fatal("INCR answered after Stop")
	}
	in2 := servertest.Start(t, servertest.Options{Path: in.Path})
	c2 := newClient(t, in2.Addr, 2, "")
	if got := redistest.Incr(t, c2, "restart"); got != last+1 {
		t.Fatalf("after a clean restart INCR = %d, want %d", got, last+1)
	}
}
