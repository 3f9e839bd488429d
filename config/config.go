// Package config loads leaf's configuration and hands it to the rest of the
// program as typed structs; no other package sees viper.
//
// Sources, each overriding the one before:
//
//  1. the defaults (Default, documented key by key in the repository's leaf.yaml);
//  2. a YAML file: the one named by --config, which must exist, or else
//     leaf.yaml in the working directory when there is one;
//  3. environment variables LEAF_<SECTION>_<KEY>, e.g. LEAF_SERVER_ADDR or
//     LEAF_SEGMENT_LOAD_TIMEOUT;
//  4. flags with the dotted key names, e.g. --server.addr=:6380.
//
// Load validates the result: a bad value, an unknown key in the file or an
// unknown flag stops start-up with an error that names the key. Durations are
// Go durations ("2s", "15m"). Load keeps no global state (one viper.Viper and
// one pflag.FlagSet per call), so tests may call it in parallel.
//
// Config implements slog.LogValuer with the passwords, and the password in a
// DSN, redacted (RedactDSN), so slog.Info("config", "config", cfg) is safe.
package config

import (
	"log/slog"
	"strings"
	"time"
)

// Config is the whole configuration, one field per section of leaf.yaml.
type Config struct {
	Server  ServerConfig
	Store   StoreConfig
	HTTP    HTTPConfig
	Log     LogConfig
	Segment SegmentConfig
	Cluster ClusterConfig

	// File is the configuration file that was read, "" when none was.
	File string
}

// ServerConfig is the Redis-protocol listener (section server).
type ServerConfig struct {
	Addr             string        // server.addr: host:port to listen on
	Password         string        // server.password: AUTH password, "" = none
	AdminPassword    string        // server.admin_password: user admin's password; set: LEAF.CREATE/STEP/FLOOR and SET need AUTH admin, "" = any client may run them
	PasswordFile     string        // server.password_file: file holding server.password (its first line)
	AdminPassFile    string        // server.admin_password_file: file holding server.admin_password (its first line)
	MaxClients       int           // server.max_clients: open connections at most
	MaxRequestBytes  int           // server.max_request_bytes: largest request accepted
	IdleTimeout      time.Duration // server.idle_timeout: close idle connections, 0 = never
	MaxAuthFailures  int           // server.max_auth_failures: close a connection after this many wrong passwords, 0 = never
	AuthTimeout      time.Duration // server.auth_timeout: with a password, close a connection not authenticated this long after it opened, 0 = never
	MaxPipeline      int           // server.max_pipeline: commands a connection runs per turn before its replies are written
	EventLoops       int           // server.event_loops: event loops serving plain TCP, 0 = one per core but one, -1 = a goroutine per connection
	TLSCert          string        // server.tls_cert: PEM certificate file, "" = plain TCP
	TLSKey           string        // server.tls_key: PEM key file for TLSCert
	TLSClientCA      string        // server.tls_client_ca: PEM CA file; set: clients must show a certificate it signed (mTLS)
	ProtectedMode    bool          // server.protected_mode: refuse a non-loopback addr without a password
	Databases        int           // server.databases: databases SELECT may choose, each its own namespace of tags
	ScriptTimeLimit  time.Duration // server.script_time_limit: a Lua script running longer is stopped
	SlowlogThreshold time.Duration // server.slowlog_threshold: commands this slow enter SLOWLOG and LATENCY; negative = off
	RedisCluster     bool          // server.redis_cluster: answer Redis Cluster clients (CLUSTER SLOTS, ...) with the live servers' slot map
	AnnounceAddr     string        // server.announce_addr: host:port clients are given for this server, "" = server.addr (an unspecified host replaced by the machine's address)
	SentinelMasters  string        // server.sentinel_masters: comma-separated master names SENTINEL MASTERS lists
}

// StoreConfig is the database behind the allocator (section store).
// Its DSN may hold a password: log it with RedactedDSN or through LogValue.
type StoreConfig struct {
	Driver          string        // store.driver: "sqlite", "mysql", "postgres" or "etcd"
	DSN             string        // store.dsn: file path (sqlite), go-sql-driver DSN (mysql), pgx DSN (postgres), comma-separated endpoints (etcd)
	CreateSchema    bool          // store.create_schema: create leaf_alloc and leaf_guard when missing
	CreateDatabase  bool          // store.create_database: create a SQLite file that does not exist outside ./data/
	MaxOpenConns    int           // store.max_open_conns: database connections at most
	ConnMaxLifetime time.Duration // store.conn_max_lifetime: recycle connections after this, 0 = never
	EtcdPrefix      string        // store.etcd_prefix: etcd: every key leaf uses starts with it
	EtcdTLSCA       string        // store.etcd_tls_ca: etcd: PEM CA of the members' certificates, "" = system roots
	EtcdTLSCert     string        // store.etcd_tls_cert: etcd: PEM client certificate, "" = none
	EtcdTLSKey      string        // store.etcd_tls_key: etcd: PEM key of store.etcd_tls_cert
}

// HTTPConfig is the optional HTTP listener for metrics and pprof (section http).
type HTTPConfig struct {
	Addr           string        // http.addr: host:port, "" = no HTTP listener
	PProf          bool          // http.pprof: serve /debug/pprof/
	MetricsMaxTags int           // http.metrics_max_tags: tags with their own metric series at most
	TLS            bool          // http.tls: serve HTTPS with server.tls_cert, server.tls_key and server.tls_client_ca
	AllowedHosts   string        // http.allowed_hosts: comma-separated Host header values accepted, "" = any
	MaxConns       int           // http.max_conns: HTTP connections open at once, at most
	IdleTimeout    time.Duration // http.idle_timeout: close a keep-alive connection idle this long
	AutoCreate     bool          // http.auto_create: Leaf's HTTP API creates unknown tags (as segment.auto_create allows)
	MetricsAuth    bool          // http.metrics_auth: /metrics needs the password when one is set
}

// Hosts returns AllowedHosts as a list, without spaces or empty entries.
func (c HTTPConfig) Hosts() []string {
	var out []string
	for h := range strings.SplitSeq(c.AllowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// LogConfig is the process log (section log).
type LogConfig struct {
	Level  string // log.level: "debug", "info", "warn" or "error"
	Format string // log.format: "text" or "json"
}

// SegmentConfig is the allocator (section segment).
type SegmentConfig struct {
	DefaultStep     int64         // segment.default_step: step of auto-created tags
	MaxStep         int64         // segment.max_step: the adaptive step grows to this at most
	SegmentDuration time.Duration // segment.segment_duration: target lifetime of a segment
	PrefetchAt      float64       // segment.prefetch_at: fraction of a segment used before the next one loads
	Loaders         int           // segment.loaders: background load workers
	LoadTimeout     time.Duration // segment.load_timeout: deadline of one database load
	SyncInterval    time.Duration // segment.sync_interval: how often the tag list is re-read
	AutoCreate      string        // segment.auto_create: create unknown tags on first use: "on", "off" or "admin" (only the admin user's requests)
	MaxTags         int           // segment.max_tags: tags this server holds at most before it refuses to create more, 0 = no limit
	CreateRate      float64       // segment.create_rate: tag creations per second per client connection, 0 = no limit
	MaxBatch        int64         // segment.max_batch: largest n for INCRBY
	MaxRetryBackoff time.Duration // segment.max_retry_backoff: longest wait between probes of a database that is away
}

// ClusterConfig is the servers sharing the store and the Snowflake tags
// (section cluster).
type ClusterConfig struct {
	Heartbeat             time.Duration // cluster.heartbeat: how often the lease is renewed and the change log read
	Lease                 time.Duration // cluster.lease: how long a renewal lasts; a server not renewed for it less a tenth serves nothing cached
	AckTimeout            time.Duration // cluster.ack_timeout: how long LEAF.FLOOR, SET and LEAF.STEP wait for every live server to confirm
	NodeTimeout           time.Duration // cluster.node_timeout: a server whose last renewal is this much older than the freshest leaves the Redis Cluster slot map, 0 = 5 heartbeats
	MaxClockBack          time.Duration // cluster.max_clock_back: a clock behind the last Snowflake ID by at most this is waited for
	SnowflakeEpoch        string        // cluster.snowflake_epoch: time 0 of Snowflake IDs, RFC 3339 to the millisecond
	SnowflakeUnit         time.Duration // cluster.snowflake_unit: one step of the time bits, whole milliseconds
	SnowflakeTimeBits     int           // cluster.snowflake_time_bits
	SnowflakeWorkerBits   int           // cluster.snowflake_worker_bits: 2^bits worker ids
	SnowflakeSequenceBits int           // cluster.snowflake_sequence_bits: 2^bits IDs per unit per server
}

// Masters returns SentinelMasters as a list, without spaces or empty
// entries.
func (c ServerConfig) Masters() []string {
	var out []string
	for m := range strings.SplitSeq(c.SentinelMasters, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// Epoch parses SnowflakeEpoch (Validate has checked it).
func (c ClusterConfig) Epoch() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, c.SnowflakeEpoch)
}

// Default returns the built-in configuration: what Load returns when there
// is no file, no LEAF_* variable and no flag. The repository's leaf.yaml
// documents the same values, and the limits and the allocator's settings
// are the defaults of the packages that use them (server.Default*,
// segment.DefaultOptions): config imports no package of leaf, so tests
// outside it keep the three equal.
func Default() Config {
	return Config{
		Server: ServerConfig{
			Addr:            "127.0.0.1:6380",
			MaxClients:      10000,
			MaxRequestBytes: 64 << 10,
			MaxPipeline:     1024,
			MaxAuthFailures: 10,
			AuthTimeout:     10 * time.Second,
			ProtectedMode:   true,
			Databases:       16,
			ScriptTimeLimit: 5 * time.Second,
			// server.DefaultSlowlogThreshold.
			SlowlogThreshold: 10 * time.Millisecond,
			RedisCluster:     true,
			SentinelMasters:  "mymaster",
		},
		Store: StoreConfig{
			Driver:          "sqlite",
			DSN:             DefaultSQLiteDSN,
			CreateSchema:    true,
			MaxOpenConns:    16,
			ConnMaxLifetime: 5 * time.Minute,
			EtcdPrefix:      "/leaf/",
		},
		HTTP: HTTPConfig{
			MetricsMaxTags: 1000,
			MaxConns:       256,
			IdleTimeout:    30 * time.Second,
			MetricsAuth:    true,
		},
		Log: LogConfig{
			Level:  "info",
			Format: "text",
		},
		Segment: SegmentConfig{
			DefaultStep:     1000,
			MaxStep:         1_000_000,
			SegmentDuration: 15 * time.Minute,
			PrefetchAt:      0.1,
			Loaders:         8,
			LoadTimeout:     2 * time.Second,
			SyncInterval:    time.Minute,
			AutoCreate:      AutoCreateOn,
			MaxTags:         1_000_000,
			CreateRate:      1000,
			MaxBatch:        100_000,
			MaxRetryBackoff: 10 * time.Second,
		},
		Cluster: ClusterConfig{
			Heartbeat:    time.Second,
			Lease:        30 * time.Second,
			AckTimeout:   10 * time.Second,
			MaxClockBack: 5 * time.Millisecond,
			// Meituan Leaf's layout: Twitter's epoch, milliseconds, 41/10/12.
			SnowflakeEpoch:        "2010-11-04T01:42:54.657Z",
			SnowflakeUnit:         time.Millisecond,
			SnowflakeTimeBits:     41,
			SnowflakeWorkerBits:   10,
			SnowflakeSequenceBits: 12,
		},
	}
}

// The values of segment.auto_create.
const (
	AutoCreateOn    = "on"    // any client's first INCR of a tag creates it
	AutoCreateOff   = "off"   // unknown tags are an error; LEAF.CREATE makes them
	AutoCreateAdmin = "admin" // only requests of the admin user create tags
)

// DefaultSQLiteDSN is the default store.dsn: a SQLite file under ./data/.
const DefaultSQLiteDSN = "data/leaf.db"

// key describes one configuration key. The table in keys is the single list
// that flags, environment variables, the unknown-key check, logging and the
// tests are built from.
type key struct {
	name  string // dotted, as in leaf.yaml and the flag: "segment.load_timeout"
	usage string // one line for --help
	// field returns a pointer to the key's field in c: *string, *bool,
	// *int, *int64, *float64 or *time.Duration.
	field func(c *Config) any
}

// keys lists every configuration key, in leaf.yaml's order.
func keys() []key {
	return []key{
		{"server.addr", "host:port for Redis clients", func(c *Config) any { return &c.Server.Addr }},
		{"server.password", "password clients must AUTH with; empty: none (a flag shows in ps: prefer server.password_file or LEAF_SERVER_PASSWORD)", func(c *Config) any { return &c.Server.Password }},
		{"server.admin_password", "password of user admin, required for LEAF.CREATE/STEP/FLOOR and SET; empty: any client may run them (a flag shows in ps: prefer the file or LEAF_SERVER_ADMIN_PASSWORD)", func(c *Config) any { return &c.Server.AdminPassword }},
		{"server.password_file", "file whose first line is server.password (kept out of ps and the environment)", func(c *Config) any { return &c.Server.PasswordFile }},
		{"server.admin_password_file", "file whose first line is server.admin_password", func(c *Config) any { return &c.Server.AdminPassFile }},
		{"server.max_clients", "open client connections at most", func(c *Config) any { return &c.Server.MaxClients }},
		{"server.max_request_bytes", "largest request a client may send, in bytes", func(c *Config) any { return &c.Server.MaxRequestBytes }},
		{"server.idle_timeout", "close connections idle this long; 0: never", func(c *Config) any { return &c.Server.IdleTimeout }},
		{"server.max_auth_failures", "close a connection after this many wrong passwords; 0: never", func(c *Config) any { return &c.Server.MaxAuthFailures }},
		{"server.auth_timeout", "with a password, close connections not authenticated this long after connecting; 0: never", func(c *Config) any { return &c.Server.AuthTimeout }},
		{"server.max_pipeline", "commands a connection runs per turn before its replies are written", func(c *Config) any { return &c.Server.MaxPipeline }},
		{"server.event_loops", "event loops serving plain TCP connections; 0: one per core but one; -1: a goroutine per connection", func(c *Config) any { return &c.Server.EventLoops }},
		{"server.tls_cert", "PEM certificate file; set with server.tls_key to serve TLS", func(c *Config) any { return &c.Server.TLSCert }},
		{"server.tls_key", "PEM private key file for server.tls_cert", func(c *Config) any { return &c.Server.TLSKey }},
		{"server.tls_client_ca", "PEM CA file: clients must show a certificate it signed; CN default or admin logs in as that user", func(c *Config) any { return &c.Server.TLSClientCA }},
		{"server.protected_mode", "without server.password, refuse to listen beyond loopback", func(c *Config) any { return &c.Server.ProtectedMode }},
		{"server.databases", "databases SELECT may choose (0 to n-1), each its own namespace of tags", func(c *Config) any { return &c.Server.Databases }},
		{"server.script_time_limit", "a Lua script (EVAL) running longer is stopped with an error", func(c *Config) any { return &c.Server.ScriptTimeLimit }},
		{"server.slowlog_threshold", "commands at least this slow enter SLOWLOG and LATENCY; 1ns: every command; negative: off", func(c *Config) any { return &c.Server.SlowlogThreshold }},
		{"server.redis_cluster", "answer Redis Cluster clients: INFO cluster_enabled:1, CLUSTER SLOTS/SHARDS/NODES from the live servers", func(c *Config) any { return &c.Server.RedisCluster }},
		{"server.announce_addr", "host:port cluster and sentinel clients are given for this server; empty: server.addr, an unspecified host replaced by this machine's first address", func(c *Config) any { return &c.Server.AnnounceAddr }},
		{"server.sentinel_masters", "comma-separated master names SENTINEL MASTERS lists (other SENTINEL commands answer any name)", func(c *Config) any { return &c.Server.SentinelMasters }},

		{"store.driver", "database: sqlite, mysql, postgres or etcd", func(c *Config) any { return &c.Store.Driver }},
		{"store.dsn", "sqlite file, mysql DSN user:pass@tcp(host:3306)/db, postgres DSN postgres://user:pass@host:5432/db, or etcd endpoints http://host:2379,...", func(c *Config) any { return &c.Store.DSN }},
		{"store.create_schema", "create the leaf_alloc and leaf_guard tables when they are missing", func(c *Config) any { return &c.Store.CreateSchema }},
		{"store.create_database", "sqlite: create the file (and its directory) when store.dsn names none outside ./data/", func(c *Config) any { return &c.Store.CreateDatabase }},
		{"store.max_open_conns", "open database connections at most", func(c *Config) any { return &c.Store.MaxOpenConns }},
		{"store.conn_max_lifetime", "recycle database connections after this; 0: never", func(c *Config) any { return &c.Store.ConnMaxLifetime }},
		{"store.etcd_prefix", "etcd: prefix of every key leaf uses, ending in /", func(c *Config) any { return &c.Store.EtcdPrefix }},
		{"store.etcd_tls_ca", "etcd: PEM file of the CA of the members' certificates; empty: the system's", func(c *Config) any { return &c.Store.EtcdTLSCA }},
		{"store.etcd_tls_cert", "etcd: PEM client certificate file; set with store.etcd_tls_key", func(c *Config) any { return &c.Store.EtcdTLSCert }},
		{"store.etcd_tls_key", "etcd: PEM private key file of store.etcd_tls_cert", func(c *Config) any { return &c.Store.EtcdTLSKey }},

		{"http.addr", "host:port for metrics, health, the status page and Leaf's API; empty: off", func(c *Config) any { return &c.HTTP.Addr }},
		{"http.pprof", "serve /debug/pprof/ on http.addr", func(c *Config) any { return &c.HTTP.PProf }},
		{"http.metrics_max_tags", "tags that get their own metric series at most", func(c *Config) any { return &c.HTTP.MetricsMaxTags }},
		{"http.tls", "serve HTTPS on http.addr with server.tls_cert, server.tls_key and server.tls_client_ca", func(c *Config) any { return &c.HTTP.TLS }},
		{"http.allowed_hosts", "comma-separated Host header values accepted (host or host:port); empty: any", func(c *Config) any { return &c.HTTP.AllowedHosts }},
		{"http.max_conns", "HTTP connections open at once, at most", func(c *Config) any { return &c.HTTP.MaxConns }},
		{"http.idle_timeout", "close an HTTP keep-alive connection idle this long", func(c *Config) any { return &c.HTTP.IdleTimeout }},
		{"http.auto_create", "let Leaf's HTTP API create unknown tags (as segment.auto_create allows)", func(c *Config) any { return &c.HTTP.AutoCreate }},
		{"http.metrics_auth", "with server.password set, /metrics needs it too", func(c *Config) any { return &c.HTTP.MetricsAuth }},

		{"log.level", "debug, info, warn or error", func(c *Config) any { return &c.Log.Level }},
		{"log.format", "text or json", func(c *Config) any { return &c.Log.Format }},

		{"segment.default_step", "step of tags created automatically", func(c *Config) any { return &c.Segment.DefaultStep }},
		{"segment.max_step", "the adaptive step grows to this at most", func(c *Config) any { return &c.Segment.MaxStep }},
		{"segment.segment_duration", "target lifetime of a segment; shorter doubles the step", func(c *Config) any { return &c.Segment.SegmentDuration }},
		{"segment.prefetch_at", "fraction (0,1] of a segment used before the next loads", func(c *Config) any { return &c.Segment.PrefetchAt }},
		{"segment.loaders", "background workers loading segments", func(c *Config) any { return &c.Segment.Loaders }},
		{"segment.load_timeout", "deadline of one segment load from the database", func(c *Config) any { return &c.Segment.LoadTimeout }},
		{"segment.sync_interval", "how often the tag list is re-read from the database", func(c *Config) any { return &c.Segment.SyncInterval }},
		{"segment.auto_create", "create unknown tags on first use: on, off, or admin (only the admin user's requests)", func(c *Config) any { return &c.Segment.AutoCreate }},
		{"segment.max_tags", "tags this server holds at most; creating more is refused; 0: no limit", func(c *Config) any { return &c.Segment.MaxTags }},
		{"segment.create_rate", "tag creations per second per client connection; 0: no limit", func(c *Config) any { return &c.Segment.CreateRate }},
		{"segment.max_batch", "largest n accepted by INCRBY", func(c *Config) any { return &c.Segment.MaxBatch }},
		{"segment.max_retry_backoff", "longest wait between probes of a database that is away", func(c *Config) any { return &c.Segment.MaxRetryBackoff }},

		{"cluster.heartbeat", "how often the lease is renewed and changes from other servers are read", func(c *Config) any { return &c.Cluster.Heartbeat }},
		{"cluster.lease", "how long a renewal lasts; a server not renewed for it less a tenth serves nothing cached", func(c *Config) any { return &c.Cluster.Lease }},
		{"cluster.ack_timeout", "how long LEAF.FLOOR, SET and LEAF.STEP wait for every live server to confirm", func(c *Config) any { return &c.Cluster.AckTimeout }},
		{"cluster.node_timeout", "a server whose heartbeat is this late (against the freshest) leaves the Redis Cluster slot map; 0: 5 heartbeats", func(c *Config) any { return &c.Cluster.NodeTimeout }},
		{"cluster.max_clock_back", "a clock behind the last Snowflake ID by at most this is waited for; more is refused", func(c *Config) any { return &c.Cluster.MaxClockBack }},
		{"cluster.snowflake_epoch", "time 0 of Snowflake IDs, RFC 3339 to the millisecond", func(c *Config) any { return &c.Cluster.SnowflakeEpoch }},
		{"cluster.snowflake_unit", "time unit of Snowflake IDs, whole milliseconds", func(c *Config) any { return &c.Cluster.SnowflakeUnit }},
		{"cluster.snowflake_time_bits", "bits of time in a Snowflake ID", func(c *Config) any { return &c.Cluster.SnowflakeTimeBits }},
		{"cluster.snowflake_worker_bits", "bits of worker id in a Snowflake ID (2^bits servers)", func(c *Config) any { return &c.Cluster.SnowflakeWorkerBits }},
		{"cluster.snowflake_sequence_bits", "bits of sequence in a Snowflake ID (2^bits IDs per unit per server)", func(c *Config) any { return &c.Cluster.SnowflakeSequenceBits }},
	}
}

// sections lists the top-level sections of leaf.yaml.
func sections() []string {
	return []string{"server", "store", "http", "log", "segment", "cluster"}
}

// envName is the environment variable of a key: "segment.load_timeout"
// becomes LEAF_SEGMENT_LOAD_TIMEOUT.
func envName(name string) string {
	return "LEAF_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

// SlogLevel returns Level as a slog.Level (info when Level is not one of
// the four valid names, which Load never returns).
func (c LogConfig) SlogLevel() slog.Level {
	switch strings.ToLower(c.Level) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// LogValue implements slog.LogValuer: every key under its leaf.yaml name,
// grouped by section, with server.password, server.admin_password and the
// password in store.dsn redacted.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(sections())+1)
	if c.File != "" {
		attrs = append(attrs, slog.String("file", c.File))
	}
	for _, s := range sections() {
		attrs = append(attrs, slog.Attr{Key: s, Value: c.sectionValue(s)})
	}
	return slog.GroupValue(attrs...)
}

// LogValue implements slog.LogValuer with the passwords redacted.
func (c ServerConfig) LogValue() slog.Value { return Config{Server: c}.sectionValue("server") }

// LogValue implements slog.LogValuer with the password in the DSN redacted.
func (c StoreConfig) LogValue() slog.Value { return Config{Store: c}.sectionValue("store") }

// sectionValue is the log group of one section.
func (c Config) sectionValue(section string) slog.Value {
	var attrs []slog.Attr
	for _, k := range keys() {
		sec, name, _ := strings.Cut(k.name, ".")
		if sec != section {
			continue
		}
		var v slog.Value
		switch p := k.field(&c).(type) {
		case *string:
			v = slog.StringValue(*p)
		case *bool:
			v = slog.BoolValue(*p)
		case *int:
			v = slog.IntValue(*p)
		case *int64:
			v = slog.Int64Value(*p)
		case *float64:
			v = slog.Float64Value(*p)
		case *time.Duration:
			v = slog.DurationValue(*p)
		}
		switch k.name {
		case "server.password", "server.admin_password":
			if v.String() != "" {
				v = slog.StringValue(Redacted)
			}
		case "store.dsn":
			v = slog.StringValue(c.Store.RedactedDSN())
		}
		attrs = append(attrs, slog.Attr{Key: name, Value: v})
	}
	return slog.GroupValue(attrs...)
}
