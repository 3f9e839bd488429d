package cluster_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
)

// TestKeySlot: Redis's hash slots, hash tags included (the values are
// redis-server 7.0's CLUSTER KEYSLOT; server's tests compare more keys
// with a live one).
func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"123456789", 12739}, // CRC16/XMODEM's check value 0x31C3
		{"order", 16025},
		{"foo", 12182},
		{"", 0},
		{"{user}a", 5474},
		{"{user}b", 5474},
		{"user", 5474},
		{"{}user", cluster.KeySlot([]byte("{}user"))},
		{"a{}b{user}", cluster.KeySlot([]byte("a{}b{user}"))},
		{"{user", cluster.KeySlot([]byte("{user"))},
	} {
		if got := cluster.KeySlot([]byte(tc.key)); got != tc.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
	// An empty tag hashes the whole key; so does an unclosed one.
	if cluster.KeySlot([]byte("{}user")) == cluster.KeySlot([]byte("user")) {
		t.Error(`"{}user" hashed as "user": an empty hash tag must hash the whole key`)
	}
	if cluster.KeySlot([]byte("a{}b{user}")) == cluster.KeySlot([]byte("user")) {
		t.Error(`"a{}b{user}" hashed as "user": only the first { counts`)
	}
}

// nodes makes registry entries named by ids, with ages in seconds.
func nodes(ages map[string]int) []persist.Node {
	var out []persist.Node
	for id, age := range ages {
		out = append(out, persist.Node{NodeInfo: persist.NodeInfo{ID: id, Addr: "10.0.0.1:" + id}, Age: time.Duration(age) * time.Second})
	}
	return out
}

// TestSlotMapCoversEverySlot: for 1 to 20 servers, in any order, the map
// gives each a contiguous range, in id order, together every slot once;
// and the same registry state gives the same map.
func TestSlotMapCoversEverySlot(t *testing.T) {
	for n := 1; n <= 20; n++ {
		ages := map[string]int{}
		for i := range n {
			ages[fmt.Sprintf("n%02d", i)] = i % 3
		}
		list := nodes(ages) // in the map's random order
		m := cluster.ComputeSlotMap(list, 5*time.Second, persist.NodeInfo{ID: "n00"})
		if len(m.Shards) != n || m.Members() != n {
			t.Fatalf("%d servers: %d shards, %d members", n, len(m.Shards), m.Members())
		}
		next := 0
		for i, sh := range m.Shards {
			if sh.ID != fmt.Sprintf("n%02d", i) {
				t.Fatalf("%d servers: shard %d is %s: want id order", n, i, sh.ID)
			}
			if sh.First != next || sh.Last < sh.First {
				t.Fatalf("%d servers: shard %d holds %d-%d after %d", n, i, sh.First, sh.Last, next-1)
			}
			if size := sh.Last - sh.First + 1; size < cluster.Slots/n || size > cluster.Slots/n+1 {
				t.Fatalf("%d servers: shard %d holds %d slots", n, i, size)
			}
			next = sh.Last + 1
		}
		if next != cluster.Slots {
			t.Fatalf("%d servers: the slots end at %d", n, next-1)
		}
		if m.Self != 0 {
			t.Fatalf("Self = %d, want 0", m.Self)
		}
		// Another server, reading the list in another order, computes the
		// same map.
		rev := append([]persist.Node(nil), list...)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		other := cluster.ComputeSlotMap(rev, 5*time.Second, persist.NodeInfo{ID: "elsewhere"})
		for i := range m.Shards {
			if other.Shards[i].ID != m.Shards[i].ID || other.Shards[i].First != m.Shards[i].First || other.Shards[i].Last != m.Shards[i].Last {
				t.Fatalf("%d servers: shard %d differs between two readers: %+v and %+v", n, i, m.Shards[i], other.Shards[i])
			}
		}
		if other.Self != -1 {
			t.Fatalf("a server not listed has Self %d", other.Self)
		}
	}
}

// TestSlotMapLate: a server whose heartbeat is more than the timeout
// older than the freshest one's leaves the map, listed last without
// slots; the others share every slot. Ages that grow alike (a store that
// stalls) take nobody out.
func TestSlotMapLate(t *testing.T) {
	m := cluster.ComputeSlotMap(nodes(map[string]int{"a": 0, "b": 7, "c": 1}), 5*time.Second, persist.NodeInfo{ID: "b"})
	if len(m.Shards) != 3 || m.Members() != 2 {
		t.Fatalf("shards %+v", m.Shards)
	}
	a, c, b := m.Shards[0], m.Shards[1], m.Shards[2]
	if a.ID != "a" || c.ID != "c" || b.ID != "b" || !b.Late || a.Late || c.Late {
		t.Fatalf("shards %+v: want a and c members, b late and last", m.Shards)
	}
	if a.First != 0 || a.Last != 8191 || c.First != 8192 || c.Last != 16383 || b.Last >= b.First {
		t.Fatalf("ranges a %d-%d, c %d-%d, b %d-%d", a.First, a.Last, c.First, c.Last, b.First, b.Last)
	}
	if m.Self != 2 {
		t.Fatalf("Self = %d, want 2 (b)", m.Self)
	}
	// Exactly the timeout late is still in.
	if m := cluster.ComputeSlotMap(nodes(map[string]int{"a": 1, "b": 6}), 5*time.Second, persist.NodeInfo{ID: "a"}); m.Members() != 2 {
		t.Fatalf("a server late by exactly the timeout left the map: %+v", m.Shards)
	}
	// Every age large alike: the store stalled, nobody is late.
	if m := cluster.ComputeSlotMap(nodes(map[string]int{"a": 20, "b": 21, "c": 22}), 5*time.Second, persist.NodeInfo{ID: "a"}); m.Members() != 3 {
		t.Fatalf("a stalled store took servers off the map: %+v", m.Shards)
	}
}

// TestSlotMapAlone: with no server listed (no registry, or not read
// yet) the map is this server alone with every slot.
func TestSlotMapAlone(t *testing.T) {
	self := persist.NodeInfo{ID: "me", Addr: "10.0.0.9:6380"}
	m := cluster.ComputeSlotMap(nil, time.Second, self)
	if len(m.Shards) != 1 || m.Self != 0 || m.Shards[0].ID != "me" || m.Shards[0].Addr != self.Addr ||
		m.Shards[0].First != 0 || m.Shards[0].Last != cluster.Slots-1 {
		t.Fatalf("map alone: %+v", m)
	}
}

// TestNodeName: 40 hex digits, the same for the same id, different for
// another.
func TestNodeName(t *testing.T) {
	a, b := cluster.NodeName("host-1a2b3c4d"), cluster.NodeName("host-1a2b3c4e")
	if len(a) != 40 || a == b || a != cluster.NodeName("host-1a2b3c4d") {
		t.Fatalf("NodeName: %q, %q", a, b)
	}
	for _, r := range a {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			t.Fatalf("NodeName %q: not lowercase hex", a)
		}
	}
}

// TestAnnounceAddr: server.announce_addr as given; else the listener's
// address, an unspecified host replaced by the machine's first global
// address, IPv4 first.
func TestAnnounceAddr(t *testing.T) {
	ipnet := func(s string) net.Addr { return &net.IPNet{IP: net.ParseIP(s), Mask: net.CIDRMask(24, 32)} }
	machine := func() ([]net.Addr, error) {
		return []net.Addr{ipnet("127.0.0.1"), ipnet("::1"), ipnet("fe80::1"), ipnet("fd00::5"), ipnet("10.2.3.4"), ipnet("192.168.1.9")}, nil
	}
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tc := range []struct {
		name     string
		announce string
		bound    net.Addr
		addrs    func() ([]net.Addr, error)
		want     string
		err      string
	}{
		{"announce given", "leaf-0.leaf:6380", tcp("0.0.0.0", 6380), machine, "leaf-0.leaf:6380", ""},
		{"loopback listener", "", tcp("127.0.0.1", 41000), machine, "127.0.0.1:41000", ""},
		{"specific listener", "", tcp("10.9.9.9", 6380), machine, "10.9.9.9:6380", ""},
		{"every interface: first IPv4", "", tcp("0.0.0.0", 6380), machine, "10.2.3.4:6380", ""},
		{"IPv6 any: first IPv4 still", "", tcp("::", 6380), machine, "10.2.3.4:6380", ""},
		{"IPv6 only machine", "", tcp("::", 6380), func() ([]net.Addr, error) {
			return []net.Addr{ipnet("::1"), ipnet("fe80::1"), ipnet("fd00::5")}, nil
		}, "[fd00::5]:6380", ""},
		{"loopback only machine", "", tcp("0.0.0.0", 6380), func() ([]net.Addr, error) {
			return []net.Addr{ipnet("127.0.0.1")}, nil
		}, "127.0.0.1:6380", ""},
		{"interfaces unreadable", "", tcp("0.0.0.0", 6380), func() ([]net.Addr, error) {
			return nil, errors.New("boom")
		}, "", "could not be read"},
		{"announce unspecified", "0.0.0.0:6380", tcp("0.0.0.0", 6380), machine, "", "unspecified"},
		{"announce port 0", "10.0.0.1:0", tcp("0.0.0.0", 6380), machine, "", "port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := cluster.AnnounceAddr(tc.announce, tc.bound, tc.addrs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("AnnounceAddr = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || from == "" {
				t.Fatalf("AnnounceAddr = %q (%q), %v; want %q", got, from, err, tc.want)
			}
		})
	}
}

// TestNodeSlotMap: servers on one store compute one map from the
// registry, each naming itself; a server that stops renewing leaves it
// once its last renewal is the node timeout older than the others',
// long before its lease ends, and comes back with its next heartbeat.
func TestNodeSlotMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.lease = time.Hour
	su.nodeTime = 300 * time.Millisecond
	var srvs []*server
	for _, name := range []string{"b", "c", "a"} {
		srvs = append(srvs, newServer(t, path, name, su))
	}
	b, c, a := srvs[0], srvs[1], srvs[2]
	ctx := t.Context()
	want := []string{"a", "b", "c"}
	for _, srv := range srvs {
		m := srv.node.SlotMap(ctx)
		if len(m.Shards) != 3 || m.Members() != 3 {
			t.Fatalf("%s's map: %+v", srv.node.ID(), m.Shards)
		}
		for i, sh := range m.Shards {
			if sh.ID != want[i] || sh.Addr != "127.0.0.1:"+want[i] || sh.First != i*cluster.Slots/3 {
				t.Fatalf("%s's shard %d: %+v", srv.node.ID(), i, sh)
			}
		}
		if m.Shards[m.Self].ID != srv.node.ID() {
			t.Fatalf("%s's map names %s as itself", srv.node.ID(), m.Shards[m.Self].ID)
		}
	}
	if got := a.node.NodeTimeout(); got != su.nodeTime {
		t.Fatalf("NodeTimeout = %s, want %s", got, su.nodeTime)
	}

	// b stops beating; a and c go on, until b's renewal is that late.
	var m cluster.SlotMap
	deadline := time.Now().Add(time.Minute) // a safety net, not an assertion on time
	for {
		for _, srv := range []*server{a, c} {
			if err := srv.node.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.node.Nodes(ctx); err != nil { // fresh, not a heartbeat old
			t.Fatal(err)
		}
		if m = a.node.SlotMap(ctx); m.Members() == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // heartbeats, at a pace
	}
	if m.Members() != 2 || m.Shards[0].ID != "a" || m.Shards[1].ID != "c" || m.Shards[2].ID != "b" || !m.Shards[2].Late ||
		m.Shards[0].Last != 8191 || m.Shards[1].First != 8192 {
		t.Fatalf("after b stopped renewing: %+v", m.Shards)
	}
	if left := m.Shards[2].Expires; left < 50*time.Minute {
		t.Fatalf("b left the map with %s of its lease left: want long before it ends", left)
	}
	// b beats again: it is back, and the map is the first one.
	if err := b.node.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.node.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	if m = a.node.SlotMap(ctx); m.Members() != 3 || m.Shards[1].ID != "b" || m.Shards[1].First != cluster.Slots/3 {
		t.Fatalf("after b renewed: %+v", m.Shards)
	}
}
