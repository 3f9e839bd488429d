package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// nonDefault has every key set to a valid value other than its default;
// testdata/all.yaml, allEnv and allFlags each spell it out.
func nonDefault() Config {
	return Config{
		Server: ServerConfig{
			Addr:             "0.0.0.0:7000",
			Password:         "s3cret", // read from PasswordFile
			AdminPassword:    "adm1n",  // read from AdminPassFile
			PasswordFile:     "testdata/password",
			AdminPassFile:    "testdata/admin_password",
			MaxClients:       50,
			MaxRequestBytes:  4096,
			IdleTimeout:      30 * time.Second,
			MaxAuthFailures:  3,
			AuthTimeout:      2 * time.Second,
			MaxPipeline:      64,
			EventLoops:       3,
			TLSCert:          "testdata/cert.pem",
			TLSKey:           "testdata/key.pem",
			TLSClientCA:      "testdata/ca.pem",
			ProtectedMode:    false,
			Databases:        4,
			ScriptTimeLimit:  250 * time.Millisecond,
			SlowlogThreshold: 250 * time.Millisecond,
			RedisCluster:     false,
			AnnounceAddr:     "10.1.2.3:7000",
			SentinelMasters:  "orders, users",
		},
		Store: StoreConfig{
			Driver:          "mysql",
			DSN:             "leaf:pw@tcp(127.0.0.1:3306)/leaf",
			CreateSchema:    false,
			CreateDatabase:  true,
			MaxOpenConns:    4,
			ConnMaxLifetime: 90 * time.Second,
			EtcdPrefix:      "/ids/",
			EtcdTLSCA:       "testdata/ca.pem",
			EtcdTLSCert:     "testdata/client.pem",
			EtcdTLSKey:      "testdata/client-key.pem",
		},
		HTTP: HTTPConfig{
			Addr:           "127.0.0.1:9090",
			PProf:          true,
			MetricsMaxTags: 50,
			TLS:            true,
			AllowedHosts:   "ids.example.com, localhost:9090",
			MaxConns:       32,
			IdleTimeout:    5 * time.Second,
			AutoCreate:     true,
			MetricsAuth:    false,
		},
		Log: LogConfig{Level: "debug", Format: "json"},
		Segment: SegmentConfig{
			DefaultStep:     500,
			MaxStep:         20000,
			SegmentDuration: 10 * time.Minute,
			PrefetchAt:      0.25,
			Loaders:         3,
			LoadTimeout:     750 * time.Millisecond,
			SyncInterval:    30 * time.Second,
			AutoCreate:      AutoCreateAdmin,
			MaxTags:         5000,
			CreateRate:      2.5,
			MaxBatch:        5000,
			MaxRetryBackoff: 3 * time.Second,
		},
		Cluster: ClusterConfig{
			Heartbeat: 2 * time.Second, Lease: 20 * time.Second, AckTimeout: 4 * time.Second, NodeTimeout: 6 * time.Second,
			MaxClockBack:   2 * time.Millisecond,
			SnowflakeEpoch: "2020-01-01T00:00:00Z", SnowflakeUnit: 10 * time.Millisecond,
			SnowflakeTimeBits: 40, SnowflakeWorkerBits: 8, SnowflakeSequenceBits: 15,
		},
	}
}

// allEnv is nonDefault as environment variables, names written out so a
// change in the naming rule shows here.
func allEnv() []string {
	return []string{
		"LEAF_SERVER_ADDR=0.0.0.0:7000",
		"LEAF_SERVER_PASSWORD=", // set, and empty: the file's
		"LEAF_SERVER_ADMIN_PASSWORD=",
		"LEAF_SERVER_PASSWORD_FILE=testdata/password",
		"LEAF_SERVER_ADMIN_PASSWORD_FILE=testdata/admin_password",
		"LEAF_SERVER_MAX_CLIENTS=50",
		"LEAF_SERVER_MAX_REQUEST_BYTES=4096",
		"LEAF_SERVER_IDLE_TIMEOUT=30s",
		"LEAF_SERVER_MAX_AUTH_FAILURES=3",
		"LEAF_SERVER_AUTH_TIMEOUT=2s",
		"LEAF_SERVER_MAX_PIPELINE=64",
		"LEAF_SERVER_EVENT_LOOPS=3",
		"LEAF_SERVER_SLOWLOG_THRESHOLD=250ms",
		"LEAF_SERVER_TLS_CERT=testdata/cert.pem",
		"LEAF_SERVER_TLS_KEY=testdata/key.pem",
		"LEAF_SERVER_TLS_CLIENT_CA=testdata/ca.pem",
		"LEAF_SERVER_PROTECTED_MODE=false",
		"LEAF_SERVER_DATABASES=4",
		"LEAF_SERVER_SCRIPT_TIME_LIMIT=250ms",
		"LEAF_SERVER_REDIS_CLUSTER=false",
		"LEAF_SERVER_ANNOUNCE_ADDR=10.1.2.3:7000",
		"LEAF_SERVER_SENTINEL_MASTERS=orders, users",
		"LEAF_STORE_DRIVER=mysql",
		"LEAF_STORE_DSN=leaf:pw@tcp(127.0.0.1:3306)/leaf",
		"LEAF_STORE_CREATE_SCHEMA=false",
		"LEAF_STORE_CREATE_DATABASE=true",
		"LEAF_STORE_MAX_OPEN_CONNS=4",
		"LEAF_STORE_CONN_MAX_LIFETIME=90s",
		"LEAF_STORE_ETCD_PREFIX=/ids/",
		"LEAF_STORE_ETCD_TLS_CA=testdata/ca.pem",
		"LEAF_STORE_ETCD_TLS_CERT=testdata/client.pem",
		"LEAF_STORE_ETCD_TLS_KEY=testdata/client-key.pem",
		"LEAF_HTTP_ADDR=127.0.0.1:9090",
		"LEAF_HTTP_PPROF=true",
		"LEAF_HTTP_METRICS_MAX_TAGS=50",
		"LEAF_HTTP_TLS=true",
		"LEAF_HTTP_ALLOWED_HOSTS=ids.example.com, localhost:9090",
		"LEAF_HTTP_MAX_CONNS=32",
		"LEAF_HTTP_IDLE_TIMEOUT=5s",
		"LEAF_HTTP_AUTO_CREATE=true",
		"LEAF_HTTP_METRICS_AUTH=false",
		"LEAF_LOG_LEVEL=debug",
		"LEAF_LOG_FORMAT=json",
		"LEAF_SEGMENT_DEFAULT_STEP=500",
		"LEAF_SEGMENT_MAX_STEP=20000",
		"LEAF_SEGMENT_SEGMENT_DURATION=10m",
		"LEAF_SEGMENT_PREFETCH_AT=0.25",
		"LEAF_SEGMENT_LOADERS=3",
		"LEAF_SEGMENT_LOAD_TIMEOUT=750ms",
		"LEAF_SEGMENT_SYNC_INTERVAL=30s",
		"LEAF_SEGMENT_AUTO_CREATE=admin",
		"LEAF_SEGMENT_MAX_TAGS=5000",
		"LEAF_SEGMENT_CREATE_RATE=2.5",
		"LEAF_SEGMENT_MAX_BATCH=5000",
		"LEAF_SEGMENT_MAX_RETRY_BACKOFF=3s",
		"LEAF_CLUSTER_HEARTBEAT=2s",
		"LEAF_CLUSTER_LEASE=20s",
		"LEAF_CLUSTER_ACK_TIMEOUT=4s",
		"LEAF_CLUSTER_NODE_TIMEOUT=6s",
		"LEAF_CLUSTER_MAX_CLOCK_BACK=2ms",
		"LEAF_CLUSTER_SNOWFLAKE_EPOCH=2020-01-01T00:00:00Z",
		"LEAF_CLUSTER_SNOWFLAKE_UNIT=10ms",
		"LEAF_CLUSTER_SNOWFLAKE_TIME_BITS=40",
		"LEAF_CLUSTER_SNOWFLAKE_WORKER_BITS=8",
		"LEAF_CLUSTER_SNOWFLAKE_SEQUENCE_BITS=15",
	}
}

// allFlags is nonDefault as flags, in the forms pflag accepts.
func allFlags() []string {
	return []string{
		"--server.addr=0.0.0.0:7000",
		"--server.password_file", "testdata/password",
		"--server.admin_password_file=testdata/admin_password",
		"--server.max_clients=50",
		"--server.max_request_bytes=4096",
		"--server.idle_timeout=30s",
		"--server.max_auth_failures=3",
		"--server.auth_timeout=2s",
		"--server.max_pipeline=64",
		"--server.event_loops=3",
		"--server.slowlog_threshold=250ms",
		"--server.tls_cert=testdata/cert.pem",
		"--server.tls_key=testdata/key.pem",
		"--server.tls_client_ca=testdata/ca.pem",
		"--server.protected_mode=false",
		"--server.databases=4",
		"--server.script_time_limit=250ms",
		"--server.redis_cluster=false",
		"--server.announce_addr=10.1.2.3:7000",
		"--server.sentinel_masters=orders, users",
		"--store.driver=mysql",
		"--store.dsn=leaf:pw@tcp(127.0.0.1:3306)/leaf",
		"--store.create_schema=false",
		"--store.create_database",
		"--store.max_open_conns=4",
		"--store.conn_max_lifetime=90s",
		"--store.etcd_prefix=/ids/",
		"--store.etcd_tls_ca", "testdata/ca.pem",
		"--store.etcd_tls_cert=testdata/client.pem",
		"--store.etcd_tls_key=testdata/client-key.pem",
		"--http.addr=127.0.0.1:9090",
		"--http.pprof",
		"--http.metrics_max_tags=50",
		"--http.tls",
		"--http.allowed_hosts=ids.example.com, localhost:9090",
		"--http.max_conns=32",
		"--http.idle_timeout=5s",
		"--http.auto_create",
		"--http.metrics_auth=false",
		"--log.level=debug",
		"--log.format=json",
		"--segment.default_step=500",
		"--segment.max_step=20000",
		"--segment.segment_duration=10m",
		"--segment.prefetch_at=0.25",
		"--segment.loaders=3",
		"--segment.load_timeout=750ms",
		"--segment.sync_interval=30s",
		"--segment.auto_create=admin",
		"--segment.max_tags=5000",
		"--segment.create_rate=2.5",
		"--segment.max_batch=5000",
		"--segment.max_retry_backoff=3s",
		"--cluster.heartbeat=2s",
		"--cluster.lease", "20s",
		"--cluster.ack_timeout=4s",
		"--cluster.node_timeout=6s",
		"--cluster.max_clock_back=2ms",
		"--cluster.snowflake_epoch=2020-01-01T00:00:00Z",
		"--cluster.snowflake_unit=10ms",
		"--cluster.snowflake_time_bits=40",
		"--cluster.snowflake_worker_bits=8",
		"--cluster.snowflake_sequence_bits=15",
	}
}

// mustLoad calls Load and fails the test on error.
func mustLoad(t *testing.T, args, environ []string) Config {
	t.Helper()
	cfg, err := Load(args, environ)
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", args, environ, err)
	}
	return cfg
}

// loadErr calls Load, which must fail, and returns the error text.
func loadErr(t *testing.T, args, environ []string) string {
	t.Helper()
	cfg, err := Load(args, environ)
	if err == nil {
		t.Fatalf("Load(%q, %q) = %+v, want an error", args, environ, cfg)
	}
	if cfg != (Config{}) {
		t.Errorf("Load returned a non-zero Config with its error: %+v", cfg)
	}
	return err.Error()
}

// writeFile writes a YAML file in a fresh directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leaf.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNonDefaultDiffersEverywhere(t *testing.T) {
	t.Parallel()
	def, nd := Default(), nonDefault()
	for _, k := range keys() {
		if a, b := k.field(&def).Interface(), k.field(&nd).Interface(); a == b {
			t.Errorf("nonDefault leaves %s at its default %v: the source tests would not see it", k.name, a)
		}
	}
	if err := nd.Validate(); err != nil {
		t.Fatalf("nonDefault is invalid: %v", err)
	}
}

func TestLoadSources(t *testing.T) {
	t.Parallel()
	withFile := func(c Config, f string) Config { c.File = f; return c }
	tests := []struct {
		name    string
		args    []string
		environ []string
		want    Config
	}{
		{"defaults", nil, nil, Default()},
		{"defaults ignore other variables", nil, []string{"PATH=/bin", "HOME=/root", "LEAF=1", "LEAFY_STORE_DSN=x", "leaf_server_addr=x"}, Default()},
		{"file sets every key", []string{"--config=testdata/all.yaml"}, nil, withFile(nonDefault(), "testdata/all.yaml")},
		{"environment sets every key", nil, allEnv(), nonDefault()},
		{"flags set every key", allFlags(), nil, nonDefault()},
		{"flag --config with a space", []string{"--config", "testdata/all.yaml"}, nil, withFile(nonDefault(), "testdata/all.yaml")},
		{"empty file gives defaults", []string{"--config=" + writeFile(t, "# nothing\n")}, nil, Default()},
		{"empty sections give defaults", []string{"--config=" + writeFile(t, "server:\nsegment: {}\n")}, nil, Default()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustLoad(t, tt.args, tt.environ)
			if tt.want.File == "" {
				got.File = "" // temp file names vary
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	const file = "--config=testdata/partial.yaml" // addr 127.0.0.1:1111, loaders 5, load_timeout 3s
	tests := []struct {
		name     string
		args     []string
		environ  []string
		addr     string
		loaders  int
		timeout  time.Duration
		maxBatch int64
	}{
		{"default", nil, nil, "127.0.0.1:6380", 8, 2 * time.Second, 100000},
		{"file over default", []string{file}, nil, "127.0.0.1:1111", 5, 3 * time.Second, 100000},
		{"env over default", nil, []string{"LEAF_SERVER_ADDR=127.0.0.1:2222"}, "127.0.0.1:2222", 8, 2 * time.Second, 100000},
		{"env over file", []string{file}, []string{"LEAF_SERVER_ADDR=127.0.0.1:2222", "LEAF_SEGMENT_MAX_BATCH=7"},
			"127.0.0.1:2222", 5, 3 * time.Second, 7},
		{"flag over file", []string{file, "--server.addr=127.0.0.1:3333"}, nil, "127.0.0.1:3333", 5, 3 * time.Second, 100000},
		{"flag over env", []string{"--server.addr=127.0.0.1:3333"}, []string{"LEAF_SERVER_ADDR=127.0.0.1:2222"}, "127.0.0.1:3333", 8, 2 * time.Second, 100000},
		{"flag over env over file", []string{"--segment.load_timeout=4s", file, "--server.addr=127.0.0.1:3333"},
			[]string{"LEAF_SERVER_ADDR=127.0.0.1:2222", "LEAF_SEGMENT_LOAD_TIMEOUT=9s", "LEAF_SEGMENT_LOADERS=6"},
			"127.0.0.1:3333", 6, 4 * time.Second, 100000},
		{"last repeated flag wins", []string{"--server.addr=127.0.0.1:1", "--server.addr=127.0.0.1:2"}, nil, "127.0.0.1:2", 8, 2 * time.Second, 100000},
		{"last repeated variable wins", nil, []string{"LEAF_SERVER_ADDR=127.0.0.1:1", "LEAF_SERVER_ADDR=127.0.0.1:2"}, "127.0.0.1:2", 8, 2 * time.Second, 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustLoad(t, tt.args, tt.environ)
			if got.Server.Addr != tt.addr || got.Segment.Loaders != tt.loaders ||
				got.Segment.LoadTimeout != tt.timeout || got.Segment.MaxBatch != tt.maxBatch {
				t.Errorf("addr, loaders, load_timeout, max_batch = %q, %d, %v, %d; want %q, %d, %v, %d",
					got.Server.Addr, got.Segment.Loaders, got.Segment.LoadTimeout, got.Segment.MaxBatch,
					tt.addr, tt.loaders, tt.timeout, tt.maxBatch)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	t.Run("names are LEAF_SECTION_KEY", func(t *testing.T) {
		t.Parallel()
		for name, want := range map[string]string{
			"server.addr":          "LEAF_SERVER_ADDR",
			"segment.load_timeout": "LEAF_SEGMENT_LOAD_TIMEOUT",
			"store.create_schema":  "LEAF_STORE_CREATE_SCHEMA",
			"segment.default_step": "LEAF_SEGMENT_DEFAULT_STEP",
		} {
			if got := envName(name); got != want {
				t.Errorf("envName(%q) = %q, want %q", name, got, want)
			}
		}
		if len(allEnv()) != len(keys()) {
			t.Errorf("allEnv has %d variables, there are %d keys", len(allEnv()), len(keys()))
		}
	})
	t.Run("LEAF_STORE_CREATE_SCHEMA=false", func(t *testing.T) {
		t.Parallel()
		if mustLoad(t, nil, []string{"LEAF_STORE_CREATE_SCHEMA=false"}).Store.CreateSchema {
			t.Error("create_schema still true")
		}
	})
	t.Run("LEAF_SEGMENT_LOAD_TIMEOUT", func(t *testing.T) {
		t.Parallel()
		if got := mustLoad(t, nil, []string{"LEAF_SEGMENT_LOAD_TIMEOUT=250ms"}).Segment.LoadTimeout; got != 250*time.Millisecond {
			t.Errorf("load_timeout = %v", got)
		}
	})
	t.Run("empty value sets an empty string", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "http:\n  addr: \"127.0.0.1:9090\"\n")
		if got := mustLoad(t, []string{"--config=" + path}, []string{"LEAF_HTTP_ADDR="}).HTTP.Addr; got != "" {
			t.Errorf("http.addr = %q, want empty", got)
		}
	})
	t.Run("surrounding blanks of numbers are ignored", func(t *testing.T) {
		t.Parallel()
		got := mustLoad(t, nil, []string{"LEAF_SEGMENT_LOADERS= 4\r", "LEAF_HTTP_PPROF=true\n"})
		if got.Segment.Loaders != 4 || !got.HTTP.PProf {
			t.Errorf("loaders, pprof = %d, %v", got.Segment.Loaders, got.HTTP.PProf)
		}
	})
	t.Run("integers are decimal, a leading zero too", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ args, environ []string }{
			{nil, []string{"LEAF_SEGMENT_LOADERS=010"}},
			{[]string{"--segment.loaders=010"}, nil},
		} {
			if got := mustLoad(t, c.args, c.environ).Segment.Loaders; got != 10 {
				t.Errorf("%q %q: loaders = %d, want 10", c.args, c.environ, got)
			}
		}
	})
	t.Run("Kubernetes service links are passed over", func(t *testing.T) {
		t.Parallel()
		// Kubernetes defines these for Services named leaf and
		// leaf-server in every pod of the namespace; they must not stop
		// the server.
		got := mustLoad(t, nil, []string{
			"LEAF_SERVER_PORT=tcp://10.0.0.1:6380", "LEAF_SERVER_SERVICE_HOST=10.0.0.1", "LEAF_SERVER_SERVICE_PORT=6380",
			"LEAF_SERVICE_HOST=fd00::1", "LEAF_SERVICE_PORT_REDIS=6380", "LEAF_PORT=tcp://[fd00::1]:6380",
			"LEAF_PORT_6380_TCP=tcp://10.0.0.2:6380", "LEAF_PORT_6380_TCP_PROTO=tcp", "LEAF_PORT_6380_TCP_PORT=6380", "LEAF_PORT_6380_TCP_ADDR=10.0.0.2",
		})
		if !reflect.DeepEqual(got, Default()) {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("unknown LEAF variables stop start-up", func(t *testing.T) {
		t.Parallel()
		tests := []struct{ environ, want string }{
			{"LEAF_STORE_DRIVR=mysql", "config: environment variable LEAF_STORE_DRIVR: no such setting (did you mean LEAF_STORE_DRIVER?)"},
			{"LEAF_SEGMENT_LOADER=4", "(did you mean LEAF_SEGMENT_LOADERS?)"},
			{"LEAF_TEST_MYSQL_DSN=x", "config: environment variable LEAF_TEST_MYSQL_DSN: no such setting"},
			// Not the value Kubernetes gives a service link: a setting
			// the user believes exists.
			{"LEAF_SERVER_PORT=6380", "config: environment variable LEAF_SERVER_PORT: no such setting"},
			{"LEAF_=2", "config: environment variable LEAF_: no such setting"},
		}
		for _, tt := range tests {
			if msg := loadErr(t, nil, []string{tt.environ}); !strings.Contains(msg, tt.want) {
				t.Errorf("Load(%q): error %q does not contain %q", tt.environ, msg, tt.want)
			}
		}
	})
}

func TestFlags(t *testing.T) {
	t.Parallel()
	t.Run("bool without value is true", func(t *testing.T) {
		t.Parallel()
		if !mustLoad(t, []string{"--http.pprof"}, nil).HTTP.PProf {
			t.Error("--http.pprof did not turn pprof on")
		}
	})
	t.Run("IsBoolFlag", func(t *testing.T) {
		t.Parallel()
		for name, want := range map[string]bool{"store.create_schema": true, "http.pprof": true, "store.dsn": false, "segment.load_timeout": false, "store.nope": false} {
			if got := IsBoolFlag(name); got != want {
				t.Errorf("IsBoolFlag(%q) = %v, want %v", name, got, want)
			}
		}
	})
	t.Run("help", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"-h"}, {"--help"}, {"--server.addr=x:1", "--help"}} {
			_, err := Load(args, nil)
			if !errors.Is(err, ErrHelp) || !errors.Is(err, pflag.ErrHelp) {
				t.Errorf("Load(%q) error = %v, want ErrHelp", args, err)
			}
		}
	})
	tests := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"unknown flag suggests the key", []string{"--segment.lodaers=5"}, []string{"config: unknown flag: --segment.lodaers", "did you mean --segment.loaders?"}},
		{"dash for dot", []string{"--server-addr=x:1"}, []string{"unknown flag: --server-addr", "--server.addr?"}},
		{"far from every key", []string{"--frobnicate"}, []string{"config: unknown flag: --frobnicate"}},
		{"positional argument", []string{"serve"}, []string{`config: unexpected argument "serve"`}},
		{"bool value after a space is positional", []string{"--store.create_schema", "false"}, []string{`unexpected argument "false"`}},
		{"missing value", []string{"--server.addr"}, []string{"config: flag needs an argument: --server.addr"}},
		{"bad value names the key", []string{"--segment.loaders=many"}, []string{`config: --segment.loaders: invalid integer "many"`}},
		{"missing --config file", []string{"--config=testdata/nope.yaml"}, []string{"config: --config: open testdata/nope.yaml: no such file"}},
		{"empty --config", []string{"--config="}, []string{"config: --config: empty path"}},
		{"--config is a directory", []string{"--config=testdata"}, []string{"config: ", "testdata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := loadErr(t, tt.args, nil)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	u := Usage("leaf")
	want := []string{
		"Usage: leaf [flags]",
		"LEAF_<SECTION>_<KEY>",
		"--config string",
		"-h, --help",
		`--server.addr string`,
		`(default "127.0.0.1:6380")`,
		"--segment.load_timeout duration",
		"(default 15m)",
		"(default 0.1)",
		"--http.pprof ",
	}
	for _, k := range keys() {
		want = append(want, "--"+k.name+" ")
	}
	for _, w := range want {
		if !strings.Contains(u, w) {
			t.Errorf("usage lacks %q:\n%s", w, u)
		}
	}
	if strings.Index(u, "--server.addr") > strings.Index(u, "--segment.max_batch") {
		t.Error("flags are not in leaf.yaml's order")
	}
}

func TestFile(t *testing.T) {
	t.Parallel()
	t.Run("numbers in YAML forms", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "segment:\n  max_step: 1e6\n  prefetch_at: 1\n  default_step: 2000\nserver:\n  idle_timeout: 0\n")
		got := mustLoad(t, []string{"--config=" + path}, nil)
		if got.Segment.MaxStep != 1000000 || got.Segment.PrefetchAt != 1 || got.Segment.DefaultStep != 2000 || got.Server.IdleTimeout != 0 {
			t.Errorf("got %+v", got.Segment)
		}
	})
	t.Run("keys are case-insensitive", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "Server:\n  ADDR: \"127.0.0.1:1\"\n")
		if got := mustLoad(t, []string{"--config=" + path}, nil).Server.Addr; got != "127.0.0.1:1" {
			t.Errorf("addr = %q", got)
		}
	})
	t.Run("File records the path", func(t *testing.T) {
		t.Parallel()
		if got := mustLoad(t, []string{"--config=testdata/partial.yaml"}, nil).File; got != "testdata/partial.yaml" {
			t.Errorf("File = %q", got)
		}
	})

	tests := []struct {
		name    string
		content string // written to a temp file, unless path is set
		path    string
		want    []string // substrings of the error
	}{
		{"unknown key", "", "testdata/unknown.yaml",
			[]string{`config: testdata/unknown.yaml: unknown key "segment.lodaers" (did you mean "segment.loaders"?)`}},
		{"unknown section", "segments:\n  loaders: 5\n", "", []string{`unknown key "segments.loaders"`, `"segment.loaders"`}},
		{"unknown top-level key", "addr: \"x:1\"\n", "", []string{`unknown key "addr"`}},
		{"several unknown keys", "server:\n  adr: x\n  pasword: y\n", "", []string{`unknown key "server.adr"`, `unknown key "server.pasword"`}},
		{"key nested too deep", "server:\n  addr:\n    host: x\n", "", []string{`unknown key "server.addr.host"`}},
		{"section is a scalar", "server: 5\n", "", []string{"server: must be a section of keys, got 5"}},
		{"key without value", "server:\n  addr:\n", "", []string{"server.addr: no value"}},
		{"parse error names the file", "", "testdata/broken.yaml", []string{"config: testdata/broken.yaml: yaml: line "}},
		{"duplicate key", "server:\n  addr: \"x:1\"\n  addr: \"x:2\"\n", "", []string{"leaf.yaml: ", `"addr" already defined`}},
		{"not a mapping", "- a\n- b\n", "", []string{"leaf.yaml: ", "yaml"}},
		{"number for a string", "server:\n  password: 0123\n", "", []string{"leaf.yaml:2: server.password: want a string, got int 83"}},
		{"list for a string", "server:\n  addr: [a, b]\n", "", []string{"leaf.yaml:2: server.addr: want a string"}},
		{"fraction for an integer", "segment:\n  loaders: 1.5\n", "", []string{`leaf.yaml:2: segment.loaders: invalid integer "1.5"`}},
		{"duration without unit", "segment:\n  load_timeout: 5\n", "", []string{`leaf.yaml:2: segment.load_timeout: invalid duration "5"`}},
		{"yes is not a value of auto_create", "segment:\n  auto_create: yes\n", "", []string{`leaf.yaml:2: segment.auto_create: must be one of on, off, admin, got "yes"`}},
		{"value error and validation", "segment:\n  loaders: 0\n", "", []string{"leaf.yaml:2: segment.loaders: must be >= 1, got 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if path == "" {
				path = writeFile(t, tt.content)
			}
			msg := loadErr(t, []string{"--config=" + path}, nil)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestImplicitFile changes the working directory, so it cannot run in
// parallel with other tests (Go runs it before the parallel ones resume).
func TestImplicitFile(t *testing.T) {
	t.Run("leaf.yaml in the working directory is read", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "leaf.yaml"), []byte("server:\n  addr: \"127.0.0.1:4444\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		got := mustLoad(t, nil, []string{"LEAF_SEGMENT_LOADERS=2"})
		if got.Server.Addr != "127.0.0.1:4444" || got.Segment.Loaders != 2 || got.File != "leaf.yaml" {
			t.Errorf("addr, loaders, file = %q, %d, %q", got.Server.Addr, got.Segment.Loaders, got.File)
		}
		// --config replaces it.
		path := writeFile(t, "server:\n  password: \"p\"\n")
		got = mustLoad(t, []string{"--config=" + path}, nil)
		if got.Server.Addr != "127.0.0.1:6380" || got.Server.Password != "p" || got.File != path {
			t.Errorf("with --config: addr, password, file = %q, %q, %q", got.Server.Addr, got.Server.Password, got.File)
		}
	})
	t.Run("no leaf.yaml means defaults", func(t *testing.T) {
		t.Chdir(t.TempDir())
		if got := mustLoad(t, nil, nil); !reflect.DeepEqual(got, Default()) {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("bad leaf.yaml stops start-up", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "leaf.yaml"), []byte("server:\n  adr: x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		if msg := loadErr(t, nil, nil); !strings.Contains(msg, `config: leaf.yaml: unknown key "server.adr"`) {
			t.Errorf("error = %q", msg)
		}
	})
	t.Run("unreadable leaf.yaml stops start-up", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "leaf.yaml"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		if msg := loadErr(t, nil, nil); !strings.Contains(msg, "leaf.yaml") {
			t.Errorf("error = %q", msg)
		}
	})
}
