package httpapi

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
)

// Cluster is what the status page and the metrics read of this server's
// node in the cluster registry: *cluster.Node implements it.
type Cluster interface {
	// Status is the node's state, from memory.
	Status() cluster.Status
	// RecentNodes lists the live servers, at most a heartbeat old.
	RecentNodes(ctx context.Context) []persist.Node
}

var _ Cluster = (*cluster.Node)(nil)

// clusterView is the cluster section of the status page.
type clusterView struct {
	cluster.Status
	Nodes []nodeView
}

// nodeView is one live server of the status page.
type nodeView struct {
	persist.Node
	Self bool
}

func (h *handler) clusterView(ctx context.Context) *clusterView {
	if h.opts.Cluster == nil {
		return nil
	}
	v := &clusterView{Status: h.opts.Cluster.Status()}
	if !v.Enabled {
		return v
	}
	for _, n := range h.opts.Cluster.RecentNodes(ctx) {
		v.Nodes = append(v.Nodes, nodeView{Node: n, Self: n.ID == v.Node.ID})
	}
	return v
}

// clusterCollector exports the registry: this server's lease and
// Snowflake generator, and each live server's heartbeat age.
type clusterCollector struct {
	c Cluster

	enabled, leaseOK, leaseLeft, beats, lapses, applied, unconfirmed, drops *prometheus.Desc
	nodes, age, worker, clockWaits, clockRefusals, seqWaits                 *prometheus.Desc
}

func newClusterCollector(c Cluster) *clusterCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &clusterCollector{
		c:       c,
		enabled: desc("leaf_cluster_enabled", "1 when the store keeps the cluster registry, 0 when this server runs alone."),
		leaseOK: desc("leaf_cluster_lease_ok",
			"1 while this server's lease is current; 0 once it lapsed unrenewed: then it serves no cached ID and no Snowflake ID."),
		leaseLeft: desc("leaf_cluster_lease_left_seconds", "Until this server's lease lapses unless renewed."),
		beats: desc("leaf_cluster_heartbeats_total", "Heartbeats (renewal and reading of the change log), by result (ok, error).",
			"result"),
		lapses:      desc("leaf_cluster_lease_lapses_total", "Times this server's lease lapsed unrenewed."),
		applied:     desc("leaf_cluster_changes_applied_total", "Changes made through other servers (floors, steps) applied here."),
		unconfirmed: desc("leaf_cluster_changes_unconfirmed_total", "Changes made here that not every live server confirmed in time."),
		drops:       desc("leaf_cluster_cache_drops_total", "Times every cached ID was dropped: changes missed could not be read."),
		nodes:       desc("leaf_cluster_nodes", "Live servers sharing the store."),
		age: desc("leaf_cluster_node_heartbeat_age_seconds", "Since each live server's last heartbeat, on the store's clock.",
			"node", "addr", "worker_id"),
		worker:        desc("leaf_snowflake_worker_id", "This server's Snowflake worker id; -1 when it holds none."),
		clockWaits:    desc("leaf_snowflake_clock_back_waits_total", "Snowflake requests that waited for a clock behind the last ID."),
		clockRefusals: desc("leaf_snowflake_clock_back_refusals_total", "Snowflake requests refused: the clock was behind the last ID by more than cluster.max_clock_back."),
		seqWaits:      desc("leaf_snowflake_sequence_waits_total", "Snowflake requests that waited for the next time unit, this one's sequence used up."),
	}
}

// Describe implements prometheus.Collector.
func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cc.enabled, cc.leaseOK, cc.leaseLeft, cc.beats, cc.lapses, cc.applied, cc.unconfirmed,
		cc.drops, cc.nodes, cc.age, cc.worker, cc.clockWaits, cc.clockRefusals, cc.seqWaits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(cc.enabled, b2f(st.Enabled))
	gauge(cc.worker, float64(st.Worker))
	counter(cc.clockWaits, st.Snowflake.ClockWaits)
	counter(cc.clockRefusals, st.Snowflake.ClockRefusals)
	counter(cc.seqWaits, st.Snowflake.SeqWaits)
	if !st.Enabled {
		return
	}
	gauge(cc.leaseOK, b2f(st.Serving))
	gauge(cc.leaseLeft, st.LeaseLeft.Seconds())
	counter(cc.beats, st.Heartbeats, "ok")
	counter(cc.beats, st.HeartbeatFailures, "error")
	counter(cc.lapses, st.Lapses)
	counter(cc.applied, st.Changes)
	counter(cc.unconfirmed, st.Unconfirmed)
	counter(cc.drops, st.Drops)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes := cc.c.RecentNodes(ctx)
	gauge(cc.nodes, float64(len(nodes)))
	for _, n := range nodes {
		gauge(cc.age, n.Age.Seconds(), n.ID, n.Addr, strconv.Itoa(n.Worker))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
