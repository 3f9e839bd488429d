package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-id/leaf/persist/durability"
)

// replicationDesc is leaf_store_replication_safe: 1 when the durability
// check found that a failover of the store's database loses no
// acknowledged commit, 0 when it can (durability="unsafe") or the
// database does not show enough to tell (durability="unknown").
var replicationDesc = prometheus.NewDesc("leaf_store_replication_safe",
	"1 when a failover of the store's database loses no acknowledged commit, as the durability check last found it; "+
		"0 when it can (durability=\"unsafe\": asynchronous replicas, no synchronous commit) or the database does not tell (\"unknown\"). "+
		"kind is how it replicates: single, galera, mysql_replication, postgres_streaming, raft, unknown.",
	[]string{"kind", "durability"}, nil)

// replicationCollector exports the last result of the durability check.
type replicationCollector struct{ last func() durability.Replication }

// Describe implements prometheus.Collector.
func (c replicationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicationDesc }

// Collect implements prometheus.Collector.
func (c replicationCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.last()
	kind := r.Kind
	if kind == "" {
		kind = durability.ReplicationUnknown
	}
	v := 0.0
	if r.Safe() {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(replicationDesc, prometheus.GaugeValue, v, kind, r.Safety.String())
}
