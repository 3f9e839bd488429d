// Command leaf hands out unique 64-bit IDs over the Redis protocol: any Redis
// client asks INCR tag and gets the tag's next ID. IDs come from a store
// (embedded SQLite, MySQL/MariaDB/TiDB, PostgreSQL/CockroachDB/YugabyteDB,
// or an etcd cluster) in reserved ranges, the Leaf-segment design. See
// README.md and leaf.yaml.
//
// main only wires: config -> store (persist/open) and its replication
// check -> allocator and Snowflake generator -> cluster node -> Redis and
// HTTP servers, and signals; the subcommands go to package cli.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/netutil"

	"github.com/leaf-id/leaf/cli"
	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/httpapi"
	"github.com/leaf-id/leaf/internal/buildinfo"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/open"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/snowflake"
	"github.com/leaf-id/leaf/snowflake/configured"
)

// version and revision are set at build time with -ldflags
// "-X main.version=... -X main.revision=..." (make build); without them
// leaf reports what Go recorded in the binary (internal/buildinfo).
var version, revision string

// shutdownTimeout bounds the drain of in-flight commands and the give-back
// of unused IDs on SIGTERM.
const shutdownTimeout = 15 * time.Second

func main() {
	// go-redis (leaf health, leaf import) logs its own line for a failed
	// dial before leaf's error says the same: leaf's errors are enough.
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, config.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaf:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down cleanly: stop accepting, finish
// in-flight commands, give unused IDs back, close the store.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && cli.IsCommand(args[0]) { // leaf tags ..., leaf import ...
		return cli.Run(ctx, args, environ, stdout, stderr)
	}
	build := buildinfo.Read(version, revision)
	if wantsVersion(args) {
		fmt.Fprintln(stdout, build)
		return nil
	}
	cfg, err := config.Load(args, environ)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, usage())
		return err
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	log.Info("starting leaf", "version", build.Version, "revision", build.Revision, "config", cfg)
	warnExposure(cfg, args, log)
	var tlsConf *tls.Config // server.tls_cert and server.tls_key: TLS instead of plain TCP
	if cfg.Server.TLSCert != "" {
		var certs *server.Certs
		tlsConf, certs, err = server.NewTLS(server.TLSOptions{
			Cert: cfg.Server.TLSCert, Key: cfg.Server.TLSKey, ClientCA: cfg.Server.TLSClientCA, Logger: log})
		if err != nil {
			return fmt.Errorf("server.tls_cert, server.tls_key, server.tls_client_ca: %w", err)
		}
		reloadOnHangup(ctx, certs, log)
	}

	// A database that cannot be reached does not stop the start (Lazy):
	// leaf serves TRYAGAIN and reports the state until it answers (see
	// README, "Database outages"). Other errors do. Every query is bounded
	// by segment.load_timeout unless its caller set a deadline.
	store, err := open.Store(ctx, cfg.Store, open.Options{LoadTimeout: cfg.Segment.LoadTimeout, Logger: log, Lazy: true})
	if err != nil {
		return err
	}
	defer store.Close()
	// How the database replicates, at start and every minute: a warning
	// when a failover could lose ranges already handed out.
	replication := durability.New(store, durability.Options{Logger: log})
	checks, stopChecks := context.WithCancel(ctx)
	replication.Start(checks)
	defer func() { stopChecks(); replication.Wait() }() // before the store closes

	// The generator of every Snowflake tag; its worker id comes from the
	// cluster registry.
	layout, err := configured.Layout(cfg.Cluster, time.Now())
	if err != nil {
		return err
	}
	log.Info("snowflake layout", "layout", layout.String(), "until", layout.End().UTC().Format(time.DateOnly),
		"years_left", fmt.Sprintf("%.1f", layout.Lasts(time.Now()).Hours()/24/365.25),
		"worker_ids", layout.Workers(), "ids_per_unit_per_server", layout.Capacity())
	gen := snowflake.New(snowflake.Options{Layout: layout, MaxClockBack: cfg.Cluster.MaxClockBack})

	// leaf_store_latency_seconds: told every range the allocator takes.
	storeLatency := httpapi.NewStoreLatency()
	aopts := allocatorOptions(cfg.Segment, log)
	aopts.Observe = storeLatency.Observe
	aopts.Modes = cluster.Modes(gen)
	alloc := segment.New(store, aopts)
	if err := alloc.Start(ctx); err != nil {
		log.Warn("could not read the tag list; tags will be looked up on first use", "err", err)
	}

	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		_ = alloc.Close(context.Background())
		return fmt.Errorf("listen on server.addr %s: %w", cfg.Server.Addr, err)
	}
	// The address clients of the cluster and sentinel faces are given, and
	// the registry lists.
	announce, from, err := cluster.AnnounceAddr(cfg.Server.AnnounceAddr, ln.Addr(), net.InterfaceAddrs)
	if err != nil {
		ln.Close()
		_ = alloc.Close(context.Background())
		return err
	}
	log.Info("announcing", "addr", announce, "from", from, "redis_cluster", cfg.Server.RedisCluster)
	// etcd counts a lease's age in whole seconds: a node timeout shorter
	// than a heartbeat and two seconds would take live servers off the map.
	nodeTimeout := cmp.Or(cfg.Cluster.NodeTimeout, cluster.DefaultNodeTimeoutBeats*cfg.Cluster.Heartbeat)
	if etcdFloor := cfg.Cluster.Heartbeat + 2*time.Second; cfg.Store.Driver == "etcd" && nodeTimeout < etcdFloor {
		log.Info("cluster.node_timeout raised: etcd counts heartbeat ages in whole seconds", "from", nodeTimeout, "to", etcdFloor)
		nodeTimeout = etcdFloor
	}
	// Registered before serving: until then the segment tags are held.
	reg, _ := store.(persist.Registry)
	node := cluster.New(reg, alloc, gen, cluster.Options{
		Heartbeat: cfg.Cluster.Heartbeat, Lease: cfg.Cluster.Lease, AckTimeout: cfg.Cluster.AckTimeout,
		NodeTimeout: nodeTimeout,
		Node:        persist.NodeInfo{Addr: announce, Version: build.Node()},
		Logger:      log,
	})
	node.Start(ctx)

	srv := server.New(alloc, server.Options{
		Password:      cfg.Server.Password,
		AdminPassword: cfg.Server.AdminPassword,
		Version:       build.Version,
		Revision:      build.Revision,
		Logger:        log,
		Conn: resp.Options{
			// A descriptor per client, and some for the listeners, the
			// database, the event loops, files and the HTTP connections.
			MaxClients:      server.FitFileLimit(cfg.Server.MaxClients, 32+cfg.Store.MaxOpenConns+httpConns(cfg.HTTP), log),
			MaxRequestBytes: cfg.Server.MaxRequestBytes,
			IdleTimeout:     cfg.Server.IdleTimeout,
			MaxPipeline:     cfg.Server.MaxPipeline,
			EventLoops:      cfg.Server.EventLoops,
			TLS:             tlsConf,
			AuthTimeout:     cfg.Server.AuthTimeout,
		},
		Databases:       cfg.Server.Databases,
		ScriptTimeLimit: cfg.Server.ScriptTimeLimit,
		Cluster:         node,
		MaxAuthFailures: cfg.Server.MaxAuthFailures,
		CreatePolicy:    cfg.Segment.AutoCreate,
		CreateRate:      cfg.Segment.CreateRate,
		CertLogin:       cfg.Server.TLSClientCA != "",
		RedisCluster:    cfg.Server.RedisCluster,
		AnnounceAddr:    announce,
		SentinelMasters: cfg.Server.Masters(),
		// INFO server's config_file; SLOWLOG and LATENCY.
		ConfigFile:       cfg.File,
		SlowlogThreshold: cfg.Server.SlowlogThreshold,
		Replication:      replication.Last,
		StoreID:          replication.StoreID,
	})
	web, err := startHTTP(cfg.HTTP, tlsConf, httpapi.New(alloc, httpapi.Options{
		Server:         srv,
		StoreLatency:   storeLatency,
		MetricsMaxTags: cfg.HTTP.MetricsMaxTags,
		PProf:          cfg.HTTP.PProf,
		Cmdline:        config.RedactArgs(os.Args),
		Version:        build.Version,
		Revision:       build.Revision,
		Logger:         log,
		Cluster:        node,
		Snowflake:      gen,
		Password:       cfg.Server.Password,
		AdminPassword:  cfg.Server.AdminPassword,
		MetricsOpen:    !cfg.HTTP.MetricsAuth,
		AllowedHosts:   cfg.HTTP.Hosts(),
		AutoCreate:     cfg.HTTP.AutoCreate && cfg.Segment.AutoCreate != config.AutoCreateOff,
		CreatePolicy:   cfg.Segment.AutoCreate,
		CreateRate:     cfg.Segment.CreateRate,
		Replication:    replication.Last,
	}), log)
	if err != nil {
		ln.Close()
		_ = alloc.Close(context.Background())
		_ = node.Leave(context.Background())
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "store", cfg.Store.Driver, "tls", tlsConf != nil)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case serveErr = <-served:
		log.Error("server stopped", "err", serveErr)
	}

	down, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if web != nil {
		// Before the allocator closes: no HTTP request may take an ID it
		// gives back.
		if err := web.Shutdown(down); err != nil {
			log.Warn("http shutdown", "err", err)
		}
	}
	if err := srv.Shutdown(down); err != nil {
		log.Warn("shutdown", "err", err)
	}
	// Only now, with no command running, may unused IDs be given back:
	// while the node still renews its lease and applies the changes made
	// meanwhile, so that others keep waiting for it, and each give-back
	// is refused if it would go below a floor published since.
	if err := alloc.Close(down); err != nil {
		log.Warn("giving back unused IDs", "err", err)
	}
	// No ID is issued any more: the worker id goes back with the last
	// time issued, and the others stop waiting for this server.
	if err := node.Leave(down); err != nil {
		log.Warn("leaving the cluster registry", "err", err)
	}
	log.Info("stopped")
	if errors.Is(serveErr, server.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// quietRedis drops go-redis's log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// usage is leaf --help: the commands, one line each, before the
// configuration flags.
func usage() string {
	u := config.Usage("leaf")
	if i := strings.Index(u, "\nFlags:\n"); i >= 0 {
		return u[:i+1] + cli.Summary + u[i:]
	}
	return u + "\n" + cli.Summary
}

// wantsVersion reports whether the arguments ask for the version:
// "version" as the command, or --version or -v among the flags.
func wantsVersion(args []string) bool {
	if len(args) > 0 && args[0] == "version" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--version" || a == "-v" {
			return true
		}
	}
	return false
}

// newLogger builds the process logger from log.level and log.format.
func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// startHTTP serves h on http.addr (metrics, health, Leaf's HTTP API, the
// status page), over TLS with the Redis port's certificate when http.tls
// is on; nil when http.addr is empty. At most http.max_conns connections
// are open at once: the others wait in the listen backlog.
func startHTTP(c config.HTTPConfig, tlsConf *tls.Config, h http.Handler, log *slog.Logger) (*http.Server, error) {
	if c.Addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on http.addr %s: %w", c.Addr, err)
	}
	addr := ln.Addr().String()
	ln = netutil.LimitListener(ln, c.MaxConns)
	if c.TLS {
		conf := tlsConf.Clone()
		conf.NextProtos = []string{"h2", "http/1.1"}
		ln = tls.NewListener(ln, conf)
	}
	web := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := web.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	log.Info("serving http", "addr", addr, "tls", c.TLS, "pprof", c.PProf, "max_conns", c.MaxConns)
	return web, nil
}

// httpConns is how many descriptors the HTTP side may hold.
func httpConns(c config.HTTPConfig) int {
	if c.Addr == "" {
		return 0
	}
	return c.MaxConns
}

// allocatorOptions maps the segment section onto the allocator.
func allocatorOptions(c config.SegmentConfig, log *slog.Logger) segment.Options {
	o := segment.DefaultOptions()
	o.DefaultStep = c.DefaultStep
	o.MaxStep = c.MaxStep
	o.SegmentDuration = c.SegmentDuration
	o.PrefetchAt = c.PrefetchAt
	o.Loaders = c.Loaders
	o.LoadTimeout = c.LoadTimeout
	o.SyncInterval = c.SyncInterval
	o.AutoCreate = c.AutoCreate != config.AutoCreateOff
	o.MaxBatch = c.MaxBatch
	o.MaxRetryBackoff = c.MaxRetryBackoff
	o.MaxTags = c.MaxTags
	o.Logger = log
	return o
}
