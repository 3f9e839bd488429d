package httpapi

import (
	"errors"
	"math"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
)

// OtherTag is the tag label of the series that sum the tags beyond
// Options.MetricsMaxTags. A tag really named "_other" is counted there too.
const OtherTag = "_other"

// StoreLatency is the histogram leaf_store_latency_seconds of the database
// calls that take a range, labelled result="ok" when the database answered
// (a missing row included) and "error" when it did not. Create it before
// the allocator, pass its Observe as segment.Options.Observe, and give it
// to New in Options.StoreLatency.
type StoreLatency struct {
	vec      *prometheus.HistogramVec
	ok, fail prometheus.Observer
}

// NewStoreLatency returns an empty histogram.
func NewStoreLatency() *StoreLatency {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "leaf_store_latency_seconds",
		Help: "Duration of the database calls that reserve a range of IDs, by result (ok: the database answered).",
		// From a local SQLite (sub-millisecond) to load_timeout and beyond.
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"result"})
	return &StoreLatency{vec: vec, ok: vec.WithLabelValues("ok"), fail: vec.WithLabelValues("error")}
}

// Observe records one database call; it is segment.Options.Observe.
func (l *StoreLatency) Observe(d time.Duration, err error) {
	if err == nil || errors.Is(err, persist.ErrNotFound) {
		l.ok.Observe(d.Seconds())
		return
	}
	l.fail.Observe(d.Seconds())
}

// metricsHandler builds the private registry (leaf's collector, the
// store latency histogram, Go's and the process's collectors) and its
// handler.
func (h *handler) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newCollector(h.alloc, h.opts),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if h.opts.StoreLatency != nil {
		reg.MustRegister(h.opts.StoreLatency.vec)
	}
	counter := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	reg.MustRegister(
		counter("leaf_http_auth_failures_total", "HTTP requests refused for a missing or wrong password.", h.g.failures.Load),
		counter("leaf_tags_created_total", "Tags this server created (a first INCR, LEAF.CREATE, a floor of a new tag, the HTTP API).",
			func() int64 { return h.alloc.CreateStats().Created }),
		counter("leaf_tag_creates_refused_total",
			"Tag creations refused: segment.max_tags reached, or the client may not create tags (segment.auto_create, segment.create_rate, http.auto_create).",
			func() int64 { return h.alloc.CreateStats().Refused }),
	)
	if h.opts.Cluster != nil {
		reg.MustRegister(newClusterCollector(h.opts.Cluster))
	}
	if h.opts.Replication != nil {
		reg.MustRegister(replicationCollector{h.opts.Replication})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{h},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg, // promhttp_metric_handler_errors_total
	})
}

// slogPrinter sends promhttp's errors to the handler's logger.
type slogPrinter struct{ h *handler }

func (p slogPrinter) Println(v ...any) {
	p.h.log.Warn("metrics", "err", v)
}

// collector is a prometheus.Collector that reads the allocator's and the
// server's snapshots at scrape time: nothing is counted on the hot path.
type collector struct {
	alloc   *segment.Allocator
	srv     ServerStats
	maxTags int
	// leaf_build_info's labels: version, revision, goversion.
	buildLabels [3]string

	issued, skipped, loads, step, runwayIDs, runwaySecs, guardTrips, guardRepairs *prometheus.Desc
	waits, storeUp, tags, queued, clients, commands, build                        *prometheus.Desc
	awaySince, outages, probes, refused, retries, ambiguous, rounds               *prometheus.Desc

	// own are the tags with series of their own. A tag keeps its place
	// once it has one and the others stay in _other, so no series, not
	// even _other's sums, ever goes down because a tag moved.
	mu  sync.Mutex
	own map[string]struct{}
}

func newCollector(alloc *segment.Allocator, opts Options) *collector {
	tag := []string{"tag"}
	return &collector{
		alloc:       alloc,
		srv:         opts.Server,
		maxTags:     opts.MetricsMaxTags,
		buildLabels: [3]string{opts.Version, opts.Revision, runtime.Version()},
		own:         map[string]struct{}{},

		issued: prometheus.NewDesc("leaf_ids_issued_total",
			"IDs handed out by this process, per tag (INCR, INCRBY and the HTTP API).", tag, nil),
		skipped: prometheus.NewDesc("leaf_ids_skipped_total",
			"Cached IDs a floor (LEAF.FLOOR, SET) skipped, per tag: reserved, never handed out.", tag, nil),
		loads: prometheus.NewDesc("leaf_segment_loads_total",
			"Segments loaded from the database per tag, by result (ok, error).", []string{"tag", "result"}, nil),
		step: prometheus.NewDesc("leaf_segment_step",
			"Adaptive step of the tag's last load (the largest one for _other).", tag, nil),
		runwayIDs: prometheus.NewDesc("leaf_runway_ids",
			"IDs cached in memory per tag: the rest of the current segment plus the next one.", tag, nil),
		runwaySecs: prometheus.NewDesc("leaf_runway_seconds",
			"How long the cached IDs last at the tag's recent rate; +Inf when idle (the shortest one for _other).", tag, nil),
		guardTrips: prometheus.NewDesc("leaf_guard_trips_total",
			"Ranges refused because the database answered below IDs already reserved, per tag.", tag, nil),
		guardRepairs: prometheus.NewDesc("leaf_guard_repairs_total",
			"Ranges the persistent guard (leaf_guard) moved above IDs handed out before, because the row had gone below them, per tag.", tag, nil),
		waits: prometheus.NewDesc("leaf_store_waits_total",
			"Requests that found both segments empty and waited on the database.", nil, nil),
		storeUp: prometheus.NewDesc("leaf_store_up",
			"0 while the database is away (a call failed and no probe has reached it since), 1 otherwise.", nil, nil),
		awaySince: prometheus.NewDesc("leaf_store_away_since_seconds",
			"Unix time when the database went away, 0 while it is up.", nil, nil),
		outages: prometheus.NewDesc("leaf_store_outages_total",
			"Times the database went away.", nil, nil),
		probes: prometheus.NewDesc("leaf_store_probes_total",
			"Calls made to learn whether a database that is away is back, one at a time.", nil, nil),
		refused: prometheus.NewDesc("leaf_store_refused_total",
			"Requests answered TRYAGAIN at once because the database was away.", nil, nil),
		retries: prometheus.NewDesc("leaf_store_retries_total",
			"Segment loads the database rolled back (serialization failures, deadlocks, lock waits) and that ran again.", nil, nil),
		ambiguous: prometheus.NewDesc("leaf_store_ambiguous_total",
			"Segment loads whose commit was left unknown (the connection lost once it was sent): their ranges are never served.", nil, nil),
		rounds: prometheus.NewDesc("leaf_store_load_rounds_total",
			"Store round trips that took segments: each takes every load queued at once, in one transaction.", nil, nil),
		tags: prometheus.NewDesc("leaf_tags",
			"Tags known to this process.", nil, nil),
		queued: prometheus.NewDesc("leaf_queued_loads",
			"Segment loads waiting for a loader.", nil, nil),
		clients: prometheus.NewDesc("leaf_connected_clients",
			"Open Redis-protocol connections.", nil, nil),
		commands: prometheus.NewDesc("leaf_commands_total",
			"Redis commands answered, by command and result (ok, error); unknown names count as command=\"unknown\".",
			[]string{"command", "result"}, nil),
		build: prometheus.NewDesc("leaf_build_info",
			"Always 1; the labels are leaf's version, the VCS revision it was built from (empty when unknown) and its Go version.",
			[]string{"version", "revision", "goversion"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.issued, c.skipped, c.loads, c.step, c.runwayIDs, c.runwaySecs, c.guardTrips, c.guardRepairs,
		c.waits, c.storeUp, c.awaySince, c.outages, c.probes, c.refused, c.retries, c.ambiguous, c.rounds, c.tags, c.queued, c.build,
	} {
		ch <- d
	}
	if c.srv != nil {
		ch <- c.clients
		ch <- c.commands
	}
}

// tagSeries are the values of one tag's series, or the sums of _other.
type tagSeries struct {
	issued, skipped, loads, failures, guardTrips, guardRepairs int64
	step, runwayIDs                                            int64
	runwaySecs                                                 float64
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.alloc.Stats()

	var other tagSeries
	other.runwaySecs = math.Inf(1)
	hasOther := false
	c.mu.Lock()
	// One tag at a time, in name order (the first tags by name get the
	// series of their own): a scrape holds no copy of every tag.
	c.alloc.EachTag(true, func(in segment.TagInfo) bool {
		s := tagSeries{
			issued: in.Issued, skipped: in.Skipped, loads: in.Loads, failures: in.Failures, guardTrips: in.GuardTrips, guardRepairs: in.GuardRepairs,
			step: in.Step, runwayIDs: in.RunwayIDs, runwaySecs: in.RunwaySeconds,
		}
		if c.ownSeries(in.Name) {
			c.emitTag(ch, in.Name, s)
			return true
		}
		hasOther = true
		other.issued += s.issued
		other.skipped += s.skipped
		other.loads += s.loads
		other.failures += s.failures
		other.guardTrips += s.guardTrips
		other.guardRepairs += s.guardRepairs
		other.runwayIDs += s.runwayIDs
		other.step = max(other.step, s.step)
		if in.Init {
			other.runwaySecs = min(other.runwaySecs, s.runwaySecs)
		}
		return true
	})
	c.mu.Unlock()
	if hasOther {
		c.emitTag(ch, OtherTag, other)
	}

	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(st.Waits))
	up := 0.0
	if st.StoreOK {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.storeUp, prometheus.GaugeValue, up)
	since := 0.0
	if !st.AwaySince.IsZero() {
		since = float64(st.AwaySince.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.awaySince, prometheus.GaugeValue, since)
	ch <- prometheus.MustNewConstMetric(c.outages, prometheus.CounterValue, float64(st.Outages))
	ch <- prometheus.MustNewConstMetric(c.probes, prometheus.CounterValue, float64(st.Probes))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refused))
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(st.Retries))
	ch <- prometheus.MustNewConstMetric(c.ambiguous, prometheus.CounterValue, float64(st.Ambiguous))
	ch <- prometheus.MustNewConstMetric(c.rounds, prometheus.CounterValue, float64(st.LoadRounds))
	ch <- prometheus.MustNewConstMetric(c.tags, prometheus.GaugeValue, float64(st.Tags))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.QueuedLoads))
	ch <- prometheus.MustNewConstMetric(c.build, prometheus.GaugeValue, 1, c.buildLabels[:]...)

	if c.srv == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(c.srv.ConnectedClients()))
	for _, cs := range c.srv.CommandStats() {
		ch <- prometheus.MustNewConstMetric(c.commands, prometheus.CounterValue, float64(cs.Calls-cs.Errors), cs.Name, "ok")
		ch <- prometheus.MustNewConstMetric(c.commands, prometheus.CounterValue, float64(cs.Errors), cs.Name, "error")
	}
}

// ownSeries reports whether tag gets series of its own, giving it a place
// while there is room. c.mu is held.
func (c *collector) ownSeries(tag string) bool {
	if tag == OtherTag {
		return false
	}
	if c.maxTags < 0 {
		return true
	}
	if _, ok := c.own[tag]; ok {
		return true
	}
	if len(c.own) >= c.maxTags {
		return false
	}
	c.own[tag] = struct{}{}
	return true
}

func (c *collector) emitTag(ch chan<- prometheus.Metric, tag string, s tagSeries) {
	ch <- prometheus.MustNewConstMetric(c.issued, prometheus.CounterValue, float64(s.issued), tag)
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(s.skipped), tag)
	ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(s.loads), tag, "ok")
	ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(s.failures), tag, "error")
	ch <- prometheus.MustNewConstMetric(c.step, prometheus.GaugeValue, float64(s.step), tag)
	ch <- prometheus.MustNewConstMetric(c.runwayIDs, prometheus.GaugeValue, float64(s.runwayIDs), tag)
	ch <- prometheus.MustNewConstMetric(c.runwaySecs, prometheus.GaugeValue, s.runwaySecs, tag)
	ch <- prometheus.MustNewConstMetric(c.guardTrips, prometheus.CounterValue, float64(s.guardTrips), tag)
	ch <- prometheus.MustNewConstMetric(c.guardRepairs, prometheus.CounterValue, float64(s.guardRepairs), tag)
}
