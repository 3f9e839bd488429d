package httpapi

import (
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
)

// ServerStats is what the handler reads from the Redis-protocol server:
// *server.Server implements it.
type ServerStats interface {
	// ConnectedClients is the number of open Redis connections.
	ConnectedClients() int
	// CommandStats are the per-command counts since start.
	CommandStats() []server.CommandStat
}

var _ ServerStats = (*server.Server)(nil)

// Options configure New. The zero value serves every endpoint but pprof,
// with every tag in the overflow series of the metrics (see MaxTags).
type Options struct {
	// Server, when set, adds the connection and command metrics.
	Server ServerStats
	// StoreLatency, when set, is exported as leaf_store_latency_seconds. It
	// must be the one whose Observe the allocator calls
	// (segment.Options.Observe).
	StoreLatency *StoreLatency
	// MetricsMaxTags is how many tags get metric series of their own
	// (http.metrics_max_tags); the others are summed under tag="_other".
	// A tag keeps its own series once it has one. Negative: no limit.
	MetricsMaxTags int
	// PProf serves Go's profiler under /debug/pprof/ (http.pprof).
	PProf bool
	// Version is leaf's version, shown on the status page and in
	// leaf_build_info.
	Version string
	// Revision is the VCS commit leaf was built from, leaf_build_info's
	// revision label ("" when unknown).
	Revision string
	// Logger receives errors of the handler; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the status page; nil is time.Now.
	Now func() time.Time
	// Refresh is how often the status page reloads itself; 0 is 5s.
	Refresh time.Duration
	// PageSize is how many tags one status page shows; 0 is 100. The page
	// pages and filters (?q=, ?page=) so 100,000 tags stay one small page.
	PageSize int
	// Cluster, when set, adds the cluster registry to the status page and
	// the metrics (cluster.go).
	Cluster Cluster
	// Snowflake, when set, serves Leaf's Snowflake API (snowflake.go);
	// without it /api/snowflake/get answers 404.
	Snowflake Snowflake
}

// handler serves every endpoint; see the package documentation.
type handler struct {
	alloc   *segment.Allocator
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	started time.Time
	mux     *http.ServeMux
	tmpl    *template.Template // status.html, cache.html
}

// New returns the HTTP handler of leaf over alloc: metrics, health, Leaf's
// HTTP API, the status page and, when opts.PProf is set, the profiler.
func New(alloc *segment.Allocator, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	h := &handler{
		alloc:   alloc,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		started: opts.Now(),
		mux:     http.NewServeMux(),
		tmpl:    parseTemplates(),
	}
	m := h.mux
	m.Handle("GET /metrics", h.metricsHandler())
	m.HandleFunc("GET /healthz", h.healthz)
	m.HandleFunc("GET /readyz", h.readyz)
	// Leaf maps these with @RequestMapping and no method: any method works.
	m.HandleFunc("/api/segment/get/{key}", h.segmentGet)
	m.HandleFunc("/api/snowflake/get/{key}", h.snowflakeGet)
	m.HandleFunc("/decodeSnowflakeId", h.decodeSnowflake)
	m.HandleFunc("GET /cache", h.cache)
	m.HandleFunc("GET /{$}", h.status)
	if opts.PProf {
		// Mounted here, never on http.DefaultServeMux.
		m.HandleFunc("/debug/pprof/", pprof.Index)
		m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		m.HandleFunc("/debug/pprof/profile", pprof.Profile)
		m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// writeText answers a plain-text body with the given status.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}
