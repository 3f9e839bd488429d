package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// The Sentinel face compared with a real Redis Sentinel monitoring one
// redis-server as "mymaster": a leaf server without a registry is a
// sentinel of itself, the master of every name. Replies are compared byte
// for byte once ports and ids are placeholders; where a reply holds
// times and counters, its fields are compared.

// fieldNames are the field names of a Sentinel state reply (a map in
// RESP3, a flat array in RESP2), in order.
func fieldNames(t *testing.T, v any) []string {
	t.Helper()
	var names []string
	switch v := v.(type) {
	case []any:
		for i := 0; i < len(v); i += 2 {
			names = append(names, v[i].(string))
		}
	case map[any]any:
		for k := range v {
			names = append(names, k.(string))
		}
		slices.Sort(names) // go-redis gives a map: no order
	default:
		t.Fatalf("a Sentinel state: %T %v", v, v)
	}
	return names
}

func TestSentinelFaceComparedWithRedis(t *testing.T) {
	maddr := redistest.Start(t)
	saddr := redistest.StartSentinel(t, maddr)
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := startFace(t)
		leaf, sentinel := dialRESP(t, in.Addr, proto), dialRESP(t, saddr, proto)
		lport, mport := portOf(t, in.Addr), portOf(t, maddr)
		same := func(args ...string) {
			t.Helper()
			got := placeholders(leaf.do(args...), lport)
			want := placeholders(sentinel.do(args...), mport)
			if got != want {
				t.Fatalf("%v:\nleaf     %q\nsentinel %q", args, got, want)
			}
		}
		for _, args := range [][]string{
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"},
			{"SENTINEL", "get-master-addr-by-name", "mymaster"},
			{"SENTINEL", "SENTINELS", "mymaster"},
			{"SENTINEL", "REPLICAS", "mymaster"},
			{"SENTINEL", "SLAVES", "mymaster"},
			{"SENTINEL", "CKQUORUM", "mymaster"},
			{"SENTINEL", "HELP"},
			// Bad input.
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME"},
			{"SENTINEL", "MASTERS", "x"},
			{"SENTINEL", "SENTINELS"},
		} {
			same(args...)
		}
		if id := bulkText(leaf.do("SENTINEL", "MYID")); !hex40.MatchString(id) || len(id) != 40 {
			t.Fatalf("SENTINEL MYID: %q", id)
		}
		// leaf answers every name: any name is the shared store's IDs.
		if got, want := placeholders(leaf.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "orders"), lport),
			placeholders(sentinel.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"), mport); got != want {
			t.Fatalf("GET-MASTER-ADDR-BY-NAME orders: %q, want %q", got, want)
		}

		// SENTINEL MASTERS and MASTER: the same fields, in the same order.
		ctx := context.Background()
		lc := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, Protocol: proto}))
		sc := redis.NewClient(redistest.Options(&redis.Options{Addr: saddr, Protocol: proto}))
		t.Cleanup(func() { lc.Close(); sc.Close() })
		for _, args := range [][]any{{"SENTINEL", "MASTER", "mymaster"}, {"SENTINEL", "MASTERS"}} {
			lv, err1 := lc.Do(ctx, args...).Result()
			sv, err2 := sc.Do(ctx, args...).Result()
			if err1 != nil || err2 != nil {
				t.Fatalf("%v: leaf %v, sentinel %v", args, err1, err2)
			}
			if args[1] == "MASTERS" {
				if len(lv.([]any)) != 1 || len(sv.([]any)) != 1 {
					t.Fatalf("SENTINEL MASTERS: leaf %v, sentinel %v", lv, sv)
				}
				lv, sv = lv.([]any)[0], sv.([]any)[0]
			}
			if got, want := fieldNames(t, lv), fieldNames(t, sv); !slices.Equal(got, want) {
				t.Fatalf("%v fields:\nleaf     %q\nsentinel %q", args, got, want)
			}
		}

		// ROLE: a master without replicas, as the redis-server.
		master := dialRESP(t, maddr, proto)
		if got, want := leaf.do("ROLE"), master.do("ROLE"); got != want {
			t.Fatalf("ROLE: leaf %q, redis %q", got, want)
		}
	})
}

// TestSentinelChannelsComparedWithRedis: SUBSCRIBE and PSUBSCRIBE to
// Sentinel's channels, what runs in the subscribed state, and the
// unsubscribe replies, as redis-server answers them.
func TestSentinelChannelsComparedWithRedis(t *testing.T) {
	raddr := redistest.Start(t)
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := startFace(t)
		leaf, redis := dialRESP(t, in.Addr, proto), dialRESP(t, raddr, proto)
		type step struct {
			args    []string
			replies int // one per channel or pattern
		}
		steps := []step{
			{[]string{"SUBSCRIBE", "+switch-master"}, 1},
			{[]string{"SUBSCRIBE", "+sdown", "-sdown"}, 2},
			{[]string{"PSUBSCRIBE", "*"}, 1},
			{[]string{"PING"}, 1},
			{[]string{"PING", "hello"}, 1},
			{[]string{"UNSUBSCRIBE", "+sdown"}, 1},
			{[]string{"PUNSUBSCRIBE"}, 1},
			{[]string{"UNSUBSCRIBE"}, 2}, // the rest, in any order
			{[]string{"UNSUBSCRIBE"}, 1}, // none left: a nil channel
			{[]string{"PING"}, 1},
		}
		if proto == 2 {
			// RESP2's subscribed state refuses other commands.
			steps = slices.Insert(steps, 3, step{[]string{"INCR", "x"}, 1}, step{[]string{"GET", "x"}, 1})
		}
		for _, st := range steps {
			leaf.send(st.args...)
			redis.send(st.args...)
			// Redis unsubscribes all in its hash order: the same channels
			// in any order, and the same counts in order.
			var got, want, gotCounts, wantCounts []string
			for range st.replies {
				g, w := leaf.reply(), redis.reply()
				g, gc := splitCount(g)
				w, wc := splitCount(w)
				got, want = append(got, g), append(want, w)
				gotCounts, wantCounts = append(gotCounts, gc), append(wantCounts, wc)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || !slices.Equal(gotCounts, wantCounts) {
				t.Fatalf("%v:\nleaf  %q %q\nredis %q %q", st.args, got, gotCounts, want, wantCounts)
			}
		}
		if got := leaf.do("INCR", "x"); got != ":1\r\n" {
			t.Fatalf("INCR after the last UNSUBSCRIBE: %q", got)
		}
	})
}

// splitCount splits a subscription reply's trailing count (":n\r\n")
// off; other replies have none.
func splitCount(reply string) (string, string) {
	i := strings.LastIndex(strings.TrimSuffix(reply, "\r\n"), "\r\n:")
	if i < 0 || !strings.HasPrefix(reply, ">3") && !strings.HasPrefix(reply, "*3") {
		return reply, ""
	}
	return reply[:i+2], reply[i+2:]
}

// TestSubscribeOnlySentinelChannels: SUBSCRIBE to a channel leaf never
// publishes on is refused with the reason, and subscribes to nothing.
func TestSubscribeOnlySentinelChannels(t *testing.T) {
	in := startFace(t)
	c := dialRESP(t, in.Addr, 2)
	want := "-ERR leaf publishes only Redis Sentinel's events (channels beginning with + or -, such as +switch-master), not 'news'\r\n"
	if got := c.do("SUBSCRIBE", "+switch-master", "news"); got != want {
		t.Fatalf("SUBSCRIBE news: %q", got)
	}
	if got := c.do("INCR", "x"); got != ":1\r\n" {
		t.Fatalf("INCR after the refused SUBSCRIBE: %q", got)
	}
}

// TestSwitchMaster: a sentinel client subscribed to +switch-master on the
// server it was sent to is told, in Sentinel's words, when that server's
// lease lapses, and the server then names another live one.
func TestSwitchMaster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	face := server.Options{RedisCluster: true}
	b := servertest.Start(t, servertest.Options{Path: path, Cluster: nodeOptions("b", time.Hour, time.Minute), Server: face})
	var lease servertest.Probes
	co := nodeOptions("a", time.Hour, time.Minute)
	co.AfterFunc = lease.AfterFunc // the end of a's lease, on cue
	a := servertest.Start(t, servertest.Options{Path: path, Cluster: co, Server: face})
	if _, err := a.Node.Nodes(context.Background()); err != nil { // a reads b's registration now
		t.Fatal(err)
	}
	addr := func(in *servertest.Instance) string {
		host, port, _ := strings.Cut(in.Addr, ":")
		return fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(host), host, len(port), port)
	}
	c := dialRESP(t, a.Addr, 2)
	if got := c.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"); got != addr(a) {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME on a: %q, want a, %q", got, addr(a))
	}
	if got := c.do("SUBSCRIBE", "+switch-master"); got != "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	lease.Run(t) // a's lease ends unrenewed: it serves no cached IDs
	ah, ap, _ := strings.Cut(a.Addr, ":")
	bh, bp, _ := strings.Cut(b.Addr, ":")
	payload := strings.Join([]string{"mymaster", ah, ap, bh, bp}, " ")
	want := fmt.Sprintf("*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%d\r\n%s\r\n", len(payload), payload)
	if got := c.reply(); got != want {
		t.Fatalf("+switch-master: %q, want %q", got, want)
	}
	if got := dialRESP(t, a.Addr, 2).do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"); got != addr(b) {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME on a after its lapse: %q, want b, %q", got, addr(b))
	}
}
