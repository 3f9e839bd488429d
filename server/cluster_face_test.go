package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// The Redis Cluster face compared with redis-server 7.0 in cluster mode,
// alone in its cluster with every slot: a leaf server without a registry
// is the same, a cluster of one. Every reply is compared byte for byte
// once the ports and node ids are placeholders, but where the test says
// why leaf differs.

// startFace starts a leaf server with the Redis Cluster face on.
func startFace(t *testing.T) *servertest.Instance {
	t.Helper()
	return servertest.Start(t, servertest.Options{Server: server.Options{RedisCluster: true}})
}

// facePair is a connection to leaf and one to redis-server in cluster
// mode, on one protocol.
type facePair struct {
	leaf, redis         *respConn
	leafPort, redisPort string
	leafAddr, redisAddr string
	leafID, redisID     string
	proto               int
	leafInst            *servertest.Instance
}

func startFacePair(t *testing.T, proto int, raddr string) facePair {
	t.Helper()
	in := startFace(t)
	p := facePair{
		leaf: dialRESP(t, in.Addr, proto), redis: dialRESP(t, raddr, proto),
		leafPort: portOf(t, in.Addr), redisPort: portOf(t, raddr), leafAddr: in.Addr, redisAddr: raddr,
		proto: proto, leafInst: in,
	}
	p.leafID = bulkText(p.leaf.do("CLUSTER", "MYID"))
	p.redisID = bulkText(p.redis.do("CLUSTER", "MYID"))
	return p
}

// bulkText is the text of a bulk string reply.
func bulkText(reply string) string {
	_, rest, _ := strings.Cut(reply, "\r\n")
	return strings.TrimSuffix(rest, "\r\n")
}

// same runs args on both and compares the replies with placeholders.
func (p facePair) same(t *testing.T, args ...string) {
	t.Helper()
	got := placeholders(p.leaf.do(args...), p.leafPort)
	want := placeholders(p.redis.do(args...), p.redisPort)
	if got != want {
		t.Fatalf("%v:\nleaf  %q\nredis %q", args, got, want)
	}
}

func TestClusterFaceComparedWithRedis(t *testing.T) {
	raddr := redistest.StartCluster(t)
	forEachProtocol(t, func(t *testing.T, proto int) {
		p := startFacePair(t, proto, raddr)
		if len(p.leafID) != 40 || len(p.redisID) != 40 {
			t.Fatalf("CLUSTER MYID: leaf %q, redis %q", p.leafID, p.redisID)
		}
		for _, args := range [][]string{
			{"CLUSTER", "SLOTS"},
			{"CLUSTER", "SHARDS"},
			{"CLUSTER", "MYID"},
			{"CLUSTER", "LINKS"},
			{"CLUSTER", "HELP"},
			{"READONLY"},
			{"READWRITE"},
			{"ASKING"},
			// Bad input: Redis's texts.
			{"CLUSTER"},
			{"CLUSTER", "SLOTS", "x"},
			{"CLUSTER", "INFO", "x"},
			{"CLUSTER", "MYID", "x"},
			{"CLUSTER", "KEYSLOT"},
			{"CLUSTER", "KEYSLOT", "a", "b"},
			{"CLUSTER", "NOSUCH"},
			{"CLUSTER", "COUNTKEYSINSLOT", "x"},
			{"CLUSTER", "COUNTKEYSINSLOT", "-1"},
			{"CLUSTER", "COUNTKEYSINSLOT", "16384"},
			{"CLUSTER", "COUNTKEYSINSLOT", "99999999999999999999"},
			{"CLUSTER", "GETKEYSINSLOT", "1"},
			{"CLUSTER", "GETKEYSINSLOT", "x", "1"},
			{"CLUSTER", "GETKEYSINSLOT", "1", "x"},
			{"CLUSTER", "GETKEYSINSLOT", "1", "-1"},
			{"CLUSTER", "GETKEYSINSLOT", "16384", "1"},
			{"CLUSTER", "REPLICAS", "nosuch"},
			{"CLUSTER", "SLAVES", "nosuch"},
			{"CLUSTER", "COUNT-FAILURE-REPORTS", "nosuch"},
			{"READONLY", "x"},
			{"ROLE", "x"},
		} {
			p.same(t, args...)
		}
		// Each server's own id: no replicas, no failure reports.
		for _, sub := range []string{"REPLICAS", "SLAVES", "COUNT-FAILURE-REPORTS"} {
			got := p.leaf.do("CLUSTER", sub, p.leafID)
			if want := p.redis.do("CLUSTER", sub, p.redisID); got != want {
				t.Fatalf("CLUSTER %s <own id>: leaf %q, redis %q", sub, got, want)
			}
		}

		// Keys: leaf's tags hash to Redis's slots, and the slots count
		// them as Redis counts its keys.
		keys := []string{"order", "user:1", "{user}a", "{user}b", "user", "{}x", "a{b}c", "{", "}{x}", "foo{}{bar}", "日本", ""}
		for _, k := range keys {
			p.same(t, "CLUSTER", "KEYSLOT", k)
		}
		for _, k := range keys[:10] {
			if got := p.leaf.do("INCR", k); !strings.HasPrefix(got, ":") {
				t.Fatalf("INCR %q on leaf: %q", k, got)
			}
			if got := p.redis.do("SET", k, "1"); got != "+OK\r\n" && p.proto == 2 {
				t.Fatalf("SET %q on redis: %q", k, got)
			}
		}
		for _, k := range keys[:10] {
			slot := fmt.Sprint(cluster.KeySlot([]byte(k)))
			p.same(t, "CLUSTER", "COUNTKEYSINSLOT", slot)
			p.same(t, "CLUSTER", "GETKEYSINSLOT", slot, "0")
			// Redis lists a slot's keys in its own order, leaf by name:
			// the same keys.
			got, want := sortedLines(p.leaf.do("CLUSTER", "GETKEYSINSLOT", slot, "10")), sortedLines(p.redis.do("CLUSTER", "GETKEYSINSLOT", slot, "10"))
			if got != want {
				t.Fatalf("CLUSTER GETKEYSINSLOT %s 10:\nleaf  %q\nredis %q", slot, got, want)
			}
		}
		p.same(t, "CLUSTER", "COUNTKEYSINSLOT", "0")
		p.same(t, "CLUSTER", "GETKEYSINSLOT", "16383", "5")

		// CLUSTER NODES: the same line, but that leaf has no cluster bus:
		// its bus port is 0.
		got := strings.Replace(placeholders(p.leaf.do("CLUSTER", "NODES"), p.leafPort), "@0 ", "@<bus> ", 1)
		want := placeholders(p.redis.do("CLUSTER", "NODES"), p.redisPort)
		want = regexp.MustCompile(`@\d+ `).ReplaceAllString(want, "@<bus> ")
		if noLengths(got) != noLengths(want) {
			t.Fatalf("CLUSTER NODES:\nleaf  %q\nredis %q", got, want)
		}

		// CLUSTER INFO: Redis's fields and values; the bus messages a lone
		// redis-server may have counted are 0 in leaf, which has no bus.
		stats := regexp.MustCompile(`cluster_stats_messages_(sent|received):\d+`)
		got = stats.ReplaceAllString(p.leaf.do("CLUSTER", "INFO"), "cluster_stats_messages_$1:n")
		want = stats.ReplaceAllString(p.redis.do("CLUSTER", "INFO"), "cluster_stats_messages_$1:n")
		if noLengths(got) != noLengths(want) {
			t.Fatalf("CLUSTER INFO:\nleaf  %q\nredis %q", got, want)
		}
		if !strings.Contains(got, "cluster_stats_messages_sent:n\r\ncluster_stats_messages_received:n") ||
			!strings.Contains(p.leaf.do("CLUSTER", "INFO"), "cluster_stats_messages_sent:0\r\n") {
			t.Fatalf("CLUSTER INFO: %q", got)
		}

		// INFO: cluster_enabled:1, as redis-server in cluster mode (redis-py
		// checks it); leaf's own lines follow it.
		if info := p.leaf.do("INFO", "cluster"); !strings.Contains(info, "# Cluster\r\ncluster_enabled:1\r\n") {
			t.Fatalf("INFO cluster on leaf: %q", info)
		}
		if info := p.redis.do("INFO", "cluster"); !strings.Contains(info, "# Cluster\r\ncluster_enabled:1\r\n") {
			t.Fatalf("INFO cluster on redis: %q", info)
		}
	})
}

// sortedLines is a reply's lines sorted: the same elements in any order
// give the same text.
func sortedLines(reply string) string {
	var pairs []string
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	head, lines := lines[0], lines[1:]
	for i := 0; i+1 < len(lines); i += 2 {
		pairs = append(pairs, lines[i]+"\r\n"+lines[i+1])
	}
	sort.Strings(pairs)
	return head + "\r\n" + strings.Join(pairs, "\r\n")
}

// TestClusterFaceOff: with server.redis_cluster off, leaf answers as
// redis-server without cluster support.
func TestClusterFaceOff(t *testing.T) {
	raddr := redistest.Start(t)
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := servertest.Start(t, servertest.Options{})
		leaf, redis := dialRESP(t, in.Addr, proto), dialRESP(t, raddr, proto)
		for _, args := range [][]string{
			{"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "MYID"},
			{"CLUSTER", "KEYSLOT", "a"}, {"CLUSTER", "COUNTKEYSINSLOT", "1"}, {"CLUSTER", "COUNTKEYSINSLOT", "x"},
			{"CLUSTER", "GETKEYSINSLOT", "1", "1"}, {"CLUSTER", "REPLICAS", "x"}, {"CLUSTER", "LINKS"},
			{"CLUSTER", "MEET", "127.0.0.1", "1"}, {"CLUSTER", "ADDSLOTS", "1"}, {"CLUSTER", "RESET"},
			{"READONLY"}, {"READWRITE"}, {"ASKING"},
			{"CLUSTER", "NOSUCH"}, {"CLUSTER", "KEYSLOT"}, {"CLUSTER", "HELP"},
		} {
			if got, want := leaf.do(args...), redis.do(args...); got != want {
				t.Fatalf("%v:\nleaf  %q\nredis %q", args, got, want)
			}
		}
		if info := leaf.do("INFO", "cluster"); !strings.Contains(info, "cluster_enabled:0\r\n") {
			t.Fatalf("INFO cluster with the face off: %q", info)
		}
	})
}

// TestClusterFaceRefusesChanges: the commands that change a Redis
// Cluster's slots or nodes are refused with leaf's reason (Redis would
// do them); the connection goes on.
func TestClusterFaceRefusesChanges(t *testing.T) {
	in := startFace(t)
	c := dialRESP(t, in.Addr, 2)
	for _, args := range [][]string{
		{"CLUSTER", "MEET", "127.0.0.1", "7000"}, {"CLUSTER", "ADDSLOTS", "1"}, {"CLUSTER", "ADDSLOTSRANGE", "0", "5"},
		{"CLUSTER", "DELSLOTS", "1"}, {"CLUSTER", "FAILOVER"}, {"CLUSTER", "FORGET", "x"}, {"CLUSTER", "RESET", "HARD"},
		{"CLUSTER", "SETSLOT", "1", "STABLE"}, {"cluster", "replicate", "x"}, {"CLUSTER", "SAVECONFIG"},
	} {
		want := "-ERR CLUSTER " + strings.ToUpper(args[1]) + " is not supported: leaf's slot map follows its cluster registry " +
			"(the live servers), which no command changes\r\n"
		if got := c.do(args...); got != want {
			t.Fatalf("%v: %q, want %q", args, got, want)
		}
	}
	if got := c.do("INCR", "t"); got != ":1\r\n" {
		t.Fatalf("INCR after the refusals: %q", got)
	}
}

// TestClusterFaceMap: three servers on one registry answer one map: each
// a contiguous third of the slots, in id order, with its announced
// address; CLUSTER NODES names each server itself; a server that stops
// renewing leaves the map of the others once it is the node timeout late
// (CLUSTER NODES shows it failed, CLUSTER SHARDS failed without slots),
// and comes back when it renews.
func TestClusterFaceMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	var ins []*servertest.Instance
	for _, id := range []string{"c", "a", "b"} {
		co := nodeOptions(id, time.Hour, time.Minute)
		co.NodeTimeout = 300 * time.Millisecond
		ins = append(ins, servertest.Start(t, servertest.Options{Path: path, Cluster: co, Server: server.Options{RedisCluster: true}}))
	}
	c, a, b := ins[0], ins[1], ins[2]
	byID := map[string]*servertest.Instance{"a": a, "b": b, "c": c}
	ctx := context.Background()
	refresh := func() { // the registry read now, not a heartbeat ago
		t.Helper()
		for _, in := range ins {
			if _, err := in.Node.Nodes(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	refresh()
	wantSlots := func(ids ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(ids))
		for i, id := range ids {
			host, port, _ := strings.Cut(byID[id].Addr, ":")
			fmt.Fprintf(&b, "*3\r\n:%d\r\n:%d\r\n*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n%s\r\n*0\r\n",
				i*cluster.Slots/len(ids), (i+1)*cluster.Slots/len(ids)-1, len(host), host, port, cluster.NodeName(id))
		}
		return b.String()
	}
	for _, in := range ins {
		rc := dialRESP(t, in.Addr, 2)
		if got, want := rc.do("CLUSTER", "SLOTS"), wantSlots("a", "b", "c"); got != want {
			t.Fatalf("CLUSTER SLOTS on %s:\n got %q\nwant %q", in.Addr, got, want)
		}
		nodes := bulkText(rc.do("CLUSTER", "NODES"))
		lines := strings.Split(strings.TrimSuffix(nodes, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("CLUSTER NODES on %s: %q", in.Addr, nodes)
		}
		for i, id := range []string{"a", "b", "c"} {
			f := strings.Fields(lines[i])
			flags := "master"
			if byID[id] == in {
				flags = "myself,master"
			}
			slots := fmt.Sprintf("%d-%d", i*cluster.Slots/3, (i+1)*cluster.Slots/3-1)
			if len(f) != 9 || f[0] != cluster.NodeName(id) || f[1] != byID[id].Addr+"@0" || f[2] != flags || f[3] != "-" ||
				f[4] != "0" || f[6] != "0" || f[7] != "connected" || f[8] != slots {
				t.Fatalf("CLUSTER NODES on %s, line %d: %q", in.Addr, i, lines[i])
			}
		}
		info := bulkText(rc.do("CLUSTER", "INFO"))
		if !strings.Contains(info, "cluster_known_nodes:3\r\ncluster_size:3\r\n") {
			t.Fatalf("CLUSTER INFO on %s: %q", in.Addr, info)
		}
	}

	// b stops renewing; a and c renew until it is late.
	deadline := time.Now().Add(time.Minute) // a safety net, not an assertion on time
	rc := dialRESP(t, a.Addr, 2)
	for {
		for _, in := range []*servertest.Instance{a, c} {
			if err := in.Node.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		refresh()
		if got := rc.do("CLUSTER", "SLOTS"); got == wantSlots("a", "c") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // heartbeats, at a pace
	}
	for _, in := range []*servertest.Instance{a, b, c} {
		rc := dialRESP(t, in.Addr, 2)
		if got, want := rc.do("CLUSTER", "SLOTS"), wantSlots("a", "c"); got != want {
			t.Fatalf("CLUSTER SLOTS on %s with b late:\n got %q\nwant %q", in.Addr, got, want)
		}
		lines := strings.Split(strings.TrimSuffix(bulkText(rc.do("CLUSTER", "NODES")), "\n"), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[2], cluster.NodeName("b")+" "+b.Addr+"@0 ") ||
			!strings.Contains(lines[2], "master,fail - 0 ") || !strings.HasSuffix(lines[2], " 0 disconnected") {
			t.Fatalf("CLUSTER NODES on %s with b late: %q", in.Addr, lines)
		}
		if in == b && !strings.Contains(lines[2], "myself,master,fail") {
			t.Fatalf("CLUSTER NODES on b itself: %q", lines[2])
		}
		shards := rc.do("CLUSTER", "SHARDS")
		if !strings.HasSuffix(shards, "$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n"+cluster.NodeName("b")+
			"\r\n$4\r\nport\r\n:"+portOf(t, b.Addr)+"\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"+
			"$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nfailed\r\n") {
			t.Fatalf("CLUSTER SHARDS on %s with b late: %q", in.Addr, shards)
		}
		if info := bulkText(rc.do("CLUSTER", "INFO")); !strings.Contains(info, "cluster_known_nodes:3\r\ncluster_size:2\r\n") {
			t.Fatalf("CLUSTER INFO on %s with b late: %q", in.Addr, info)
		}
		// Any server answers any tag: no MOVED, whatever the map.
		if got := rc.do("INCR", "{b}tag"); !strings.HasPrefix(got, ":") {
			t.Fatalf("INCR on %s: %q", in.Addr, got)
		}
	}
	// b renews: the map is the first one again.
	if err := b.Node.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	refresh()
	for _, in := range ins {
		if got, want := dialRESP(t, in.Addr, 2).do("CLUSTER", "SLOTS"), wantSlots("a", "b", "c"); got != want {
			t.Fatalf("CLUSTER SLOTS on %s after b renewed:\n got %q\nwant %q", in.Addr, got, want)
		}
	}
}
