package httpapi

import (
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/leaf-id/leaf/persist/durability"
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
	// Cmdline is the process's command line as /debug/pprof/cmdline
	// shows it, the passwords already replaced (config.RedactArgs):
	// this package sees no configuration.
	Cmdline []string
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

	// Password (server.password), when set, is required on every endpoint
	// but /healthz and /readyz (security.go); AdminPassword
	// (server.admin_password) is the admin user's.
	Password, AdminPassword string
	// MetricsOpen leaves /metrics open with a password set
	// (http.metrics_auth off).
	MetricsOpen bool
	// AllowedHosts are the Host header values accepted (http.allowed_hosts;
	// a host without a port matches any port); empty: any.
	AllowedHosts []string
	// AutoCreate lets Leaf's API create unknown tags (http.auto_create),
	// as CreatePolicy and CreateRate allow (create.go).
	AutoCreate bool
	// CreatePolicy is segment.auto_create: "admin" lets only the admin
	// user's requests create tags; anything else, every user's.
	CreatePolicy string
	// CreateRate bounds the tags one client address creates a second
	// (segment.create_rate); 0: no bound.
	CreateRate float64
	// MaxRenders is how many status pages, /cache pages and scrapes are
	// rendered at once; more answer 503. 0 is 4.
	MaxRenders int
	// CachePageSize is how many tags one /cache page holds; 0 is 1000.
	CachePageSize int
	// Replication, when set, is how the store's database replicates as
	// last checked (persist/durability): the metric
	// leaf_store_replication_safe and the status page show it.
	Replication func() durability.Replication
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
	g       *guard             // security.go
	cr      *creators          // create.go
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
	if opts.MaxRenders <= 0 {
		opts.MaxRenders = 4
	}
	if opts.CachePageSize <= 0 {
		opts.CachePageSize = 1000
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
	h.g = newGuard(opts, h.log)
	h.cr = newCreators(opts)
	m := h.mux
	// The methods each endpoint takes are checked before the mux
	// (security.go: methodsOf).
	m.Handle("/metrics", h.g.limit(h.g.renders, h.metricsHandler().ServeHTTP))
	m.HandleFunc("/healthz", h.healthz)
	m.HandleFunc("/readyz", h.readyz)
	// Leaf maps these with @RequestMapping and no method: GET and POST
	// work, as Leaf's callers use them.
	m.HandleFunc("/api/segment/get/{key}", h.segmentGet)
	m.HandleFunc("/api/snowflake/get/{key}", h.snowflakeGet)
	m.HandleFunc("/decodeSnowflakeId", h.decodeSnowflake)
	m.HandleFunc("/cache", h.g.limit(h.g.renders, h.cache))
	m.HandleFunc("/{$}", h.g.limit(h.g.renders, h.status))
	if opts.PProf {
		// Mounted here, never on http.DefaultServeMux. cmdline hides the
		// passwords; a profile or a trace burns CPU, so one at a time.
		m.HandleFunc("/debug/pprof/", pprof.Index)
		m.HandleFunc("/debug/pprof/cmdline", cmdline(opts.Cmdline))
		m.HandleFunc("/debug/pprof/profile", h.g.limit(h.g.profiles, pprof.Profile))
		m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		m.HandleFunc("/debug/pprof/trace", h.g.limit(h.g.profiles, pprof.Trace))
	}
	return h
}

// cmdline is pprof's /debug/pprof/cmdline answering args, the command
// line with its passwords replaced, instead of os.Args.
func cmdline(args []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, strings.Join(args, "\x00"))
	}
}

// writeText answers a plain-text body with the given status.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}
