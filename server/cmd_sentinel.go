package server

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/resp"
)

// The Sentinel face: every leaf server is also a Redis Sentinel whose
// masters are the live servers, so that sentinel clients (go-redis
// FailoverClient, redis-py Sentinel, ioredis with sentinels, Lettuce,
// Jedis) take IDs naming any leaf server as their sentinel. SENTINEL
// GET-MASTER-ADDR-BY-NAME answers any master name with a live server:
// this one while its lease is current, else the first live server of the
// slot map. The other servers are its fellow sentinels (SENTINELS); there
// are no replicas. A client subscribed to +switch-master is told when the
// answer for a name it was given changes (cmd_pubsub.go). ROLE answers
// master, as the server the client is sent to must.

func registerSentinel(t table) {
	sub := func(name string, arity int, fn handler, summary, complex string) *command {
		return &command{name: name, arity: arity, fn: fn, flags: []string{"admin"}, acl: []string{"admin", "slow", "dangerous"},
			summary: summary, since: "2.8.4", group: "sentinel", complex: complex}
	}
	fixed := func(name string, arity int, summary string) *command {
		return sub(name, arity, cmdSentinelFixed, summary, "O(1)")
	}
	t.add(
		(&command{
			name: "sentinel", arity: -2, flags: []string{"admin"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "A container for Redis Sentinel commands", since: "2.8.4", group: "sentinel", complex: "Depends on subcommand.",
			help: sentinelHelp,
		}).sub(
			sub("get-master-addr-by-name", 3, cmdSentinelMasterAddr, "Returns the port and address of a master instance", "O(1)"),
			sub("masters", 2, cmdSentinelMasters, "Returns a list of monitored masters", "O(N) where N is the number of masters"),
			sub("master", 3, cmdSentinelMaster, "Returns the state of a master instance", "O(1)"),
			sub("sentinels", 3, cmdSentinelSentinels, "Returns a list of Sentinel instances", "O(N) where N is the number of Sentinels"),
			sub("replicas", 3, cmdSentinelReplicas, "Returns a list of the monitored replicas", "O(N) where N is the number of replicas"),
			sub("slaves", 3, cmdSentinelReplicas, "Returns a list of the monitored replicas", "O(N) where N is the number of replicas"),
			sub("ckquorum", 3, cmdSentinelCKQuorum, "Checks for a Redis Sentinel quorum", "O(1)"),
			sub("myid", 2, cmdSentinelMyID, "Returns the Redis Sentinel instance ID", "O(1)"),
			sub("failover", 3, cmdSentinelFailover, "Forces a Redis Sentinel failover", "O(1)"),
			sub("help", 2, cmdSentinelHelp, "Returns helpful text about the different subcommands", "O(1)"),
			fixed("config", -3, "Configures Redis Sentinel"),
			fixed("debug", -2, "Lists or updates the current configurable parameters of Redis Sentinel"),
			fixed("flushconfig", 2, "Rewrites the Redis Sentinel configuration file"),
			fixed("info-cache", -3, "Returns the cached INFO replies from the deployment's instances"),
			fixed("is-master-down-by-addr", 6, "Determines whether a master instance is down"),
			fixed("monitor", 6, "Starts monitoring"),
			fixed("pending-scripts", 2, "Returns information about pending scripts for Redis Sentinel"),
			fixed("remove", 3, "Stops monitoring"),
			fixed("reset", 3, "Resets Redis masters by name matching a pattern"),
			fixed("set", -5, "Changes the configuration of a monitored Redis master"),
			fixed("simulate-failure", -3, "Simulates failover scenarios"),
		),
		&command{name: "role", arity: 1, fn: cmdRole, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"admin", "fast", "dangerous"},
			summary: "Returns the replication role", since: "2.8.12", group: "server", complex: "O(1)"},
	)
}

// sentinelHelp is SENTINEL HELP: redis-sentinel 7.0's lines.
var sentinelHelp = []string{
	"SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CKQUORUM <master-name>",
	"    Check if the current Sentinel configuration is able to reach the quorum",
	"    needed to failover a master and the majority needed to authorize the",
	"    failover.",
	"CONFIG SET <param> <value>",
	"    Set a global Sentinel configuration parameter.",
	"CONFIG GET <param>",
	"    Get global Sentinel configuration parameter.",
	"DEBUG [<param> <value> ...]",
	"    Show a list of configurable time parameters and their values (milliseconds).",
	"    Or update current configurable parameters values (one or more).",
	"GET-MASTER-ADDR-BY-NAME <master-name>",
	"    Return the ip and port number of the master with that name.",
	"FAILOVER <master-name>",
	"    Manually failover a master node without asking for agreement from other",
	"    Sentinels",
	"FLUSHCONFIG",
	"    Force Sentinel to rewrite its configuration on disk, including the current",
	"    Sentinel state.",
	"INFO-CACHE <master-name>",
	"    Return last cached INFO output from masters and all its replicas.",
	"IS-MASTER-DOWN-BY-ADDR <ip> <port> <current-epoch> <runid>",
	"    Check if the master specified by ip:port is down from current Sentinel's",
	"    point of view.",
	"MASTER <master-name>",
	"    Show the state and info of the specified master.",
	"MASTERS",
	"    Show a list of monitored masters and their state.",
	"MONITOR <name> <ip> <port> <quorum>",
	"    Start monitoring a new master with the specified name, ip, port and quorum.",
	"MYID",
	"    Return the ID of the Sentinel instance.",
	"PENDING-SCRIPTS",
	"    Get pending scripts information.",
	"REMOVE <master-name>",
	"    Remove master from Sentinel's monitor list.",
	"REPLICAS <master-name>",
	"    Show a list of replicas for this master and their state.",
	"RESET <pattern>",
	"    Reset masters for specific master name matching this pattern.",
	"SENTINELS <master-name>",
	"    Show a list of Sentinel instances for this master and their state.",
	"SET <master-name> <option> <value> [<option> <value> ...]",
	"    Set configuration parameters for certain masters.",
	"SIMULATE-FAILURE [CRASH-AFTER-ELECTION] [CRASH-AFTER-PROMOTION] [HELP]",
	"    Simulate a Sentinel crash.",
	"HELP",
	"    Prints this help.",
}

// maxGivenNames bounds the master names the server remembers having
// answered, for +switch-master.
const maxGivenNames = 1024

// givenMasters are the addresses the server gave for each master name
// (cmd_pubsub.go tells subscribers when one changes).
type givenMasters struct {
	mu    sync.Mutex
	addrs map[string]string
}

// record remembers that name was answered addr; beyond maxGivenNames new
// names are not remembered.
func (g *givenMasters) record(name, addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.addrs == nil {
		g.addrs = map[string]string{}
	}
	if _, ok := g.addrs[name]; ok || len(g.addrs) < maxGivenNames {
		g.addrs[name] = addr
	}
}

// serving reports whether this server serves its cached IDs: its lease
// is current, or it runs without a registry.
func (s *Server) serving() bool {
	if s.opts.Cluster == nil {
		return true
	}
	st := s.opts.Cluster.Status()
	return !st.Enabled || st.Serving
}

// master is the server a sentinel client is sent to, whatever the master
// name: this one while it serves, else the first server of the slot map
// that holds slots, else this one all the same.
func (s *Server) master() cluster.Shard {
	m := s.slotMap(s.ctx)
	if s.serving() {
		return m.Shards[m.Self]
	}
	for i, sh := range m.Shards {
		if i != m.Self && !sh.Late && sh.Last >= sh.First {
			return sh
		}
	}
	return m.Shards[m.Self]
}

// DefaultSentinelMaster is the master name SENTINEL MASTERS lists when
// Options.SentinelMasters is empty: the name Redis's own examples use.
const DefaultSentinelMaster = "mymaster"

// masterNames are the names SENTINEL MASTERS lists.
func (s *Server) masterNames() []string {
	if len(s.opts.SentinelMasters) == 0 {
		return []string{DefaultSentinelMaster}
	}
	return s.opts.SentinelMasters
}

// cmdSentinelMasterAddr: SENTINEL GET-MASTER-ADDR-BY-NAME name -> [ip,
// port] of a live server, for any name.
func cmdSentinelMasterAddr(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := s.master()
	s.given.record(string(args[2]), m.Addr)
	host, port := hostPort(m.Addr)
	conn.WriteArray(2)
	conn.WriteBulkString(host)
	conn.WriteBulkString(strconv.Itoa(port))
}

// cmdSentinelMasters: SENTINEL MASTERS -> the state of each name of
// server.sentinel_masters, each given the same server.
func cmdSentinelMasters(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	names := s.masterNames()
	m := s.master()
	others := s.otherSentinels()
	conn.WriteArray(len(names))
	for _, name := range names {
		s.writeMasterState(conn, name, m, len(others))
	}
}

// cmdSentinelMaster: SENTINEL MASTER name -> its state, for any name.
func cmdSentinelMaster(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := s.master()
	s.given.record(string(args[2]), m.Addr)
	s.writeMasterState(conn, string(args[2]), m, len(s.otherSentinels()))
}

// writeMasterState writes a master's state as Redis Sentinel does: 20
// fields, every value a string. The times are the server's heartbeat age
// in the registry; down-after-milliseconds is the node timeout, after
// which a server that stopped renewing leaves the slot map.
func (s *Server) writeMasterState(conn *resp.Conn, name string, m cluster.Shard, others int) {
	host, port := hostPort(m.Addr)
	age := strconv.FormatInt(m.Age.Milliseconds(), 10)
	conn.WriteMap(20)
	for _, kv := range [...][2]string{
		{"name", name},
		{"ip", host},
		{"port", strconv.Itoa(port)},
		{"runid", m.Name()},
		{"flags", "master"},
		{"link-pending-commands", "0"},
		{"link-refcount", "1"},
		{"last-ping-sent", "0"},
		{"last-ok-ping-reply", age},
		{"last-ping-reply", age},
		{"down-after-milliseconds", strconv.FormatInt(s.nodeTimeout().Milliseconds(), 10)},
		{"info-refresh", age},
		{"role-reported", "master"},
		{"role-reported-time", strconv.FormatInt(s.now().Sub(m.Started).Milliseconds(), 10)},
		{"config-epoch", "0"},
		{"num-slaves", "0"},
		{"num-other-sentinels", strconv.Itoa(others)},
		{"quorum", "1"},
		{"failover-timeout", strconv.FormatInt(s.nodeTimeout().Milliseconds(), 10)},
		{"parallel-syncs", "1"},
	} {
		conn.WriteBulkString(kv[0])
		conn.WriteBulkString(kv[1])
	}
}

// nodeTimeout is the time after which a server that stopped renewing
// leaves the slot map; 0 without a registry.
func (s *Server) nodeTimeout() time.Duration {
	if s.opts.Cluster == nil {
		return 0
	}
	return s.opts.Cluster.Status().NodeTimeout
}

// otherSentinels are the other servers of the slot map that hold slots.
func (s *Server) otherSentinels() []cluster.Shard {
	m := s.slotMap(s.ctx)
	var out []cluster.Shard
	for i, sh := range m.Shards {
		if i != m.Self && !sh.Late && sh.Last >= sh.First {
			out = append(out, sh)
		}
	}
	return out
}

// cmdSentinelSentinels: SENTINEL SENTINELS name -> the other live servers,
// as Redis Sentinel lists its fellow sentinels: 14 fields each.
func cmdSentinelSentinels(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	others := s.otherSentinels()
	timeout := strconv.FormatInt(s.nodeTimeout().Milliseconds(), 10)
	conn.WriteArray(len(others))
	for _, sh := range others {
		host, port := hostPort(sh.Addr)
		age := strconv.FormatInt(sh.Age.Milliseconds(), 10)
		conn.WriteMap(14)
		for _, kv := range [...][2]string{
			{"name", sh.Name()},
			{"ip", host},
			{"port", strconv.Itoa(port)},
			{"runid", sh.Name()},
			{"flags", "sentinel"},
			{"link-pending-commands", "0"},
			{"link-refcount", "1"},
			{"last-ping-sent", "0"},
			{"last-ok-ping-reply", age},
			{"last-ping-reply", age},
			{"down-after-milliseconds", timeout},
			{"last-hello-message", age},
			{"voted-leader", "?"},
			{"voted-leader-epoch", "0"},
		} {
			conn.WriteBulkString(kv[0])
			conn.WriteBulkString(kv[1])
		}
	}
}

// cmdSentinelReplicas: SENTINEL REPLICAS (SLAVES) name -> none: leaf
// servers replicate nothing.
func cmdSentinelReplicas(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteArray(0)
}

// cmdSentinelCKQuorum: SENTINEL CKQUORUM name -> Redis's OK with the
// number of live servers, this one included.
func cmdSentinelCKQuorum(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	n := len(s.otherSentinels()) + 1
	conn.WriteString("OK " + strconv.Itoa(n) + " usable Sentinels. Quorum and failover authorization can be reached")
}

// cmdSentinelMyID: SENTINEL MYID -> this server's node name, as CLUSTER
// MYID.
func cmdSentinelMyID(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteBulkString(cluster.NodeName(s.self().ID))
}

// cmdSentinelFailover: SENTINEL FAILOVER name -> Redis's answer for a
// master without replicas: there is nothing to promote, and a failed
// server leaves the map on its own.
func cmdSentinelFailover(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, errNoGoodReplica)
}

func cmdSentinelHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, sentinelHelp)
}

// cmdSentinelFixed: the commands that configure a Sentinel: refused.
func cmdSentinelFixed(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, fmt.Sprintf(errSentinelFixed, strings.ToUpper(string(cstr(args[1])))))
}

// cmdRole: ROLE -> [master, 0, []], as a Redis master without replicas:
// every leaf server is one.
func cmdRole(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteArray(3)
	conn.WriteBulkString("master")
	conn.WriteInt(0)
	conn.WriteArray(0)
}
