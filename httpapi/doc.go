// Package httpapi is leaf's HTTP side, served on http.addr next to the
// Redis-protocol listener and over the same allocator:
//
//	GET /                       status page: every tag's two segments, step,
//	                            runway and loads, and the store's state; it
//	                            refreshes itself (status.go)
//	GET /metrics                Prometheus metrics (metrics.go)
//	GET /healthz                200 "ok" while the process is up (health.go)
//	GET /readyz                 200 when the store answers or every tag in use
//	                            still has cached IDs; 503 and the reason
//	                            otherwise (health.go)
//	GET|POST /api/segment/get/{key}  Meituan Leaf's HTTP API: the next ID
//	                            of tag key as plain text, errors as Leaf
//	                            answers them; it creates no tag unless
//	                            Options.AutoCreate (leafapi.go, create.go)
//	GET /cache                  Leaf's monitor: the tags' SegmentBuffer state
//	                            (JSON, or Leaf's HTML table for browsers), a
//	                            page at a time
//	GET /debug/pprof/           Go's profiler, when Options.PProf is set
//
// With Options.Password set, every endpoint but /healthz and /readyz asks
// for it (HTTP Basic with user default or admin, a Bearer token, or a
// client certificate's common name), and the Host header, the method and,
// for the API, the request's origin are checked first (security.go). Pages
// and scrapes are rendered a few at a time (Options.MaxRenders), each
// reading the tags one at a time, so memory does not grow with the tag
// count or the clients.
//
// Everything a scrape or a page shows is read from the allocator's and the
// server's snapshots when asked (segment.Allocator.Tags and Stats,
// server.Server.CommandStats): the ID hot path pays nothing for it. The only
// thing measured as it happens is the store latency histogram, fed by the
// allocator's Observe hook (StoreLatency).
//
// The package keeps no global state: New builds a private Prometheus
// registry and its own mux, so several handlers can live in one process.
package httpapi
