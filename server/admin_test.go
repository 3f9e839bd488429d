package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// smallSegments makes every segment 10 IDs (the step never grows), so a
// server's cache is at most 20 IDs and tests can use it up.
func smallSegments() *segment.Options {
	o := segment.DefaultOptions()
	o.DefaultStep = 10
	o.MaxStep = 10
	return &o
}

// userClient is a one-connection client authenticated as user.
func userClient(t *testing.T, addr string, proto int, user, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{
		Addr:       addr,
		Protocol:   proto,
		Username:   user,
		Password:   password,
		PoolSize:   1,
		MaxRetries: -1,
	}))
	t.Cleanup(func() { c.Close() })
	return c
}

// wantUser asserts the user CLIENT INFO shows for c's connection.
func wantUser(t *testing.T, c *redis.Client, user string) {
	t.Helper()
	info, err := c.Do(context.Background(), "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatalf("CLIENT INFO: %v", err)
	}
	if !strings.Contains(info, " user="+user+" ") {
		t.Fatalf("CLIENT INFO = %q, want user=%s", info, user)
	}
}

// do runs a command that must succeed and returns its reply.
func do(t *testing.T, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// row reads a tag's row from the store.
func row(t *testing.T, in *servertest.Instance, tag string) persist.Tag {
	t.Helper()
	r, err := in.Store.Tag(context.Background(), tag)
	if err != nil {
		t.Fatalf("store row %q: %v", tag, err)
	}
	return r
}

// atLeast reports whether a LEAF.FLOOR reply is an integer >= n.
func atLeast(reply any, n int64) bool {
	v, ok := reply.(int64)
	return ok && v >= n
}

// TestFloorTwoServers: two servers share one SQLite file. A floor raised
// through one makes every later ID above it: at once on the server that
// raised it, at once on the other for a tag it has no IDs cached for, and
// once its cached segments (at most two) are used up for one it has.
// No ID is ever handed out twice.
func TestFloorTwoServers(t *testing.T) {
	a := servertest.Start(t, servertest.Options{Segment: smallSegments()})
	b := servertest.Start(t, servertest.Options{Segment: smallSegments(), Path: a.Path})
	ca := newClient(t, a.Addr, 3, "")
	cb := newClient(t, b.Addr, 3, "")
	seen := map[string]string{} // "tag/id" -> the server that handed it out
	record := func(t *testing.T, server, tag string, id int64) {
		t.Helper()
		key := tag + "/" + fmt.Sprint(id)
		if other, dup := seen[key]; dup {
			t.Fatalf("tag %s: ID %d handed out by %s and by %s", tag, id, other, server)
		}
		seen[key] = server
	}
	const floor = 1000

	t.Run("cached on both", func(t *testing.T) {
		const tag = "order"
		for range 3 {
			record(t, "a", tag, redistest.Incr(t, ca, tag))
			record(t, "b", tag, redistest.Incr(t, cb, tag))
		}
		got := do(t, ca, "LEAF.FLOOR", tag, floor)
		if got != int64(floor) {
			t.Fatalf("LEAF.FLOOR %s %d = %v, want %d (max_id was below)", tag, floor, got, floor)
		}
		if r := row(t, a, tag); r.MaxID <= floor {
			t.Fatalf("max_id after the floor = %d, want > %d", r.MaxID, floor)
		}
		// a skipped its own cache: every later ID is above the floor.
		for range 30 {
			id := redistest.Incr(t, ca, tag)
			record(t, "a", tag, id)
			if id <= floor {
				t.Fatalf("server a after LEAF.FLOOR %d: INCR = %d", floor, id)
			}
		}
		// b serves what it had cached (at most two segments of 10), then
		// only IDs above the floor.
		prev, below := int64(0), 0
		for i := range 30 {
			id := redistest.Incr(t, cb, tag)
			record(t, "b", tag, id)
			if id <= prev {
				t.Fatalf("server b: %d after %d", id, prev)
			}
			prev = id
			if id <= floor {
				below++
				if i >= 20 {
					t.Fatalf("server b: INCR #%d = %d, still at or below the floor %d past its two cached segments", i+1, id, floor)
				}
			}
		}
		if prev <= floor {
			t.Fatalf("server b: last INCR = %d, want > %d", prev, floor)
		}
		t.Logf("server b handed out %d cached IDs below the floor before moving above it", below)
	})

	t.Run("fresh on the other server", func(t *testing.T) {
		const tag = "invoice"
		redistest.Incr(t, ca, tag)
		if got := do(t, ca, "SET", tag, floor); got != "OK" {
			t.Fatalf("SET %s %d = %v, want OK", tag, floor, got)
		}
		for _, c := range []struct {
			name string
			cl   *redis.Client
		}{{"a", ca}, {"b", cb}} {
			if id := redistest.Incr(t, c.cl, tag); id <= floor {
				t.Fatalf("server %s: INCR %s after SET %d = %d", c.name, tag, floor, id)
			}
		}
	})

	t.Run("floor of a missing tag creates it", func(t *testing.T) {
		const tag = "newtag"
		if got := do(t, cb, "LEAF.FLOOR", tag, 5000); got != int64(5000) {
			t.Fatalf("LEAF.FLOOR %s 5000 = %v, want 5000", tag, got)
		}
		if r := row(t, b, tag); r.MaxID != 5001 || r.Step != 10 {
			t.Fatalf("row after LEAF.FLOOR of a missing tag = %+v, want max_id 5001, step 10", r)
		}
		if id := redistest.Incr(t, ca, tag); id != 5001 {
			t.Fatalf("server a: first INCR %s = %d, want 5001", tag, id)
		}
	})

	t.Run("floor already above", func(t *testing.T) {
		const tag = "fixed" // no server takes ranges of it: max_id moves only by floors
		if got := do(t, ca, "LEAF.FLOOR", tag, 5000); got != int64(5000) {
			t.Fatalf("LEAF.FLOOR %s 5000 = %v, want 5000", tag, got)
		}
		// A lower floor changes nothing and replies the floor in effect.
		if got := do(t, cb, "LEAF.FLOOR", tag, 100); got != int64(5000) {
			t.Fatalf("LEAF.FLOOR %s 100 = %v, want the floor in effect 5000", tag, got)
		}
		if got := do(t, cb, "SET", tag, 100); got != "OK" {
			t.Fatalf("SET %s 100 below the floor = %v, want OK (nothing to lower on this server)", tag, got)
		}
		if r := row(t, a, tag); r.MaxID != 5001 {
			t.Fatalf("max_id = %d after lower floors, want 5001", r.MaxID)
		}
	})
}

// TestAdminCommands: the replies of LEAF.CREATE, LEAF.STEP, LEAF.FLOOR,
// SET and GET, checked against the table.
func TestAdminCommands(t *testing.T) {
	in := start(t)
	forEachProtocol(t, func(t *testing.T, proto int) {
		c := newClient(t, in.Addr, proto, "")
		p := fmt.Sprintf("p%d-", proto)

		t.Run("create", func(t *testing.T) {
			if got := do(t, c, "LEAF.CREATE", p+"plain"); got != "OK" {
				t.Fatalf("LEAF.CREATE = %v", got)
			}
			if r := row(t, in, p+"plain"); r.Step != 1000 || r.MaxID != 1 || r.Description != "" {
				t.Fatalf("row = %+v, want step 1000 (default_step), max_id 1", r)
			}
			if got := do(t, c, "leaf.create", p+"full", "desc", "order IDs", "STEP", 50); got != "OK" {
				t.Fatalf("LEAF.CREATE with options = %v", got)
			}
			if r := row(t, in, p+"full"); r.Step != 50 || r.Description != "order IDs" {
				t.Fatalf("row = %+v, want step 50, description %q", r, "order IDs")
			}
			if id := redistest.Incr(t, c, p+"full"); id != 1 {
				t.Fatalf("first INCR of a created tag = %d, want 1", id)
			}
		})

		t.Run("step", func(t *testing.T) {
			if got := do(t, c, "LEAF.STEP", p+"full", 200); got != "OK" {
				t.Fatalf("LEAF.STEP = %v", got)
			}
			if r := row(t, in, p+"full"); r.Step != 200 {
				t.Fatalf("step after LEAF.STEP 200 = %d", r.Step)
			}
			info, err := in.Alloc.Info(p + "full")
			if err != nil {
				t.Fatal(err)
			}
			if info.MinStep != 200 || info.Step < 200 {
				t.Fatalf("allocator after LEAF.STEP 200: min_step %d, step %d", info.MinStep, info.Step)
			}
		})

		t.Run("get", func(t *testing.T) {
			tag := p + "get"
			if v, err := c.Get(context.Background(), tag).Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET of an unknown tag = %q, %v; want nil", v, err)
			}
			do(t, c, "LEAF.CREATE", tag)
			if v, err := c.Get(context.Background(), tag).Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET before any INCR = %q, %v; want nil", v, err)
			}
			redistest.Incr(t, c, tag)
			last, err := c.IncrBy(context.Background(), tag, 7).Result()
			if err != nil {
				t.Fatal(err)
			}
			if v := c.Get(context.Background(), tag).Val(); v != fmt.Sprint(last) {
				t.Fatalf("GET = %q, want %d (the last ID handed out)", v, last)
			}
		})

		// A floor raised past cached IDs skips them: GET stays the last
		// ID handed out, and the skipped IDs are not counted as issued.
		t.Run("get after a floor", func(t *testing.T) {
			tag := p + "getfloor"
			if got := do(t, c, "SET", tag, 500); got != "OK" {
				t.Fatalf("SET 500 = %v", got)
			}
			if v := c.Get(context.Background(), tag).Val(); v != "500" {
				t.Fatalf("GET after SET 500, before any INCR = %q, want the floor 500", v)
			}
			if id := redistest.Incr(t, c, tag); id != 501 {
				t.Fatalf("INCR after SET 500 = %d", id)
			}
			if got := do(t, c, "SET", tag, 5000); got != "OK" {
				t.Fatalf("SET 5000 = %v", got)
			}
			if v := c.Get(context.Background(), tag).Val(); v != "501" {
				t.Fatalf("GET after SET 5000 = %q, want 501 (the last ID handed out)", v)
			}
			f := redistest.LeafInfo(t, c, tag)
			if f["issued"] != int64(1) {
				t.Fatalf("LEAF.INFO issued = %v after one INCR, want 1", f["issued"])
			}
			if sk, _ := f["skipped"].(int64); sk < 1 {
				t.Fatalf("LEAF.INFO skipped = %v after a floor past cached IDs", f["skipped"])
			}
			if id := redistest.Incr(t, c, tag); id != 5001 {
				t.Fatalf("INCR after SET 5000 = %d, want 5001", id)
			}
			if v := c.Get(context.Background(), tag).Val(); v != "5001" {
				t.Fatalf("GET = %q, want 5001", v)
			}
		})

		t.Run("set and floor", func(t *testing.T) {
			tag := p + "set"
			redistest.Incr(t, c, tag)
			if got := do(t, c, "SET", tag, 41); got != "OK" {
				t.Fatalf("SET = %v, want OK", got)
			}
			if id := redistest.Incr(t, c, tag); id != 42 {
				t.Fatalf("INCR after SET 41 = %d, want 42", id)
			}
			if got := do(t, c, "set", tag, 42); got != "OK" { // equal to the last ID: nothing to lower
				t.Fatalf("SET to the last ID = %v, want OK", got)
			}
			// The reply is the floor in effect: max_id - 1, here above
			// 100 since this server already reserved a segment of 1000.
			got := do(t, c, "LEAF.FLOOR", tag, 100)
			if want := row(t, in, tag).MaxID - 1; got != want || want < 100 {
				t.Fatalf("LEAF.FLOOR 100 = %v, want the floor in effect %d (>= 100)", got, want)
			}
			if id := redistest.Incr(t, c, tag); id != 101 {
				t.Fatalf("INCR after LEAF.FLOOR 100 = %d, want 101", id)
			}
			if v := c.Get(context.Background(), tag).Val(); v != "101" {
				t.Fatalf("GET after LEAF.FLOOR = %q, want 101", v)
			}
		})
	})

	t.Run("GET nil on the wire", func(t *testing.T) {
		rc := rawresp.Dial(t, in.Addr)
		rc.Send(rawresp.Cmd("GET", "wire"))
		rc.Expect("$-1\r\n")
		rc.Send(rawresp.Cmd("CLIENT", "ID"))
		id, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(rc.Line(), ":")), 10, 64)
		if err != nil {
			t.Fatalf("CLIENT ID: %v", err)
		}
		rc.Send(rawresp.Cmd("HELLO", "3"))
		rc.Expect(helloReply(3, id))
		rc.Send(rawresp.Cmd("GET", "wire"))
		rc.Expect("_\r\n")
		rc.Send(rawresp.Cmd("INCR", "wire"))
		rc.Expect(":1\r\n")
		rc.Send(rawresp.Cmd("GET", "wire"))
		rc.Expect("$1\r\n1\r\n")
	})
}

// TestAdminErrors asserts every administration error text exactly, and
// that the connection still answers INCR after each.
func TestAdminErrors(t *testing.T) {
	in := start(t)
	c := newClient(t, in.Addr, 3, "")
	do(t, c, "LEAF.CREATE", "exists")
	for range 5 {
		redistest.Incr(t, c, "low")
	}
	cases := []struct {
		name string
		args []any
		want string
	}{
		{"create twice", []any{"LEAF.CREATE", "exists"}, "ERR tag 'exists' already exists"},
		{"create twice other case of command", []any{"leaf.create", "exists", "STEP", "5"}, "ERR tag 'exists' already exists"},
		{"create auto-created tag", []any{"LEAF.CREATE", "low"}, "ERR tag 'low' already exists"},
		{"create arity", []any{"LEAF.CREATE"}, "ERR wrong number of arguments for 'leaf.create' command"},
		{"create option without value", []any{"LEAF.CREATE", "x", "STEP"}, "ERR syntax error"},
		{"create unknown option", []any{"LEAF.CREATE", "x", "COLOR", "red"}, "ERR syntax error"},
		{"create step zero", []any{"LEAF.CREATE", "x", "STEP", "0"}, "ERR step must be between 1 and 2147483647"},
		{"create step too large", []any{"LEAF.CREATE", "x", "STEP", "2147483648"}, "ERR step must be between 1 and 2147483647"},
		{"create step word", []any{"LEAF.CREATE", "x", "STEP", "ten"}, "ERR value is not an integer or out of range"},
		{"create bad tag", []any{"LEAF.CREATE", "a\nb"}, "ERR invalid tag name: control character U+000A"},
		{"create description too long", []any{"LEAF.CREATE", "x", "DESC", strings.Repeat("d", 257)},
			"ERR description must be valid UTF-8 of at most 256 characters"},
		{"create description not UTF-8", []any{"LEAF.CREATE", "x", "DESC", "a\xffb"}, "ERR description must be valid UTF-8 of at most 256 characters"},
		{"step unknown tag", []any{"LEAF.STEP", "nosuch", "10"}, "ERR unknown tag 'nosuch' (LEAF.CREATE nosuch STEP n creates it)"},
		{"step negative", []any{"LEAF.STEP", "exists", "-1"}, "ERR step must be between 1 and 2147483647"},
		{"step arity", []any{"LEAF.STEP", "exists"}, "ERR wrong number of arguments for 'leaf.step' command"},
		{"floor lowers", []any{"LEAF.FLOOR", "low", "2"},
			"ERR LEAF.FLOOR never lowers: tag 'low' already handed out 5 on this server, above 2; IDs never go back"},
		{"floor negative", []any{"LEAF.FLOOR", "low", "-1"}, "ERR floor must be >= 0"},
		{"floor word", []any{"LEAF.FLOOR", "low", "x"}, "ERR value is not an integer or out of range"},
		{"floor beyond the ID space", []any{"LEAF.FLOOR", "big", "9223372036854775807"},
			"ERR floor 9223372036854775807 is beyond the 64-bit ID space leaf hands out"},
		{"floor arity", []any{"LEAF.FLOOR", "low"}, "ERR wrong number of arguments for 'leaf.floor' command"},
		{"set lowers", []any{"SET", "low", "3"},
			"ERR SET cannot lower tag 'low': this server already handed out 5, above 3; SET tag n is LEAF.FLOOR tag n, which only raises"},
		{"set word", []any{"SET", "low", "hello"},
			"ERR value is not an integer or out of range: SET tag n raises the tag's floor to the integer n (LEAF.FLOOR)"},
		{"set negative", []any{"SET", "low", "-3"}, "ERR floor must be >= 0"},
		{"set EX", []any{"SET", "low", "10", "EX", "60"},
			"ERR SET with EX is refused: tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"},
		{"set XX", []any{"SET", "low", "10", "XX"},
			"ERR SET with XX is refused: SET tag n raises the floor of the tag, and creates it when missing; LEAF.FLOOR is the same"},
		{"set GET", []any{"set", "low", "10", "get"},
			"ERR SET with GET is refused: SET tag n raises the tag's floor, and GET tag reads the last ID"},
		{"set NX on a tag that exists", []any{"SET", "low", "10", "NX", "EX", "1"},
			"ERR SET with EX is refused: tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"},
		{"set unknown option", []any{"SET", "low", "10", "NOPE"}, "ERR syntax error"},
		{"set arity", []any{"SET", "low"}, "ERR wrong number of arguments for 'set' command"},
		{"del", []any{"DEL", "low"},
			"ERR DEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1). Leave the row (an unused tag costs one row); to skip IDs use LEAF.FLOOR tag n"},
		{"del several", []any{"del", "low", "exists"},
			"ERR DEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1). Leave the row (an unused tag costs one row); to skip IDs use LEAF.FLOOR tag n"},
		{"del arity", []any{"DEL"}, "ERR wrong number of arguments for 'del' command"},
		{"get arity", []any{"GET", "a", "b"}, "ERR wrong number of arguments for 'get' command"},
	}
	var last int64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, c, tc.want, tc.args...)
			id := redistest.Incr(t, c, "alive")
			if id <= last {
				t.Fatalf("INCR alive after the error = %d, want > %d", id, last)
			}
			last = id
		})
	}
	if v := c.Get(context.Background(), "low").Val(); v != "5" {
		t.Fatalf("GET low after refused floors = %q, want 5", v)
	}
	// Nothing above changed the rows.
	if r := row(t, in, "exists"); r.Step != 1000 || r.MaxID != 1 {
		t.Fatalf("row of 'exists' = %+v, want untouched", r)
	}
	if _, err := in.Store.Tag(context.Background(), "x"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("tag x after refused creates: %v, want not found", err)
	}
}

// TestAdminPassword: with server.admin_password set, only a connection
// authenticated as admin runs LEAF.CREATE, LEAF.STEP, LEAF.FLOOR and SET;
// without it, any authenticated client does.
func TestAdminPassword(t *testing.T) {
	const pw, adminPW = "s3cret", "4dmin"
	noperm := func(cmd string) string {
		return "NOPERM User default has no permissions to run the '" + cmd + "' command (administrative: AUTH admin <password> first)"
	}
	adminCmds := []struct {
		name string
		args []any
	}{
		{"leaf.create", []any{"LEAF.CREATE", "t2"}},
		{"leaf.step", []any{"LEAF.STEP", "t", "20"}},
		{"leaf.floor", []any{"LEAF.FLOOR", "t", "500"}},
		{"set", []any{"SET", "t", "600"}},
	}
	for _, setup := range []struct {
		name     string
		password string // server.password
	}{
		{"with server.password", pw},
		{"without server.password", ""},
	} {
		t.Run(setup.name, func(t *testing.T) {
			in := servertest.Start(t, servertest.Options{Server: server.Options{Password: setup.password, AdminPassword: adminPW}})
			forEachProtocol(t, func(t *testing.T, proto int) {
				ctx := context.Background()
				user := userClient(t, in.Addr, proto, "", setup.password)
				redistest.Incr(t, user, "t")
				for _, ac := range adminCmds {
					wantErr(t, user, noperm(ac.name), ac.args...)
				}
				// Options and bad values are not even looked at.
				wantErr(t, user, noperm("set"), "SET", "t", "1", "EX", "5")
				// Reading and refusing are for everyone.
				if v := user.Get(ctx, "t").Val(); v == "" {
					t.Fatal("GET as default: nil after an INCR")
				}
				if err := user.Do(ctx, "DEL", "t").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR DEL is refused") {
					t.Fatalf("DEL as default: %v", err)
				}
				// A wrong admin password is refused and changes nothing.
				wantErr(t, user, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "admin", pw)
				wantErr(t, user, noperm("leaf.floor"), "LEAF.FLOOR", "t", "500")

				admin := userClient(t, in.Addr, proto, "admin", adminPW)
				tag := fmt.Sprintf("adm%d", proto)
				if got := do(t, admin, "LEAF.CREATE", tag, "STEP", 10); got != "OK" {
					t.Fatalf("LEAF.CREATE as admin = %v", got)
				}
				if got := do(t, admin, "LEAF.STEP", tag, 20); got != "OK" {
					t.Fatalf("LEAF.STEP as admin = %v", got)
				}
				if got := do(t, admin, "LEAF.FLOOR", tag, 500); got != int64(500) {
					t.Fatalf("LEAF.FLOOR as admin = %v", got)
				}
				if got := do(t, admin, "SET", tag, 600); got != "OK" {
					t.Fatalf("SET as admin = %v", got)
				}
				// admin runs the normal commands too.
				if id := redistest.Incr(t, admin, tag); id != 601 {
					t.Fatalf("INCR as admin after SET 600 = %d, want 601", id)
				}
				wantUser(t, admin, "admin")

				// AUTH switches users both ways on one connection.
				if err := user.Do(ctx, "AUTH", "admin", adminPW).Err(); err != nil {
					t.Fatalf("AUTH admin: %v", err)
				}
				if got := do(t, user, "LEAF.FLOOR", tag, 700); !atLeast(got, 700) {
					t.Fatalf("LEAF.FLOOR after AUTH admin = %v", got)
				}
				if setup.password != "" {
					if err := user.Do(ctx, "AUTH", "default", pw).Err(); err != nil {
						t.Fatalf("AUTH default: %v", err)
					}
					wantErr(t, user, noperm("leaf.floor"), "LEAF.FLOOR", tag, "800")
					wantUser(t, user, "default")
				}
				// HELLO AUTH admin, as a raw command.
				if err := user.Do(ctx, "HELLO", proto, "AUTH", "admin", adminPW).Err(); err != nil {
					t.Fatalf("HELLO 3 AUTH admin: %v", err)
				}
				if got := do(t, user, "LEAF.FLOOR", tag, 800); !atLeast(got, 800) {
					t.Fatalf("LEAF.FLOOR after HELLO AUTH admin = %v", got)
				}
			})
		})
	}

	t.Run("without admin_password", func(t *testing.T) {
		in := servertest.Start(t, servertest.Options{Server: server.Options{Password: pw}})
		c := userClient(t, in.Addr, 3, "", pw)
		if got := do(t, c, "LEAF.CREATE", "t2"); got != "OK" {
			t.Fatalf("LEAF.CREATE as default = %v", got)
		}
		redistest.Incr(t, c, "t")
		if got := do(t, c, "LEAF.STEP", "t", 20); got != "OK" {
			t.Fatalf("LEAF.STEP as default = %v", got)
		}
		if got := do(t, c, "LEAF.FLOOR", "t", 500); !atLeast(got, 500) {
			t.Fatalf("LEAF.FLOOR as default = %v", got)
		}
		if got := do(t, c, "SET", "t", 600); got != "OK" {
			t.Fatalf("SET as default = %v", got)
		}
		// There is no admin user to authenticate as.
		wantErr(t, c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "admin", "")
		wantErr(t, c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "admin", pw)
		// Unauthenticated clients still get NOAUTH first.
		anon := newClient(t, in.Addr, 2, "")
		wantErr(t, anon, "NOAUTH Authentication required.", "LEAF.FLOOR", "t", "900")
	})
}
