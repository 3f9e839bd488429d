package config

import (
	"slices"
	"strings"
	"testing"
)

func TestValidationNamesKeyAndValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		exact   string   // the whole error, when set
		want    []string // substrings of the error; the key always among them
	}{
		// The two forms the brief spells out, matched exactly.
		{"loaders zero", []string{"LEAF_SEGMENT_LOADERS=0"}, "config: segment.loaders: must be >= 1, got 0", nil},
		{"load_timeout not a duration", []string{"LEAF_SEGMENT_LOAD_TIMEOUT=abc"}, `config: segment.load_timeout: invalid duration "abc"`, nil},

		{"server.addr without port", []string{"LEAF_SERVER_ADDR=localhost"}, "", []string{`config: server.addr: invalid address "localhost"`, "missing port"}},
		{"server.addr port not a number", []string{"LEAF_SERVER_ADDR=localhost:redis"}, "", []string{`config: server.addr: invalid address "localhost:redis"`, "0 to 65535"}},
		{"server.addr port too big", []string{"LEAF_SERVER_ADDR=:70000"}, "", []string{`config: server.addr: invalid address ":70000"`}},
		{"server.addr empty", []string{"LEAF_SERVER_ADDR="}, "", []string{`config: server.addr: invalid address ""`}},
		{"server.max_clients", []string{"LEAF_SERVER_MAX_CLIENTS=0"}, "config: server.max_clients: must be >= 1, got 0", nil},
		{"server.databases zero", []string{"LEAF_SERVER_DATABASES=0"}, "config: server.databases: must be between 1 and 10000, got 0", nil},
		{"server.databases beyond the prefix", []string{"LEAF_SERVER_DATABASES=10001"}, "config: server.databases: must be between 1 and 10000, got 10001", nil},
		{"server.script_time_limit zero", []string{"LEAF_SERVER_SCRIPT_TIME_LIMIT=0s"}, "config: server.script_time_limit: must be > 0, got 0", nil},
		{"server.max_clients not a number", []string{"LEAF_SERVER_MAX_CLIENTS=lots"}, `config: server.max_clients: invalid integer "lots"`, nil},
		{"server.max_request_bytes", []string{"LEAF_SERVER_MAX_REQUEST_BYTES=-5"}, "config: server.max_request_bytes: must be >= 1024, got -5", nil},
		{"server.max_request_bytes too small", []string{"LEAF_SERVER_MAX_REQUEST_BYTES=1023"}, "config: server.max_request_bytes: must be >= 1024, got 1023", nil},
		{"server.idle_timeout negative", []string{"LEAF_SERVER_IDLE_TIMEOUT=-1s"}, "config: server.idle_timeout: must be >= 0, got -1s", nil},
		{"server.idle_timeout no unit", []string{"LEAF_SERVER_IDLE_TIMEOUT=30"}, `config: server.idle_timeout: invalid duration "30"`, nil},
		{"server.max_pipeline", []string{"LEAF_SERVER_MAX_PIPELINE=0"}, "config: server.max_pipeline: must be >= 1, got 0", nil},
		{"server.event_loops", []string{"LEAF_SERVER_EVENT_LOOPS=-2"}, "config: server.event_loops: must be >= -1, got -2", nil},
		{"server.slowlog_threshold 0", []string{"LEAF_SERVER_SLOWLOG_THRESHOLD=0s"}, "config: server.slowlog_threshold: must not be 0: 1ns logs every command, a negative value turns SLOWLOG and LATENCY off", nil},
		{"server.tls_key without cert", []string{"LEAF_SERVER_TLS_KEY=k.pem"}, "", []string{"config: server.tls_key: set without server.tls_cert"}},
		{"server.tls_cert without key", []string{"LEAF_SERVER_TLS_CERT=c.pem"}, "", []string{"config: server.tls_cert: set without server.tls_key"}},
		{"server.protected_mode", []string{"LEAF_SERVER_PROTECTED_MODE=maybe"}, "", []string{`config: server.protected_mode: invalid boolean "maybe"`}},
		{"protected mode: every interface, no password", []string{"LEAF_SERVER_ADDR=:6380"}, "", []string{`config: server.addr: ":6380" listens beyond loopback and server.password is empty`, "server.protected_mode: false"}},
		{"protected mode: public address, no password", []string{"LEAF_SERVER_ADDR=10.1.2.3:6380"}, "", []string{`config: server.addr: "10.1.2.3:6380" listens beyond loopback`}},
		{"protected mode: IPv6 any", []string{"LEAF_SERVER_ADDR=[::]:6380"}, "", []string{`config: server.addr: "[::]:6380" listens beyond loopback`}},
		{"server.announce_addr every interface", []string{"LEAF_SERVER_ANNOUNCE_ADDR=0.0.0.0:6380"}, "",
			[]string{"config: server.announce_addr: the host must be one clients can connect to, not an unspecified address", `got "0.0.0.0:6380"`}},
		{"server.announce_addr IPv6 any", []string{"LEAF_SERVER_ANNOUNCE_ADDR=[::]:6380"}, "",
			[]string{"config: server.announce_addr: the host must be one clients can connect to", `got "[::]:6380"`}},
		{"server.announce_addr no host", []string{"LEAF_SERVER_ANNOUNCE_ADDR=:6380"}, "",
			[]string{"config: server.announce_addr: the host must be one clients can connect to", `got ":6380"`}},
		{"server.announce_addr port 0", []string{"LEAF_SERVER_ANNOUNCE_ADDR=10.1.2.3:0"},
			`config: server.announce_addr: the port must be the one clients connect to, not 0, got "10.1.2.3:0"`, nil},
		{"server.announce_addr without port", []string{"LEAF_SERVER_ANNOUNCE_ADDR=10.1.2.3"},
			`config: server.announce_addr: missing port in address, got "10.1.2.3"`, nil},
		{"server.sentinel_masters empty", []string{"LEAF_SERVER_SENTINEL_MASTERS= , "},
			`config: server.sentinel_masters: must name at least one master, got " , "`, nil},
		{"server.sentinel_masters with a space", []string{"LEAF_SERVER_SENTINEL_MASTERS=my master"},
			`config: server.sentinel_masters: "my master": a master name has no spaces or control characters`, nil},
		{"server.redis_cluster", []string{"LEAF_SERVER_REDIS_CLUSTER=yes"}, "", []string{`config: server.redis_cluster: invalid boolean "yes"`}},

		{"store.driver", []string{"LEAF_STORE_DRIVER=oracle"}, `config: store.driver: must be one of sqlite, mysql, postgres, etcd, got "oracle"`, nil},
		{"store.dsn empty", []string{"LEAF_STORE_DSN="}, "config: store.dsn: must not be empty", nil},
		{"store.dsn sqlite default with mysql", []string{"LEAF_STORE_DRIVER=mysql"}, "", []string{"config: store.dsn: store.driver is mysql", `"data/leaf.db"`}},
		{"store.dsn sqlite default with postgres", []string{"LEAF_STORE_DRIVER=postgres"}, "", []string{"config: store.dsn: store.driver is postgres", `"data/leaf.db"`}},
		{"store.dsn bad mysql DSN", []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=leaf:hunter2@tcp(db:3306"}, "", []string{"config: store.dsn: invalid mysql DSN"}},
		{"store.dsn mysql without database", []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=leaf:hunter2@tcp(db:3306)/"}, "", []string{"config: store.dsn: mysql DSN names no database"}},
		{"store.create_schema", []string{"LEAF_STORE_CREATE_SCHEMA=nope"}, `config: store.create_schema: invalid boolean "nope" (want true or false)`, nil},
		{"store.max_open_conns", []string{"LEAF_STORE_MAX_OPEN_CONNS=0"}, "config: store.max_open_conns: must be >= 1, got 0", nil},
		{"store.conn_max_lifetime", []string{"LEAF_STORE_CONN_MAX_LIFETIME=-5m"}, "config: store.conn_max_lifetime: must be >= 0, got -5m", nil},
		{"store.dsn sqlite default with etcd", []string{"LEAF_STORE_DRIVER=etcd"}, "", []string{"config: store.dsn: store.driver is etcd", `"data/leaf.db"`}},
		{"store.etcd_prefix without slash", []string{"LEAF_STORE_ETCD_PREFIX=/leaf"}, `config: store.etcd_prefix: must end with /, got "/leaf"`, nil},
		{"store.etcd_tls_cert without key", []string{"LEAF_STORE_ETCD_TLS_CERT=c.pem"}, "config: store.etcd_tls_cert: and store.etcd_tls_key must be set together", nil},

		{"http.addr", []string{"LEAF_HTTP_ADDR=9090"}, "", []string{`config: http.addr: invalid address "9090"`}},
		{"http.pprof", []string{"LEAF_HTTP_PPROF=on"}, "", []string{`config: http.pprof: invalid boolean "on"`}},
		{"http.metrics_max_tags", []string{"LEAF_HTTP_METRICS_MAX_TAGS=-1"}, "config: http.metrics_max_tags: must be >= 0, got -1", nil},

		{"log.level", []string{"LEAF_LOG_LEVEL=verbose"}, `config: log.level: must be one of debug, info, warn, error, got "verbose"`, nil},
		{"log.level is lower case", []string{"LEAF_LOG_LEVEL=INFO"}, "", []string{`config: log.level:`, `got "INFO"`}},
		{"log.format", []string{"LEAF_LOG_FORMAT=xml"}, `config: log.format: must be one of text, json, got "xml"`, nil},

		{"segment.default_step", []string{"LEAF_SEGMENT_DEFAULT_STEP=0"}, "config: segment.default_step: must be >= 1, got 0", nil},
		{"segment.default_step above max_step", []string{"LEAF_SEGMENT_DEFAULT_STEP=2000", "LEAF_SEGMENT_MAX_STEP=1000"},
			"config: segment.default_step: must be <= segment.max_step (1000), got 2000", nil},
		{"segment.default_step above INT", []string{"LEAF_SEGMENT_DEFAULT_STEP=3000000000", "LEAF_SEGMENT_MAX_STEP=4000000000"},
			"", []string{"config: segment.default_step: must be <= 2147483647", "got 3000000000"}},
		{"segment.default_step overflows", []string{"LEAF_SEGMENT_DEFAULT_STEP=99999999999999999999"}, "", []string{`config: segment.default_step: invalid integer "99999999999999999999"`}},
		{"segment.max_step", []string{"LEAF_SEGMENT_MAX_STEP=0"}, "", []string{"config: segment.max_step: must be >= 1, got 0"}},
		{"segment.segment_duration", []string{"LEAF_SEGMENT_SEGMENT_DURATION=0s"}, "config: segment.segment_duration: must be > 0, got 0", nil},
		{"segment.prefetch_at zero", []string{"LEAF_SEGMENT_PREFETCH_AT=0"}, "config: segment.prefetch_at: must be > 0 and <= 1, got 0", nil},
		{"segment.prefetch_at above one", []string{"LEAF_SEGMENT_PREFETCH_AT=1.5"}, "config: segment.prefetch_at: must be > 0 and <= 1, got 1.5", nil},
		{"segment.prefetch_at NaN", []string{"LEAF_SEGMENT_PREFETCH_AT=NaN"}, "config: segment.prefetch_at: must be > 0 and <= 1, got NaN", nil},
		{"segment.prefetch_at not a number", []string{"LEAF_SEGMENT_PREFETCH_AT=ten%"}, `config: segment.prefetch_at: invalid number "ten%"`, nil},
		{"segment.loaders fraction", []string{"LEAF_SEGMENT_LOADERS=1.5"}, `config: segment.loaders: invalid integer "1.5"`, nil},
		{"segment.load_timeout zero", []string{"LEAF_SEGMENT_LOAD_TIMEOUT=0"}, "config: segment.load_timeout: must be > 0, got 0", nil},
		{"segment.sync_interval", []string{"LEAF_SEGMENT_SYNC_INTERVAL=-1m"}, "config: segment.sync_interval: must be > 0, got -1m", nil},
		{"segment.auto_create", []string{"LEAF_SEGMENT_AUTO_CREATE=2"}, `config: segment.auto_create: must be one of on, off, admin, got "2"`, nil},
		{"segment.max_batch", []string{"LEAF_SEGMENT_MAX_BATCH=0"}, "config: segment.max_batch: must be >= 1, got 0", nil},
		{"segment.max_retry_backoff", []string{"LEAF_SEGMENT_MAX_RETRY_BACKOFF=0s"}, "config: segment.max_retry_backoff: must be > 0, got 0", nil},

		{"cluster.heartbeat", []string{"LEAF_CLUSTER_HEARTBEAT=0s"}, "config: cluster.heartbeat: must be > 0, got 0", nil},
		{"cluster.lease below 3 heartbeats", []string{"LEAF_CLUSTER_HEARTBEAT=2s", "LEAF_CLUSTER_LEASE=5s"},
			"config: cluster.lease: must be at least 3 times cluster.heartbeat (2s), got 5s", nil},
		{"cluster.ack_timeout", []string{"LEAF_CLUSTER_ACK_TIMEOUT=-1s"}, "config: cluster.ack_timeout: must be > 0, got -1s", nil},
		{"cluster.node_timeout negative", []string{"LEAF_CLUSTER_NODE_TIMEOUT=-1s"}, "config: cluster.node_timeout: must be >= 0, got -1s", nil},
		{"cluster.node_timeout below 2 heartbeats", []string{"LEAF_CLUSTER_NODE_TIMEOUT=1500ms"},
			"config: cluster.node_timeout: must be 0 (5 heartbeats) or at least 2 times cluster.heartbeat (1s), got 1.5s", nil},
		{"cluster.max_clock_back", []string{"LEAF_CLUSTER_MAX_CLOCK_BACK=2s"}, "config: cluster.max_clock_back: must be from 0 to 1s (requests wait that long), got 2s", nil},
		{"cluster.snowflake_epoch not a time", []string{"LEAF_CLUSTER_SNOWFLAKE_EPOCH=2020-01-01"}, "", []string{`config: cluster.snowflake_epoch: must be an RFC 3339 time`, `got "2020-01-01"`}},
		{"cluster.snowflake_epoch below a millisecond", []string{"LEAF_CLUSTER_SNOWFLAKE_EPOCH=2020-01-01T00:00:00.0001Z"}, `config: cluster.snowflake_epoch: must be a whole millisecond, got "2020-01-01T00:00:00.0001Z"`, nil},
		{"cluster.snowflake_unit", []string{"LEAF_CLUSTER_SNOWFLAKE_UNIT=1500us"}, "config: cluster.snowflake_unit: must be whole milliseconds from 1ms to 1h, got 1.5ms", nil},
		{"cluster.snowflake_worker_bits", []string{"LEAF_CLUSTER_SNOWFLAKE_WORKER_BITS=17", "LEAF_CLUSTER_SNOWFLAKE_TIME_BITS=34"}, "config: cluster.snowflake_worker_bits: must be <= 16, got 17", nil},
		{"cluster.snowflake bits not 63", []string{"LEAF_CLUSTER_SNOWFLAKE_SEQUENCE_BITS=13"}, "", []string{"config: cluster.snowflake_time_bits: with cluster.snowflake_worker_bits and cluster.snowflake_sequence_bits must make 63", "got 41+10+13"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := loadErr(t, nil, tt.environ)
			// The error names the variable the user set, then its key.
			for _, kv := range tt.environ {
				name, _, _ := strings.Cut(kv, "=")
				key := strings.ToLower(strings.Replace(strings.TrimPrefix(name, "LEAF_"), "_", ".", 1))
				named := func(s string) string {
					return strings.ReplaceAll(s, "config: "+key+":", "config: "+name+" ("+key+"):")
				}
				tt.exact = named(tt.exact)
				tt.want = slices.Clone(tt.want)
				for i := range tt.want {
					tt.want[i] = named(tt.want[i])
				}
			}
			if tt.exact != "" && msg != tt.exact {
				t.Errorf("error\n got %q\nwant %q", msg, tt.exact)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q shows the password", msg)
			}
		})
	}
}

// TestProtectedModeAllows: loopback addresses, a password, or protected mode
// turned off all start.
func TestProtectedModeAllows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
	}{
		{"IPv4 loopback", []string{"LEAF_SERVER_ADDR=127.0.0.1:6380"}},
		{"IPv6 loopback", []string{"LEAF_SERVER_ADDR=[::1]:6380"}},
		{"localhost", []string{"LEAF_SERVER_ADDR=localhost:6380"}},
		{"password set", []string{"LEAF_SERVER_ADDR=:6380", "LEAF_SERVER_PASSWORD=s3cret"}},
		{"protected mode off", []string{"LEAF_SERVER_ADDR=0.0.0.0:6380", "LEAF_SERVER_PROTECTED_MODE=false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Load(nil, tc.environ); err != nil {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	msg := loadErr(t, []string{"--log.format=xml"}, []string{"LEAF_SEGMENT_LOADERS=0", "LEAF_SERVER_ADDR=nope", "LEAF_SEGMENT_MAX_BATCH=x", "LEAF_STORE_DRIVER=pg"})
	// A value that does not parse stops before validation; the rest are reported together.
	if msg != `config: LEAF_SEGMENT_MAX_BATCH (segment.max_batch): invalid integer "x"` {
		t.Errorf("parse errors: got %q", msg)
	}
	msg = loadErr(t, []string{"--log.format=xml"}, []string{"LEAF_SEGMENT_LOADERS=0", "LEAF_SERVER_ADDR=nope", "LEAF_STORE_DRIVER=pg"})
	lines := strings.Split(msg, "\n")
	want := []string{"config: LEAF_SERVER_ADDR (server.addr):", "config: LEAF_STORE_DRIVER (store.driver):", "config: --log.format:", "config: LEAF_SEGMENT_LOADERS (segment.loaders):"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), msg)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestValidateDirect(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	// The zero Config is wrong in almost every key; each is named.
	err := Config{}.Validate()
	if err == nil {
		t.Fatal("Config{}.Validate() = nil")
	}
	for _, k := range []string{"server.addr", "server.max_clients", "store.driver", "store.dsn", "log.level", "segment.loaders", "segment.prefetch_at", "segment.load_timeout"} {
		if !strings.Contains(err.Error(), "config: "+k+": ") {
			t.Errorf("Config{}.Validate() does not name %s:\n%v", k, err)
		}
	}
}

// TestAnnounceAddrAccepted: the addresses clients can dial are accepted
// as server.announce_addr: an IP, a host name, an IPv6 literal.
func TestAnnounceAddrAccepted(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"10.1.2.3:6380", "leaf-0.leaf.svc:6380", "[fd00::1]:6380", "127.0.0.1:1"} {
		cfg, err := Load(nil, []string{"LEAF_SERVER_ANNOUNCE_ADDR=" + addr})
		if err != nil {
			t.Errorf("server.announce_addr %s: %v", addr, err)
			continue
		}
		if cfg.Server.AnnounceAddr != addr {
			t.Errorf("server.announce_addr %s loaded as %q", addr, cfg.Server.AnnounceAddr)
		}
	}
}
