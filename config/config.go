// Package config loads leaf's configuration and hands it to the rest of the
// program as typed structs; no other package sees viper.
//
// Sources, each overriding the one before:
//
//  1. the defaults (Default): those of the packages that use the values
//     (segment.DefaultOptions, cluster.DefaultOptions, server.Default*,
//     snowflake.DefaultLayout) and config's own for the rest;
//  2. a YAML file: the one named by --config, which must exist, or else
//     leaf.yaml in the working directory when there is one;
//  3. environment variables LEAF_<SECTION>_<KEY>, e.g. LEAF_SERVER_ADDR or
//     LEAF_SEGMENT_LOAD_TIMEOUT;
//  4. flags with the dotted key names, e.g. --server.addr=:6380.
//
// The keys are the mapstructure tags of Config's sections; viper merges the
// sources and decodes them into Config. Load validates the result: a bad
// value, an unknown key in the file or an unknown flag stops start-up with
// an error that names the key. Durations are Go durations ("2s", "15m").
// Load keeps no global state (one viper.Viper and one pflag.FlagSet per
// call), so tests may call it in parallel.
//
// Config implements slog.LogValuer with the passwords, and the password in a
// DSN, redacted (RedactDSN), so slog.Info("config", "config", cfg) is safe.
package config

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/snowflake"
)

// Config is the whole configuration, one field per section of leaf.yaml.
// Each field's mapstructure tag is its key, its usage tag its line in
// --help.
type Config struct {
	Server  ServerConfig  `mapstructure:"server"`
	Store   StoreConfig   `mapstructure:"store"`
	HTTP    HTTPConfig    `mapstructure:"http"`
	Log     LogConfig     `mapstructure:"log"`
	Segment SegmentConfig `mapstructure:"segment"`
	Cluster ClusterConfig `mapstructure:"cluster"`

	// File is the configuration file that was read, "" when none was.
	File string `mapstructure:"-"`
}

// ServerConfig is the Redis-protocol listener (section server).
type ServerConfig struct {
	Addr             string        `mapstructure:"addr" usage:"host:port for Redis clients"`
	Password         string        `mapstructure:"password" usage:"password clients must AUTH with; empty: none (a flag shows in ps: prefer server.password_file or LEAF_SERVER_PASSWORD)"`
	AdminPassword    string        `mapstructure:"admin_password" usage:"password of user admin, required for LEAF.CREATE/STEP/FLOOR and SET; empty: any client may run them (a flag shows in ps: prefer the file or LEAF_SERVER_ADMIN_PASSWORD)"`
	PasswordFile     string        `mapstructure:"password_file" usage:"file whose first line is server.password (kept out of ps and the environment)"`
	AdminPassFile    string        `mapstructure:"admin_password_file" usage:"file whose first line is server.admin_password"`
	MaxClients       int           `mapstructure:"max_clients" usage:"open client connections at most"`
	MaxRequestBytes  int           `mapstructure:"max_request_bytes" usage:"largest request a client may send, in bytes"`
	IdleTimeout      time.Duration `mapstructure:"idle_timeout" usage:"close connections idle this long; 0: never"`
	MaxAuthFailures  int           `mapstructure:"max_auth_failures" usage:"close a connection after this many wrong passwords; 0: never"`
	AuthTimeout      time.Duration `mapstructure:"auth_timeout" usage:"with a password, close connections not authenticated this long after connecting; 0: never"`
	MaxPipeline      int           `mapstructure:"max_pipeline" usage:"commands a connection runs per turn before its replies are written"`
	EventLoops       int           `mapstructure:"event_loops" usage:"event loops serving plain TCP connections; 0: one per core but one; -1: a goroutine per connection"`
	TLSCert          string        `mapstructure:"tls_cert" usage:"PEM certificate file; set with server.tls_key to serve TLS"`
	TLSKey           string        `mapstructure:"tls_key" usage:"PEM private key file for server.tls_cert"`
	TLSClientCA      string        `mapstructure:"tls_client_ca" usage:"PEM CA file: clients must show a certificate it signed; CN default or admin logs in as that user"`
	ProtectedMode    bool          `mapstructure:"protected_mode" usage:"without server.password, refuse to listen beyond loopback"`
	Databases        int           `mapstructure:"databases" usage:"databases SELECT may choose (0 to n-1), each its own namespace of tags"`
	ScriptTimeLimit  time.Duration `mapstructure:"script_time_limit" usage:"a Lua script (EVAL) running longer is stopped with an error"`
	SlowlogThreshold time.Duration `mapstructure:"slowlog_threshold" usage:"commands at least this slow enter SLOWLOG and LATENCY; 1ns: every command; negative: off"`
	RedisCluster     bool          `mapstructure:"redis_cluster" usage:"answer Redis Cluster clients: INFO cluster_enabled:1, CLUSTER SLOTS/SHARDS/NODES from the live servers"`
	AnnounceAddr     string        `mapstructure:"announce_addr" usage:"host:port cluster and sentinel clients are given for this server; empty: server.addr, an unspecified host replaced by this machine's first address"`
	SentinelMasters  string        `mapstructure:"sentinel_masters" usage:"comma-separated master names SENTINEL MASTERS lists (other SENTINEL commands answer any name)"`
}

// StoreConfig is the database behind the allocator (section store).
// Its DSN may hold a password: log it with RedactedDSN or through LogValue.
type StoreConfig struct {
	Driver          string        `mapstructure:"driver" usage:"database: sqlite, mysql, postgres or etcd"`
	DSN             string        `mapstructure:"dsn" usage:"sqlite file, mysql DSN user:pass@tcp(host:3306)/db, postgres DSN postgres://user:pass@host:5432/db, or etcd endpoints http://host:2379,..."`
	CreateSchema    bool          `mapstructure:"create_schema" usage:"create the leaf_alloc and leaf_guard tables when they are missing"`
	CreateDatabase  bool          `mapstructure:"create_database" usage:"sqlite: create the file (and its directory) when store.dsn names none outside ./data/"`
	MaxOpenConns    int           `mapstructure:"max_open_conns" usage:"open database connections at most"`
	ConnMaxLifetime time.Duration `mapstructure:"conn_max_lifetime" usage:"recycle database connections after this; 0: never"`
	EtcdPrefix      string        `mapstructure:"etcd_prefix" usage:"etcd: prefix of every key leaf uses, ending in /"`
	EtcdTLSCA       string        `mapstructure:"etcd_tls_ca" usage:"etcd: PEM file of the CA of the members' certificates; empty: the system's"`
	EtcdTLSCert     string        `mapstructure:"etcd_tls_cert" usage:"etcd: PEM client certificate file; set with store.etcd_tls_key"`
	EtcdTLSKey      string        `mapstructure:"etcd_tls_key" usage:"etcd: PEM private key file of store.etcd_tls_cert"`
}

// HTTPConfig is the optional HTTP listener for metrics and pprof (section http).
type HTTPConfig struct {
	Addr           string        `mapstructure:"addr" usage:"host:port for metrics, health, the status page and Leaf's API; empty: off"`
	PProf          bool          `mapstructure:"pprof" usage:"serve /debug/pprof/ on http.addr"`
	MetricsMaxTags int           `mapstructure:"metrics_max_tags" usage:"tags that get their own metric series at most"`
	TLS            bool          `mapstructure:"tls" usage:"serve HTTPS on http.addr with server.tls_cert, server.tls_key and server.tls_client_ca"`
	AllowedHosts   string        `mapstructure:"allowed_hosts" usage:"comma-separated Host header values accepted (host or host:port); empty: any"`
	MaxConns       int           `mapstructure:"max_conns" usage:"HTTP connections open at once, at most"`
	IdleTimeout    time.Duration `mapstructure:"idle_timeout" usage:"close an HTTP keep-alive connection idle this long"`
	AutoCreate     bool          `mapstructure:"auto_create" usage:"let Leaf's HTTP API create unknown tags (as segment.auto_create allows)"`
	MetricsAuth    bool          `mapstructure:"metrics_auth" usage:"with server.password set, /metrics needs it too"`
}

// LogConfig is the process log (section log).
type LogConfig struct {
	Level  string `mapstructure:"level" usage:"debug, info, warn or error"`
	Format string `mapstructure:"format" usage:"text or json"`
}

// SegmentConfig is the allocator (section segment).
type SegmentConfig struct {
	DefaultStep     int64         `mapstructure:"default_step" usage:"step of tags created automatically"`
	MaxStep         int64         `mapstructure:"max_step" usage:"the adaptive step grows to this at most"`
	SegmentDuration time.Duration `mapstructure:"segment_duration" usage:"target lifetime of a segment; shorter doubles the step"`
	PrefetchAt      float64       `mapstructure:"prefetch_at" usage:"fraction (0,1] of a segment used before the next loads"`
	Loaders         int           `mapstructure:"loaders" usage:"background workers loading segments"`
	LoadTimeout     time.Duration `mapstructure:"load_timeout" usage:"deadline of one segment load from the database"`
	SyncInterval    time.Duration `mapstructure:"sync_interval" usage:"how often the tag list is re-read from the database"`
	AutoCreate      string        `mapstructure:"auto_create" usage:"create unknown tags on first use: on, off, or admin (only the admin user's requests)"`
	MaxTags         int           `mapstructure:"max_tags" usage:"tags this server holds at most; creating more is refused; 0: no limit"`
	CreateRate      float64       `mapstructure:"create_rate" usage:"tag creations per second per client connection; 0: no limit"`
	MaxBatch        int64         `mapstructure:"max_batch" usage:"largest n accepted by INCRBY"`
	MaxRetryBackoff time.Duration `mapstructure:"max_retry_backoff" usage:"longest wait between probes of a database that is away"`
}

// ClusterConfig is the servers sharing the store and the Snowflake tags
// (section cluster).
type ClusterConfig struct {
	Heartbeat             time.Duration `mapstructure:"heartbeat" usage:"how often the lease is renewed and changes from other servers are read"`
	Lease                 time.Duration `mapstructure:"lease" usage:"how long a renewal lasts; a server not renewed for it less a tenth serves nothing cached"`
	AckTimeout            time.Duration `mapstructure:"ack_timeout" usage:"how long LEAF.FLOOR, SET and LEAF.STEP wait for every live server to confirm"`
	NodeTimeout           time.Duration `mapstructure:"node_timeout" usage:"a server whose heartbeat is this late (against the freshest) leaves the Redis Cluster slot map; 0: 5 heartbeats"`
	MaxClockBack          time.Duration `mapstructure:"max_clock_back" usage:"a clock behind the last Snowflake ID by at most this is waited for; more is refused"`
	SnowflakeEpoch        string        `mapstructure:"snowflake_epoch" usage:"time 0 of Snowflake IDs, RFC 3339 to the millisecond"`
	SnowflakeUnit         time.Duration `mapstructure:"snowflake_unit" usage:"time unit of Snowflake IDs, whole milliseconds"`
	SnowflakeTimeBits     int           `mapstructure:"snowflake_time_bits" usage:"bits of time in a Snowflake ID"`
	SnowflakeWorkerBits   int           `mapstructure:"snowflake_worker_bits" usage:"bits of worker id in a Snowflake ID (2^bits servers)"`
	SnowflakeSequenceBits int           `mapstructure:"snowflake_sequence_bits" usage:"bits of sequence in a Snowflake ID (2^bits IDs per unit per server)"`
}

// Hosts returns AllowedHosts as a list, without spaces or empty entries.
func (c HTTPConfig) Hosts() []string { return list(c.AllowedHosts) }

// Masters returns SentinelMasters as a list, without spaces or empty
// entries.
func (c ServerConfig) Masters() []string { return list(c.SentinelMasters) }

// list splits a comma-separated value, dropping spaces and empty entries.
func list(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Epoch parses SnowflakeEpoch (Validate has checked it).
func (c ClusterConfig) Epoch() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, c.SnowflakeEpoch)
}

// Default returns the built-in configuration: what Load returns when there
// is no file, no LEAF_* variable and no flag. Where a package that uses a
// value has a default for it, that default is taken (one copy); the rest
// (addresses, the store, the HTTP side, the log) are config's own. The
// repository's leaf.yaml shows the same values: its value lines are
// written from Default (see leafyaml_test.go).
func Default() Config {
	seg := segment.DefaultOptions()
	node := cluster.DefaultOptions()
	layout := snowflake.DefaultLayout()
	autoCreate := AutoCreateOff
	if seg.AutoCreate {
		autoCreate = AutoCreateOn
	}
	return Config{
		Server: ServerConfig{
			Addr:             "127.0.0.1:6380",
			MaxClients:       server.DefaultMaxClients,
			MaxRequestBytes:  server.DefaultMaxRequestBytes,
			MaxPipeline:      server.DefaultMaxPipeline,
			MaxAuthFailures:  10,
			AuthTimeout:      10 * time.Second,
			ProtectedMode:    true,
			Databases:        server.DefaultDatabases,
			ScriptTimeLimit:  server.DefaultScriptTimeLimit,
			SlowlogThreshold: server.DefaultSlowlogThreshold,
			RedisCluster:     true,
			SentinelMasters:  server.DefaultSentinelMaster,
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
			DefaultStep:     seg.DefaultStep,
			MaxStep:         seg.MaxStep,
			SegmentDuration: seg.SegmentDuration,
			PrefetchAt:      seg.PrefetchAt,
			Loaders:         seg.Loaders,
			LoadTimeout:     seg.LoadTimeout,
			SyncInterval:    seg.SyncInterval,
			AutoCreate:      autoCreate,
			MaxTags:         seg.MaxTags,
			CreateRate:      server.DefaultCreateRate, // per connection: the server counts it
			MaxBatch:        seg.MaxBatch,
			MaxRetryBackoff: seg.MaxRetryBackoff,
		},
		Cluster: ClusterConfig{
			Heartbeat:             node.Heartbeat,
			Lease:                 node.Lease,
			AckTimeout:            node.AckTimeout,
			MaxClockBack:          5 * time.Millisecond,
			SnowflakeEpoch:        layout.Epoch.UTC().Format(time.RFC3339Nano),
			SnowflakeUnit:         layout.Unit,
			SnowflakeTimeBits:     layout.TimeBits,
			SnowflakeWorkerBits:   layout.WorkerBits,
			SnowflakeSequenceBits: layout.SeqBits,
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

// key is one configuration key, found in Config's tags.
type key struct {
	name  string // dotted, as in leaf.yaml and the flag: "segment.load_timeout"
	usage string // one line for --help
	index []int  // the field in Config
}

// field returns the key's field in c.
func (k key) field(c *Config) reflect.Value { return reflect.ValueOf(c).Elem().FieldByIndex(k.index) }

// keys lists every configuration key, in leaf.yaml's order: the fields
// of Config's sections, named by their mapstructure tags.
func keys() []key {
	var out []key
	ct := reflect.TypeFor[Config]()
	for _, sec := range reflect.VisibleFields(ct) {
		name, ok := sec.Tag.Lookup("mapstructure")
		if !ok || name == "-" {
			continue
		}
		for _, f := range reflect.VisibleFields(sec.Type) {
			out = append(out, key{
				name:  name + "." + f.Tag.Get("mapstructure"),
				usage: f.Tag.Get("usage"),
				index: append(slices.Clone(sec.Index), f.Index...),
			})
		}
	}
	return out
}

// sections lists the top-level sections of leaf.yaml.
func sections() []string {
	var out []string
	for _, k := range keys() {
		if sec, _, _ := strings.Cut(k.name, "."); !slices.Contains(out, sec) {
			out = append(out, sec)
		}
	}
	return out
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
		v := slog.AnyValue(k.field(&c).Interface())
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
