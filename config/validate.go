package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Validate checks every value and returns all the problems joined, one line
// each, in the form "config: <key>: <problem>, got <value>". Load calls it;
// a Config built by hand (tests, embedding) can call it too. It never
// prints a password or a DSN.
func (c Config) Validate() error { return c.validate(func(key string) string { return key }) }

// validate is Validate with each key named by name(key): Load names the
// environment variable, flag or file line that set it.
func (c Config) validate(name func(key string) string) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", name(key), fmt.Sprintf(format, args...)))
	}
	atLeast := func(key string, got, low int64) {
		if got < low {
			bad(key, "must be >= %d, got %d", low, got)
		}
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be > 0, got %s", formatDuration(d))
		}
	}
	notNegative := func(key string, d time.Duration) {
		if d < 0 {
			bad(key, "must be >= 0, got %s", formatDuration(d))
		}
	}
	oneOf := func(key, got string, allowed ...string) {
		if !slices.Contains(allowed, got) {
			bad(key, "must be one of %s, got %q", strings.Join(allowed, ", "), got)
		}
	}
	address := func(key, addr string) {
		if err := checkAddr(addr); err != nil {
			bad(key, "invalid address %q: %v", addr, err)
		}
	}

	s := c.Server
	address("server.addr", s.Addr)
	atLeast("server.max_clients", int64(s.MaxClients), 1)
	// Below 1 KiB, leaf's own commands (a 128-byte tag, LEAF.CREATE with a
	// 256-character description) would not fit.
	atLeast("server.max_request_bytes", int64(s.MaxRequestBytes), 1024)
	notNegative("server.idle_timeout", s.IdleTimeout)
	atLeast("server.max_pipeline", int64(s.MaxPipeline), 1)
	atLeast("server.event_loops", int64(s.EventLoops), -1)
	// A database's tags are stored under a prefix of up to 6 bytes
	// ("\x1f9999\x1f"), taken from the 128 bytes of a name.
	if s.Databases < 1 || s.Databases > 10000 {
		bad("server.databases", "must be between 1 and 10000, got %d", s.Databases)
	}
	positive("server.script_time_limit", s.ScriptTimeLimit)
	if s.SlowlogThreshold == 0 {
		// Redis logs every command at 0; say how to, rather than guess.
		bad("server.slowlog_threshold", "must not be 0: 1ns logs every command, a negative value turns SLOWLOG and LATENCY off")
	}
	if s.ProtectedMode && s.Password == "" && checkAddr(s.Addr) == nil && !loopback(s.Addr) {
		// Redis's protected mode: an ID service open to the network without
		// a password lets anyone take IDs (and, with auto-create, make tags).
		bad("server.addr", "%q listens beyond loopback and server.password is empty: set a password, "+
			"listen on 127.0.0.1, or set server.protected_mode: false on a network you trust", s.Addr)
	}
	atLeast("server.max_auth_failures", int64(s.MaxAuthFailures), 0)
	notNegative("server.auth_timeout", s.AuthTimeout)
	if s.TLSClientCA != "" && s.TLSCert == "" {
		bad("server.tls_client_ca", "set without server.tls_cert (client certificates need TLS)")
	}
	if s.TLSCert != "" && s.TLSKey == "" {
		bad("server.tls_cert", "set without server.tls_key (set both or neither)")
	}
	if s.TLSKey != "" && s.TLSCert == "" {
		bad("server.tls_key", "set without server.tls_cert (set both or neither)")
	}

	if s.AnnounceAddr != "" {
		if err := checkAnnounce(s.AnnounceAddr); err != nil {
			bad("server.announce_addr", "%v, got %q", err, s.AnnounceAddr)
		}
	}
	if len(s.Masters()) == 0 {
		bad("server.sentinel_masters", "must name at least one master, got %q", s.SentinelMasters)
	}
	for _, m := range s.Masters() {
		if strings.ContainsFunc(m, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			bad("server.sentinel_masters", "%q: a master name has no spaces or control characters", m)
		}
	}

	st := c.Store
	oneOf("store.driver", st.Driver, "sqlite", "mysql", "postgres", "etcd")
	switch {
	case st.DSN == "":
		bad("store.dsn", "must not be empty")
	case st.Driver == "mysql" && st.DSN == DefaultSQLiteDSN:
		bad("store.dsn", "store.driver is mysql but store.dsn is the sqlite default %q; set a DSN such as user:pass@tcp(127.0.0.1:3306)/leaf", DefaultSQLiteDSN)
	case st.Driver == "postgres" && st.DSN == DefaultSQLiteDSN:
		bad("store.dsn", "store.driver is postgres but store.dsn is the sqlite default %q; set a DSN such as postgres://user:pass@127.0.0.1:5432/leaf", DefaultSQLiteDSN)
	case st.Driver == "etcd" && st.DSN == DefaultSQLiteDSN:
		bad("store.dsn", "store.driver is etcd but store.dsn is the sqlite default %q; set endpoints such as http://127.0.0.1:2379,http://127.0.0.1:22379", DefaultSQLiteDSN)
	case st.Driver == "mysql":
		// The DSN holds the password: name the problem, never the value.
		if m, err := mysql.ParseDSN(st.DSN); err != nil {
			bad("store.dsn", "invalid mysql DSN: %v", err)
		} else if m.DBName == "" {
			bad("store.dsn", "mysql DSN names no database (user:pass@tcp(host:3306)/leaf)")
		}
	}
	atLeast("store.max_open_conns", int64(st.MaxOpenConns), 1)
	notNegative("store.conn_max_lifetime", st.ConnMaxLifetime)
	if !strings.HasSuffix(st.EtcdPrefix, "/") {
		bad("store.etcd_prefix", "must end with /, got %q", st.EtcdPrefix)
	}
	if (st.EtcdTLSCert == "") != (st.EtcdTLSKey == "") {
		bad("store.etcd_tls_cert", "and store.etcd_tls_key must be set together")
	}

	h := c.HTTP
	if h.Addr != "" {
		address("http.addr", h.Addr)
		beyond := checkAddr(h.Addr) == nil && !loopback(h.Addr)
		switch {
		case beyond && s.ProtectedMode && s.Password == "":
			// The HTTP side hands out IDs and lists tags as the Redis
			// port does: the same rule.
			bad("http.addr", "%q listens beyond loopback and server.password is empty: set a password, "+
				"listen on 127.0.0.1, or set server.protected_mode: false on a network you trust", h.Addr)
		case beyond && h.PProf && s.Password == "":
			// The profiler burns CPU on request and shows the process's
			// memory: never open to the network.
			bad("http.pprof", "on while http.addr %q listens beyond loopback and server.password is empty: "+
				"set a password, or listen on 127.0.0.1", h.Addr)
		}
	}
	atLeast("http.metrics_max_tags", int64(h.MetricsMaxTags), 0)
	if h.TLS && s.TLSCert == "" {
		bad("http.tls", "on without server.tls_cert and server.tls_key (HTTPS uses the same certificate)")
	}
	atLeast("http.max_conns", int64(h.MaxConns), 1)
	positive("http.idle_timeout", h.IdleTimeout)
	for _, host := range h.Hosts() {
		if strings.ContainsAny(host, "/ \t@") {
			bad("http.allowed_hosts", "%q is not a host or host:port", host)
		}
	}

	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")

	g := c.Segment
	atLeast("segment.default_step", g.DefaultStep, 1)
	switch {
	case g.DefaultStep > math.MaxInt32:
		bad("segment.default_step", "must be <= %d (leaf_alloc.step is an INT), got %d", math.MaxInt32, g.DefaultStep)
	case g.DefaultStep > g.MaxStep && g.MaxStep >= 1:
		bad("segment.default_step", "must be <= segment.max_step (%d), got %d", g.MaxStep, g.DefaultStep)
	}
	atLeast("segment.max_step", g.MaxStep, 1)
	positive("segment.segment_duration", g.SegmentDuration)
	if !(g.PrefetchAt > 0 && g.PrefetchAt <= 1) { // also refuses NaN
		bad("segment.prefetch_at", "must be > 0 and <= 1, got %v", g.PrefetchAt)
	}
	atLeast("segment.loaders", int64(g.Loaders), 1)
	positive("segment.load_timeout", g.LoadTimeout)
	positive("segment.sync_interval", g.SyncInterval)
	atLeast("segment.max_batch", g.MaxBatch, 1)
	oneOf("segment.auto_create", g.AutoCreate, AutoCreateOn, AutoCreateOff, AutoCreateAdmin)
	if g.AutoCreate == AutoCreateAdmin && s.AdminPassword == "" {
		bad("segment.auto_create", "admin needs server.admin_password (without it every client is admin)")
	}
	atLeast("segment.max_tags", int64(g.MaxTags), 0)
	if !(g.CreateRate >= 0) || math.IsInf(g.CreateRate, 1) { // also refuses NaN
		bad("segment.create_rate", "must be a number >= 0, got %v", g.CreateRate)
	}
	positive("segment.max_retry_backoff", g.MaxRetryBackoff)

	cl := c.Cluster
	positive("cluster.heartbeat", cl.Heartbeat)
	if cl.Heartbeat > 0 && cl.Lease < 3*cl.Heartbeat {
		// A lease must outlive a couple of missed heartbeats.
		bad("cluster.lease", "must be at least 3 times cluster.heartbeat (%s), got %s", formatDuration(cl.Heartbeat), formatDuration(cl.Lease))
	}
	positive("cluster.ack_timeout", cl.AckTimeout)
	notNegative("cluster.node_timeout", cl.NodeTimeout)
	if cl.NodeTimeout > 0 && cl.Heartbeat > 0 && cl.NodeTimeout < 2*cl.Heartbeat {
		// A heartbeat a little late must not take a server off the map.
		bad("cluster.node_timeout", "must be 0 (5 heartbeats) or at least 2 times cluster.heartbeat (%s), got %s",
			formatDuration(cl.Heartbeat), formatDuration(cl.NodeTimeout))
	}
	if cl.MaxClockBack < 0 || cl.MaxClockBack > time.Second {
		bad("cluster.max_clock_back", "must be from 0 to 1s (requests wait that long), got %s", formatDuration(cl.MaxClockBack))
	}
	if epoch, err := cl.Epoch(); err != nil {
		bad("cluster.snowflake_epoch", "must be an RFC 3339 time such as 2010-11-04T01:42:54.657Z, got %q", cl.SnowflakeEpoch)
	} else if !epoch.Truncate(time.Millisecond).Equal(epoch) {
		bad("cluster.snowflake_epoch", "must be a whole millisecond, got %q", cl.SnowflakeEpoch)
	}
	if cl.SnowflakeUnit < time.Millisecond || cl.SnowflakeUnit > time.Hour || cl.SnowflakeUnit%time.Millisecond != 0 {
		bad("cluster.snowflake_unit", "must be whole milliseconds from 1ms to 1h, got %s", formatDuration(cl.SnowflakeUnit))
	}
	atLeast("cluster.snowflake_time_bits", int64(cl.SnowflakeTimeBits), 1)
	atLeast("cluster.snowflake_worker_bits", int64(cl.SnowflakeWorkerBits), 1)
	if cl.SnowflakeWorkerBits > 16 {
		bad("cluster.snowflake_worker_bits", "must be <= 16, got %d", cl.SnowflakeWorkerBits)
	}
	atLeast("cluster.snowflake_sequence_bits", int64(cl.SnowflakeSequenceBits), 1)
	if n := cl.SnowflakeTimeBits + cl.SnowflakeWorkerBits + cl.SnowflakeSequenceBits; n != 63 {
		bad("cluster.snowflake_time_bits", "with cluster.snowflake_worker_bits and cluster.snowflake_sequence_bits must make 63 "+
			"(a positive int64), got %d+%d+%d", cl.SnowflakeTimeBits, cl.SnowflakeWorkerBits, cl.SnowflakeSequenceBits)
	}

	return errors.Join(errs...)
}

// loopback reports whether addr's host is a loopback address or
// "localhost"; an empty host means every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAddr accepts host:port with a numeric port 0-65535 (0 picks a free
// port); the host may be empty (all interfaces).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if ae, ok := errors.AsType[*net.AddrError](err); ok {
			return errors.New(ae.Err)
		}
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return errors.New("port must be a number from 0 to 65535")
	}
	return nil
}

// checkAnnounce accepts the address clients are given: host:port with a
// host they can dial (not empty, not 0.0.0.0 or ::) and a port 1-65535.
func checkAnnounce(addr string) error {
	if err := checkAddr(addr); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return errors.New("the host must be one clients can connect to, not an unspecified address such as 0.0.0.0 or :: " +
			"(leave server.announce_addr empty to announce server.addr's port on this machine's first address)")
	}
	if p, _ := strconv.ParseUint(port, 10, 16); p == 0 {
		return errors.New("the port must be the one clients connect to, not 0")
	}
	return nil
}

// Loopback reports whether addr (host:port) listens on loopback only: a
// loopback address or "localhost". An empty host (every interface) is not.
func Loopback(addr string) bool { return loopback(addr) }

// formatDuration writes d without zero tails: 15m, not 15m0s; 1h, not
// 1h0m0s; 0, not 0s.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0" // as leaf.yaml writes it; --help hides a zero default
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
