package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/resp"
)

// The Redis Cluster face: CLUSTER SLOTS, SHARDS, NODES, INFO, MYID,
// KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, READONLY, READWRITE and ASKING
// in redis-server 7.0's formats, so that cluster clients (go-redis
// ClusterClient, redis-py RedisCluster, ioredis Cluster, Lettuce, Jedis)
// connect to leaf. Every live server of the registry is a master of a
// contiguous range of slots (cluster.ComputeSlotMap); a client routes
// each tag to one server, so through it a tag's IDs increase while the
// servers stay the same. leaf never answers MOVED or ASK: any server
// answers any tag, so a client with an older map is never wrong.
//
// The commands that change a Redis Cluster's configuration (MEET,
// ADDSLOTS, FAILOVER, ...) are refused with a reason: leaf's map follows
// the registry alone.

func registerClusterFace(t table) {
	sub := func(name string, arity int, fn handler, flags []string, summary, since, complex string) *command {
		return &command{name: name, arity: arity, fn: fn, flags: flags, acl: []string{"slow"},
			summary: summary, since: since, group: "cluster", complex: complex}
	}
	stale := []string{"loading", "stale"}
	admin := []string{"admin", "stale", "noscript"}
	fixed := func(name string, arity int, summary string) *command {
		c := sub(name, arity, cmdClusterFixed, admin, summary, "3.0.0", "O(1)")
		c.acl = []string{"admin", "slow", "dangerous"}
		return c
	}
	t.add(
		(&command{
			name: "cluster", arity: -2,
			flags: []string{}, acl: []string{"slow"},
			summary: "A container for Redis Cluster commands", since: "3.0.0", group: "cluster", complex: "Depends on subcommand.",
			help: clusterHelp,
		}).sub(
			sub("slots", 2, cmdClusterSlots, stale, "Returns the mapping of cluster slots to nodes", "3.0.0",
				"O(N) where N is the total number of Cluster nodes"),
			sub("shards", 2, cmdClusterShards, stale, "Returns the mapping of cluster slots to shards", "7.0.0",
				"O(N) where N is the total number of cluster nodes"),
			sub("nodes", 2, cmdClusterNodes, stale, "Returns the cluster configuration for a node", "3.0.0",
				"O(N) where N is the total number of Cluster nodes"),
			sub("info", 2, cmdClusterInfo, stale, "Returns information about the state of a node", "3.0.0", "O(1)"),
			sub("myid", 2, cmdClusterMyID, stale, "Returns the ID of a node", "3.0.0", "O(1)"),
			sub("keyslot", 3, cmdClusterKeySlot, stale, "Returns the hash slot for a key", "3.0.0",
				"O(N) where N is the number of bytes in the key"),
			sub("countkeysinslot", 3, cmdClusterCountKeys, stale, "Returns the number of keys in a hash slot", "3.0.0", "O(N) in the number of tags"),
			sub("getkeysinslot", 4, cmdClusterGetKeys, stale, "Returns the key names in a hash slot", "3.0.0", "O(N) in the number of tags"),
			sub("replicas", 3, cmdClusterReplicas, admin, "Lists the replica nodes of a master node", "5.0.0", "O(1)"),
			sub("slaves", 3, cmdClusterReplicas, admin, "Lists the replica nodes of a master node", "3.0.0", "O(1)"),
			sub("count-failure-reports", 3, cmdClusterFailureReports, admin,
				"Returns the number of active failure reports active for a node", "3.0.0", "O(1)"),
			sub("links", 2, cmdClusterLinks, stale, "Returns a list of all TCP links to and from peer nodes", "7.0.0", "O(1)"),
			sub("help", 2, cmdClusterHelp, stale, "Returns helpful text about the different subcommands", "5.0.0", "O(1)"),
			fixed("addslots", -3, "Assigns new hash slots to a node"),
			fixed("addslotsrange", -4, "Assigns new hash slot ranges to a node"),
			fixed("bumpepoch", 2, "Advances the cluster config epoch"),
			fixed("delslots", -3, "Sets hash slots as unbound for a node"),
			fixed("delslotsrange", -4, "Sets hash slot ranges as unbound for a node"),
			fixed("failover", -2, "Forces a replica to perform a manual failover of its master"),
			fixed("flushslots", 2, "Deletes all slots information from a node"),
			fixed("forget", 3, "Removes a node from the nodes table"),
			fixed("meet", -4, "Forces a node to handshake with another node"),
			fixed("replicate", 3, "Configure a node as replica of a master node"),
			fixed("reset", -2, "Resets a node"),
			fixed("saveconfig", 2, "Forces a node to save the cluster configuration to disk"),
			fixed("set-config-epoch", 3, "Sets the configuration epoch for a new node"),
			fixed("setslot", -4, "Binds a hash slot to a node"),
		),
		&command{name: "readonly", arity: 1, fn: cmdClusterOK, flags: []string{"loading", "stale", "fast"}, acl: []string{"fast", "connection"},
			summary: "Enables read-only queries for a connection to a Redis Cluster replica node", since: "3.0.0", group: "cluster", complex: "O(1)"},
		&command{name: "readwrite", arity: 1, fn: cmdClusterOK, flags: []string{"loading", "stale", "fast"}, acl: []string{"fast", "connection"},
			summary: "Disables read queries for a connection to a cluster replica node", since: "3.0.0", group: "cluster", complex: "O(1)"},
		&command{name: "asking", arity: 1, fn: cmdClusterOK, flags: []string{"fast"}, acl: []string{"fast", "connection"},
			summary: "Signals that a cluster client is following an -ASK redirect", since: "3.0.0", group: "cluster", complex: "O(1)"},
	)
}

// clusterHelp is CLUSTER HELP: redis-server 7.0's lines.
var clusterHelp = []string{
	"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ADDSLOTS <slot> [<slot> ...]",
	"    Assign slots to current node.",
	"ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
	"    Assign slots which are between <start-slot> and <end-slot> to current node.",
	"BUMPEPOCH",
	"    Advance the cluster config epoch.",
	"COUNT-FAILURE-REPORTS <node-id>",
	"    Return number of failure reports for <node-id>.",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"DELSLOTS <slot> [<slot> ...]",
	"    Delete slots information from current node.",
	"DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
	"    Delete slots information which are between <start-slot> and <end-slot> from current node.",
	"FAILOVER [FORCE|TAKEOVER]",
	"    Promote current replica node to being a master.",
	"FORGET <node-id>",
	"    Remove a node from the cluster.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"FLUSHSLOTS",
	"    Delete current node own slots information.",
	"INFO",
	"    Return information about the cluster.",
	"KEYSLOT <key>",
	"    Return the hash slot for <key>.",
	"MEET <ip> <port> [<bus-port>]",
	"    Connect nodes into a working cluster.",
	"MYID",
	"    Return the node id.",
	"NODES",
	"    Return cluster configuration seen by node. Output format:",
	"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
	"REPLICATE <node-id>",
	"    Configure current node as replica to <node-id>.",
	"RESET [HARD|SOFT]",
	"    Reset current node (default: soft).",
	"SET-CONFIG-EPOCH <epoch>",
	"    Set config epoch of current node.",
	"SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
	"    Set slot state.",
	"REPLICAS <node-id>",
	"    Return <node-id> replicas.",
	"SAVECONFIG",
	"    Force saving cluster configuration on disk.",
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
	"SHARDS",
	"    Return information about slot range mappings and the nodes associated with them.",
	"LINKS",
	"    Return information about all network links between this node and its peers.",
	"    Output format is an array where each array element is a map containing attributes of a link",
	"HELP",
	"    Prints this help.",
}

// clusterOff writes Redis's error when the face is off and reports
// whether it did.
func (s *Server) clusterOff(c *client, conn *resp.Conn) bool {
	if s.opts.RedisCluster {
		return false
	}
	s.writeError(c, conn, errClusterDisabled)
	return true
}

// self is this server as clients are to reach it: its node in the
// registry, or, without one, the run id and the announced (else the
// listener's) address.
func (s *Server) self() persist.NodeInfo {
	if s.opts.Cluster != nil {
		return s.opts.Cluster.Status().Node
	}
	addr := s.opts.AnnounceAddr
	if addr == "" && s.Addr() != nil {
		addr = s.Addr().String()
	}
	return persist.NodeInfo{ID: s.runID, Addr: addr, Version: s.opts.Version, Started: s.started}
}

// slotMap is the slot map of the live servers (this server alone without
// a registry), with this server listed even when the registry does not
// list it: the map's own servers hold the slots, itself may be a last
// entry without any.
func (s *Server) slotMap(ctx context.Context) cluster.SlotMap {
	self := s.self()
	var m cluster.SlotMap
	if s.opts.Cluster != nil {
		m = s.opts.Cluster.SlotMap(ctx)
	} else {
		m = cluster.ComputeSlotMap(nil, 0, self)
	}
	if m.Self < 0 {
		m.Shards = append(m.Shards, cluster.Shard{Node: persist.Node{NodeInfo: self, Worker: -1}, First: 0, Last: -1})
		m.Self = len(m.Shards) - 1
	}
	return m
}

// hostPort splits a registered address for the replies: its host and
// port (0 when it has none).
func hostPort(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// cmdClusterSlots: CLUSTER SLOTS -> one entry per server holding slots:
// first slot, last slot, and the master [ip, port, node id, metadata]; no
// replicas. The server not in the registry's map (itself when its
// registration lapsed) is not listed.
func cmdClusterSlots(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	m := s.slotMap(s.ctx)
	n := 0
	for _, sh := range m.Shards {
		if sh.Last >= sh.First {
			n++
		}
	}
	conn.WriteArray(n)
	for _, sh := range m.Shards {
		if sh.Last < sh.First {
			continue
		}
		host, port := hostPort(sh.Addr)
		conn.WriteArray(3)
		conn.WriteInt(sh.First)
		conn.WriteInt(sh.Last)
		conn.WriteArray(4)
		conn.WriteBulkString(host)
		conn.WriteInt(port)
		conn.WriteBulkString(sh.Name())
		conn.WriteMap(0)
	}
}

// cmdClusterShards: CLUSTER SHARDS -> one shard per server, each a map of
// its slots (empty for a late server) and its one node: id, port (or
// tls-port), ip, endpoint, hostname when the address is a name, role,
// replication offset and health (online, or failed when late).
func cmdClusterShards(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	m := s.slotMap(s.ctx)
	conn.WriteArray(len(m.Shards))
	for _, sh := range m.Shards {
		conn.WriteMap(2)
		conn.WriteBulkString("slots")
		if sh.Last >= sh.First {
			conn.WriteArray(2)
			conn.WriteInt(sh.First)
			conn.WriteInt(sh.Last)
		} else {
			conn.WriteArray(0)
		}
		conn.WriteBulkString("nodes")
		conn.WriteArray(1)
		host, port := hostPort(sh.Addr)
		name := net.ParseIP(host) == nil
		conn.WriteMap(7 + boolInt(name))
		conn.WriteBulkString("id")
		conn.WriteBulkString(sh.Name())
		if s.opts.Conn.TLS != nil {
			conn.WriteBulkString("tls-port")
		} else {
			conn.WriteBulkString("port")
		}
		conn.WriteInt(port)
		conn.WriteBulkString("ip")
		conn.WriteBulkString(host)
		conn.WriteBulkString("endpoint")
		conn.WriteBulkString(host)
		if name {
			conn.WriteBulkString("hostname")
			conn.WriteBulkString(host)
		}
		conn.WriteBulkString("role")
		conn.WriteBulkString("master")
		conn.WriteBulkString("replication-offset")
		conn.WriteInt(0)
		conn.WriteBulkString("health")
		if sh.Late {
			conn.WriteBulkString("failed")
		} else {
			conn.WriteBulkString("online")
		}
	}
}

// cmdClusterNodes: CLUSTER NODES -> one line per server, as Redis writes
// them: "<id> <ip>:<port>@<bus port> <flags> - <ping sent> <pong received>
// <config epoch> <link state> <slots>". leaf has no cluster bus: the bus
// port is 0. A late server is "master,fail", disconnected, with no
// slots; the pong time of another server is its last renewal.
func cmdClusterNodes(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	m := s.slotMap(s.ctx)
	now := s.now()
	var b strings.Builder
	for i, sh := range m.Shards {
		host, port := hostPort(sh.Addr)
		flags := "master"
		if i == m.Self {
			flags = "myself,master"
		}
		link := "connected"
		if sh.Late {
			flags += ",fail"
			link = "disconnected"
		}
		var pong int64
		if i != m.Self {
			pong = now.Add(-sh.Age).UnixMilli()
		}
		fmt.Fprintf(&b, "%s %s:%d@0 %s - 0 %d 0 %s", sh.Name(), host, port, flags, pong, link)
		switch {
		case sh.Last > sh.First:
			fmt.Fprintf(&b, " %d-%d", sh.First, sh.Last)
		case sh.Last == sh.First:
			fmt.Fprintf(&b, " %d", sh.First)
		}
		b.WriteByte('\n')
	}
	conn.WriteVerbatim(b.String())
}

// cmdClusterInfo: CLUSTER INFO -> Redis's fields: every slot assigned and
// served (any server answers any tag), the known servers and those
// holding slots; leaf has no epochs and no bus messages.
func cmdClusterInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	m := s.slotMap(s.ctx)
	var b strings.Builder
	w := func(k string, v int) { b.WriteString(k + ":" + strconv.Itoa(v) + "\r\n") }
	b.WriteString("cluster_state:ok\r\n")
	w("cluster_slots_assigned", cluster.Slots)
	w("cluster_slots_ok", cluster.Slots)
	w("cluster_slots_pfail", 0)
	w("cluster_slots_fail", 0)
	w("cluster_known_nodes", len(m.Shards))
	w("cluster_size", m.Members())
	w("cluster_current_epoch", 0)
	w("cluster_my_epoch", 0)
	w("cluster_stats_messages_sent", 0)
	w("cluster_stats_messages_received", 0)
	w("total_cluster_links_buffer_limit_exceeded", 0)
	conn.WriteVerbatim(b.String())
}

// cmdClusterMyID: CLUSTER MYID -> this server's node name.
func cmdClusterMyID(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	conn.WriteBulkString(cluster.NodeName(s.self().ID))
}

// cmdClusterKeySlot: CLUSTER KEYSLOT key -> its hash slot.
func cmdClusterKeySlot(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	conn.WriteInt(cluster.KeySlot(args[2]))
}

// slotArg parses a slot number as Redis does: any integer, then checked
// against the range by the caller.
func (s *Server) slotArg(c *client, conn *resp.Conn, b []byte) (int64, bool) {
	n, ok := parseInt(b)
	if !ok {
		s.writeError(c, conn, errNotInteger)
	}
	return n, ok
}

// tagsInSlot are the names of the connection's database's tags in slot,
// in name order, at most limit of them (limit < 0: all).
func (s *Server) tagsInSlot(c *client, slot int, limit int64) []string {
	var out []string
	for _, name := range s.names(c.db) {
		if limit >= 0 && int64(len(out)) >= limit {
			break
		}
		if cluster.KeySlot([]byte(name)) == slot {
			out = append(out, name)
		}
	}
	return out
}

// cmdClusterCountKeys: CLUSTER COUNTKEYSINSLOT slot -> how many tags of
// the database hash to slot.
func cmdClusterCountKeys(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	slot, ok := s.slotArg(c, conn, args[2])
	if !ok {
		return
	}
	if slot < 0 || slot >= cluster.Slots {
		s.writeError(c, conn, errInvalidSlot)
		return
	}
	conn.WriteInt(len(s.tagsInSlot(c, int(slot), -1)))
}

// cmdClusterGetKeys: CLUSTER GETKEYSINSLOT slot count -> up to count
// names of the database's tags that hash to slot.
func cmdClusterGetKeys(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	slot, ok := s.slotArg(c, conn, args[2])
	if !ok {
		return
	}
	count, ok := s.slotArg(c, conn, args[3])
	if !ok {
		return
	}
	if count < 0 || slot < 0 || slot >= cluster.Slots {
		s.writeError(c, conn, errInvalidSlotCount)
		return
	}
	names := s.tagsInSlot(c, int(slot), count)
	conn.WriteArray(len(names))
	for _, n := range names {
		conn.WriteBulkString(n)
	}
}

// knownNode reports whether name is the node name of a server of the map.
func (s *Server) knownNode(name []byte) bool {
	for _, sh := range s.slotMap(s.ctx).Shards {
		if sh.Name() == string(name) {
			return true
		}
	}
	return false
}

// cmdClusterReplicas: CLUSTER REPLICAS (SLAVES) node -> no replicas: leaf
// servers replicate nothing, the store holds the state.
func cmdClusterReplicas(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	if !s.knownNode(args[2]) {
		s.writeError(c, conn, fmt.Sprintf(errUnknownNode, cstr(args[2])))
		return
	}
	conn.WriteArray(0)
}

// cmdClusterFailureReports: CLUSTER COUNT-FAILURE-REPORTS node -> 0: no
// server reports on another, the registry's heartbeats decide.
func cmdClusterFailureReports(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	if !s.knownNode(args[2]) {
		s.writeError(c, conn, fmt.Sprintf(errUnknownNode, cstr(args[2])))
		return
	}
	conn.WriteInt(0)
}

// cmdClusterLinks: CLUSTER LINKS -> none: leaf has no cluster bus.
func cmdClusterLinks(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	conn.WriteArray(0)
}

func cmdClusterHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	writeHelp(conn, clusterHelp)
}

// cmdClusterFixed: the commands that change a Redis Cluster's slots or
// nodes: refused, since leaf's map follows the registry's live servers.
func cmdClusterFixed(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	s.writeError(c, conn, fmt.Sprintf(errClusterFixed, strings.ToUpper(string(cstr(args[1])))))
}

// cmdClusterOK: READONLY, READWRITE, ASKING -> OK: every server answers
// every tag, reads and writes alike.
func cmdClusterOK(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.clusterOff(c, conn) {
		return
	}
	conn.WriteString("OK")
}

// infoClusterEnabled is INFO's cluster_enabled: 1 with the face on, as
// redis-server in cluster mode; cluster clients (redis-py) check it.
func (s *Server) infoClusterEnabled() int { return boolInt(s.opts.RedisCluster) }
