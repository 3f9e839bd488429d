package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/resp"
)

// The servers sharing a store: LEAF.NODES, INFO's cluster section, and the
// confirmation of LEAF.FLOOR, SET and LEAF.STEP by every live server.

// Cluster is what the server needs of this server's node in the cluster
// registry: *cluster.Node implements it.
type Cluster interface {
	// Announce tells every live server of a change in effect in the store
	// and on this server, and waits for their confirmation.
	Announce(ctx context.Context, kind, tag string, value int64) error
	// Nodes lists the live servers, from the store.
	Nodes(ctx context.Context) ([]persist.Node, error)
	// RecentNodes is Nodes at most a heartbeat old.
	RecentNodes(ctx context.Context) []persist.Node
	// Status is the node's state, from memory.
	Status() cluster.Status
	// SlotMap is the Redis Cluster face's map of the live servers, at
	// most a heartbeat old.
	SlotMap(ctx context.Context) cluster.SlotMap
}

var _ Cluster = (*cluster.Node)(nil)

func registerCluster(t table) {
	t.add(&command{
		name: "leaf.nodes", arity: 1, fn: cmdLeafNodes,
		flags: []string{"readonly"}, acl: []string{"read", "slow"},
		summary: "Lists the live servers sharing the store: id, address, Snowflake worker id, heartbeat age",
		since:   "1.0.0", group: "server", complex: "O(N) where N is the number of live servers",
	})
}

// nodeFields is the number of field/value pairs LEAF.NODES writes per server.
const nodeFields = 10

// cmdLeafNodes: LEAF.NODES -> one entry per live server, ordered by id,
// each field/value pairs (a map in RESP3): id, addr, version, started
// (unix ms), worker_id (-1: none), heartbeat_age_ms, lease_left_ms,
// applied (the last change it applied), self (1 for this server) and
// store_id, the identity of the store the list was read from ("" when
// unknown): servers that list each other share it by definition, and
// servers meant to share a store whose lists differ show here that they
// do not.
func cmdLeafNodes(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.opts.Cluster == nil {
		s.writeError(c, conn, errClusterOff)
		return
	}
	nodes, err := s.opts.Cluster.Nodes(s.ctx)
	switch {
	case errors.Is(err, cluster.ErrOff):
		// err says "cluster features are off: " and why.
		s.writeError(c, conn, "ERR "+sanitize(err.Error())+hintClusterOff)
		return
	case err != nil:
		s.writeError(c, conn, fmt.Sprintf(errRegistry, sanitize(err.Error())))
		return
	}
	self := s.opts.Cluster.Status().Node.ID
	storeID := s.storeID()
	conn.WriteArray(len(nodes))
	for _, n := range nodes {
		conn.WriteMap(nodeFields)
		conn.WriteBulkString("id")
		conn.WriteBulkString(n.ID)
		conn.WriteBulkString("addr")
		conn.WriteBulkString(n.Addr)
		conn.WriteBulkString("version")
		conn.WriteBulkString(n.Version)
		conn.WriteBulkString("started")
		conn.WriteInt64(n.Started.UnixMilli())
		conn.WriteBulkString("worker_id")
		conn.WriteInt(n.Worker)
		conn.WriteBulkString("heartbeat_age_ms")
		conn.WriteInt64(n.Age.Milliseconds())
		conn.WriteBulkString("lease_left_ms")
		conn.WriteInt64(n.Expires.Milliseconds())
		conn.WriteBulkString("applied")
		conn.WriteInt64(n.Seen)
		conn.WriteBulkString("self")
		writeBool(conn, n.ID == self)
		conn.WriteBulkString("store_id")
		conn.WriteBulkString(storeID)
	}
}

// announce has every live server confirm a change this server made (a
// floor, a step); it writes the error and reports false when they did not.
// what names the change for the error, "floor 1000".
func (s *Server) announce(c *client, conn *resp.Conn, kind string, tag []byte, value int64, what string) bool {
	if s.opts.Cluster == nil {
		return true
	}
	err := s.opts.Cluster.Announce(s.ctx, kind, string(tag), value)
	if err == nil {
		return true
	}
	if s.ctx.Err() != nil {
		s.writeError(c, conn, errShuttingDown)
		return false
	}
	s.writeError(c, conn, fmt.Sprintf(errUnconfirmed, what, tag, sanitize(err.Error())))
	return false
}

// infoCluster writes INFO's cluster section: cluster_enabled as Redis
// (1 with the Redis Cluster face on: cluster clients check it), then
// leaf's registry: this server's lease and worker id, and one line per
// live server, as Redis lists replicas.
func (s *Server) infoCluster(line func(string, any)) {
	line("cluster_enabled", s.infoClusterEnabled())
	if s.opts.Cluster == nil {
		line("leaf_cluster", 0)
		return
	}
	st := s.opts.Cluster.Status()
	line("leaf_cluster", st.Enabled)
	if !st.Enabled {
		line("leaf_cluster_off", st.Off)
		return
	}
	line("node_id", st.Node.ID)
	line("node_name", cluster.NodeName(st.Node.ID))
	line("node_addr", st.Node.Addr)
	line("node_serving", st.Serving)
	line("lease_left_ms", st.LeaseLeft.Milliseconds())
	line("heartbeat_ms", st.Heartbeat.Milliseconds())
	line("lease_ms", st.Lease.Milliseconds())
	line("ack_timeout_ms", st.AckTimeout.Milliseconds())
	line("node_timeout_ms", st.NodeTimeout.Milliseconds())
	line("heartbeats", st.Heartbeats)
	line("heartbeat_failures", st.HeartbeatFailures)
	line("heartbeat_last_error", st.LastError)
	line("lease_lapses", st.Lapses)
	line("changes_applied", st.Changes)
	line("change_applied_last", st.Applied)
	line("changes_unconfirmed", st.Unconfirmed)
	line("cache_drops", st.Drops)
	line("snowflake_layout", st.Layout.String())
	line("snowflake_worker_id", st.Worker)
	line("snowflake_no_worker", st.NoWorker)
	line("snowflake_clock_back_waits", st.Snowflake.ClockWaits)
	line("snowflake_clock_back_refusals", st.Snowflake.ClockRefusals)
	line("snowflake_sequence_waits", st.Snowflake.SeqWaits)
	nodes := s.opts.Cluster.RecentNodes(s.ctx)
	line("nodes", len(nodes))
	for i, n := range nodes {
		var b strings.Builder
		fmt.Fprintf(&b, "id=%s,addr=%s,worker_id=%d,heartbeat_age_ms=%d,applied=%d,version=%s,self=%d",
			n.ID, n.Addr, n.Worker, n.Age.Milliseconds(), n.Seen, n.Version, boolInt(n.ID == st.Node.ID))
		line("node"+strconv.Itoa(i), b.String())
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// modeName is a tag's mode as LEAF.INFO shows it.
func modeName(mode string) string {
	if mode == "" {
		return "segment"
	}
	return mode
}
