package e2e

// The Redis monitoring tools teams already run, against the binary:
// Debian's prometheus-redis-exporter scraping leaf (and, for comparison,
// a redis-server), and redis-cli's --stat, --latency, --scan and
// --bigkeys.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// needTool returns the path of a Debian tool the test needs; it skips the
// test when it is missing, except under CI=true, where it fails
// (scripts/test.sh installs them).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		how := fmt.Sprintf("%s not found: install the Debian package %s (scripts/test.sh does as root)", name, pkg)
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	return path
}

// exporter is a running prometheus-redis-exporter.
type exporter struct {
	url  string // of its /metrics
	done chan struct{}

	mu  sync.Mutex
	log strings.Builder
}

// Log is what the exporter wrote so far.
func (e *exporter) Log() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

// startExporter runs the exporter against the Redis server at addr on a
// free loopback port, and stops it (by its PID) at cleanup. A port taken
// by another process between the check and the exporter's bind makes it
// exit: then it is tried again on another port.
func startExporter(t *testing.T, addr string, args ...string) *exporter {
	t.Helper()
	bin := needTool(t, "prometheus-redis-exporter", "prometheus-redis-exporter")
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		web := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, append([]string{"-redis.addr=redis://" + addr, "-web.listen-address=" + web}, args...)...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		e := &exporter{url: "http://" + web + "/metrics", done: make(chan struct{})}
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				e.mu.Lock()
				e.log.WriteString(sc.Text() + "\n")
				e.mu.Unlock()
			}
			_ = cmd.Wait()
			close(e.done)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-e.done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-e.done
			}
		})
		if e.waitHTTP(t, "http://"+web+"/health") {
			return e
		}
	}
	t.Fatal("the exporter did not start on any of 5 ports")
	return nil
}

// waitHTTP waits until url answers, or the exporter exits (false). It
// waits for an event, polling the port the exporter binds after its
// start-up line; it asserts no timing.
func (e *exporter) waitHTTP(t *testing.T, url string) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hung start, not an assertion
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return true
		}
		select {
		case <-e.done:
			t.Logf("the exporter exited:\n%s", e.Log())
			return false
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter does not answer on %s:\n%s", url, e.Log())
		}
	}
}

// series is one scrape: value by series ("name{k="v",...}", labels
// sorted as the exporter writes them).
type series map[string]float64

var seriesRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// scrape reads the exporter's /metrics.
func (e *exporter) scrape(t *testing.T) series {
	t.Helper()
	resp, err := http.Get(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := seriesRe.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a line of /metrics not in the text format: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[m[1]+m[2]] = v
	}
	return out
}

// names are the metric names of a scrape.
func (s series) names() map[string]bool {
	out := map[string]bool{}
	for k := range s {
		name, _, _ := strings.Cut(k, "{")
		out[name] = true
	}
	return out
}

// get is the value of a series, failing the test when it is absent.
func (s series) get(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := s[key]
	if !ok {
		t.Fatalf("no series %s", key)
	}
	return v
}

// withLabel finds the series of a metric whose labels include all of want.
func (s series) withLabel(name string, want ...string) []string {
	var out []string
	for k := range s {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		if ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// exporterErrors are the lines of an exporter's log that report a problem.
func exporterErrors(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=error") || strings.Contains(l, "level=warn") || strings.Contains(l, "level=fatal") {
			out = append(out, l)
		}
	}
	return out
}

// monitoringTraffic is what the tests send: INCRs on two tags, one
// INCRBY answered and one refused for its count, an unknown command and
// a command with the wrong arity. It returns the client, named "e2e".
func monitoringTraffic(t *testing.T, addr string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, DisableIdentity: true}))
	t.Cleanup(func() { c.Close() })
	if err := c.Do(ctx, "CLIENT", "SETNAME", "e2e").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 70 {
		tag := "order"
		if i%7 == 0 {
			tag = "user" // 10 of them
		}
		if err := c.Incr(ctx, tag).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.IncrBy(ctx, "order", 10).Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{"INCRBY", "order", "x"}, {"NOSUCH"}, {"INCR"}} {
		if err := c.Do(ctx, args...).Err(); err == nil {
			t.Fatalf("%v: no error", args)
		}
	}
	return c
}

// dashboardSeries are the series of Grafana's standard Redis dashboard
// for the exporter (ID 763: uptime, clients, memory, commands executed,
// hits and misses, network, keys per database, expiring keys, expired and
// evicted keys, calls per command; ops per second are the rate of
// redis_commands_processed_total), and those of the other figures teams
// watch: CPU, errors, SLOWLOG, LATENCY, configuration and connected
// clients. The exporter (1.45) exports each of them for redis-server too
// (checked below).
var dashboardSeries = []string{
	"redis_up", "redis_uptime_in_seconds", "redis_start_time_seconds",
	"redis_connected_clients", "redis_blocked_clients", "redis_connected_clients_details",
	"redis_memory_used_bytes", "redis_memory_max_bytes", "redis_memory_used_rss_bytes", "redis_memory_used_peak_bytes",
	"redis_total_system_memory_bytes", "redis_mem_fragmentation_ratio", "redis_config_maxmemory", "redis_config_maxclients",
	"redis_commands_processed_total", "redis_commands_total", "redis_commands_duration_seconds_total",
	"redis_commands_failed_calls_total", "redis_commands_rejected_calls_total", "redis_latency_percentiles_usec",
	"redis_net_input_bytes_total", "redis_net_output_bytes_total",
	"redis_keyspace_hits_total", "redis_keyspace_misses_total", "redis_db_keys", "redis_db_keys_expiring",
	"redis_db_avg_ttl_seconds", "redis_expired_keys_total", "redis_evicted_keys_total",
	"redis_cpu_sys_seconds_total", "redis_cpu_user_seconds_total",
	"redis_cpu_sys_children_seconds_total", "redis_cpu_user_children_seconds_total",
	"redis_errors_total", "redis_total_error_replies", "redis_rejected_connections_total", "redis_connections_received_total",
	"redis_slowlog_length", "redis_slowlog_last_id", "redis_last_slow_execution_duration_seconds",
	"redis_latency_spike_last", "redis_latency_spike_duration_seconds",
	"redis_rdb_changes_since_last_save", "redis_rdb_last_save_timestamp_seconds", "redis_loading_dump_file",
	"redis_connected_slaves", "redis_instance_info",
}

// leftOut are the series the exporter makes of Redis fields that mean
// nothing for leaf, which leaf therefore does not write (README.md,
// Monitoring): the allocator's internals, Lua and scripts, AOF and
// snapshot forks, replication offsets and backlog, defragmentation,
// tracking, pub/sub, I/O threads, and the main thread's CPU (leaf's
// event loops are goroutines on any thread, so no thread is "main").
var leftOut = regexp.MustCompile(`^redis_(` + strings.Join([]string{
	`allocator_.*`, `active_defrag_running`, `defrag_.*`, `lazyfree_pending_objects`,
	`mem_clients_.*`, `mem_fragmentation_bytes`, `mem_not_counted_for_eviction_bytes`,
	`memory_used_(dataset|lua|overhead|scripts|startup)_bytes`, `number_of_cached_scripts`,
	`aof_.*`, `rdb_(current|last)_.*`, `latest_fork_seconds`, `module_fork_.*`,
	`master_repl_offset`, `second_repl_offset`, `repl_backlog_.*`, `replication_backlog_bytes`,
	`replica_.*`, `slave_expires_tracked_keys`, `migrate_cached_sockets_total`,
	`tracking_.*`, `pubsub_.*`, `io_thread.*`, `config_io_threads`, `clients_in_timeout_table`,
	`client_recent_max_.*`, `cluster_connections`, `cpu_(sys|user)_main_thread_seconds_total`,
	`dump_payload_sanitizations`, `expired_stale_percentage`, `expired_time_cap_reached_total`,
	`total_(reads|writes)_processed`, `unexpected_error_replies`,
}, "|") + `)$`)

// TestExporterScrapesLeaf: prometheus-redis-exporter scrapes leaf without
// an error logged; every series of the dashboard is there, with true
// values for the traffic sent; and every series it exports for a
// redis-server given the same traffic is there too, but for the fields
// leaf leaves out.
func TestExporterScrapesLeaf(t *testing.T) {
	t.Parallel()
	needTool(t, "prometheus-redis-exporter", "prometheus-redis-exporter")
	p := startLeaf(t, t.TempDir(), "LEAF_SERVER_SLOWLOG_THRESHOLD=1ns") // every command: LATENCY has events
	monitoringTraffic(t, p.Addr)
	args := []string{"-include-system-metrics", "-redis-only-metrics", "-export-client-list", "-ping-on-connect"}
	before := time.Now()
	exp := startExporter(t, p.Addr, args...)
	m := exp.scrape(t)

	raddr := redistest.Start(t)
	rc := monitoringTraffic(t, raddr)
	ctx := context.Background()
	// Redis's latency monitor is off unless given a threshold.
	if err := rc.ConfigSet(ctx, "latency-monitor-threshold", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// A script that runs until 2 ms have passed by Redis's clock: a
	// latency event, as leaf records for every command here.
	const spin = "local s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] " +
		"repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - t0 >= 2000 return 1"
	if err := rc.Do(ctx, "EVAL", spin, 0).Err(); err != nil {
		t.Fatalf("a slow EVAL on Redis: %v", err)
	}
	rm := startExporter(t, raddr, args...).scrape(t)

	t.Run("no errors logged", func(t *testing.T) {
		if errs := exporterErrors(exp.Log()); len(errs) > 0 {
			t.Fatalf("the exporter logged:\n%s", strings.Join(errs, "\n"))
		}
	})

	t.Run("dashboard series", func(t *testing.T) {
		leaf, redis := m.names(), rm.names()
		for _, name := range dashboardSeries {
			if !redis[name] {
				t.Errorf("%s: not exported for redis-server either: the list is wrong", name)
			}
			if !leaf[name] {
				t.Errorf("%s: not exported for leaf", name)
			}
		}
	})

	t.Run("all but what leaf leaves out", func(t *testing.T) {
		leaf := m.names()
		var missing []string
		for name := range rm.names() {
			if !leaf[name] && !leftOut.MatchString(name) {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Fatalf("exported for redis-server, not for leaf: %v", missing)
		}
	})

	t.Run("true values", func(t *testing.T) {
		now := time.Now()
		for _, tc := range []struct {
			series string
			want   float64
		}{
			{"redis_up", 1},
			{`redis_commands_total{cmd="incr"}`, 70},
			{`redis_commands_total{cmd="incrby"}`, 2},
			{`redis_commands_failed_calls_total{cmd="incrby"}`, 1},
			{`redis_commands_rejected_calls_total{cmd="incr"}`, 1},
			// The test's errors, and any its client's handshake met, as
			// on Redis 7.0 with the same client.
			{`redis_errors_total{err="ERR"}`, rm.get(t, `redis_errors_total{err="ERR"}`)},
			{"redis_total_error_replies", rm.get(t, "redis_total_error_replies")},
			// The test's client and the exporter's connection.
			{"redis_connected_clients", 2},
			{"redis_blocked_clients", 0},
			{"redis_config_maxclients", 10000},
			{"redis_memory_max_bytes", 0},
			{"redis_config_maxmemory", 0},
			{`redis_db_keys{db="db0"}`, 2},
			{`redis_db_keys_expiring{db="db0"}`, 0},
			{`redis_db_avg_ttl_seconds{db="db0"}`, 0},
			// Hits: INCRs answered from memory; misses: the two first
			// INCRs, which waited for their tags' segments.
			{"redis_keyspace_hits_total", 68 + 1},
			{"redis_keyspace_misses_total", 2},
			{"redis_expired_keys_total", 0},
			{"redis_evicted_keys_total", 0},
			{"redis_rdb_changes_since_last_save", 0},
			{"redis_rejected_connections_total", 0},
			{"redis_connected_slaves", 0},
		} {
			if got := m.get(t, tc.series); got != tc.want {
				t.Errorf("%s = %v, want %v", tc.series, got, tc.want)
			}
		}
		// Every command that ran is in the counts by name.
		var byName float64
		for _, k := range m.withLabel("redis_commands_total") {
			byName += m[k]
		}
		if total := m.get(t, "redis_commands_processed_total"); total != byName {
			t.Errorf("redis_commands_processed_total %v, the sum by command %v", total, byName)
		}
		for _, tc := range []struct {
			series string
			low    float64
		}{
			{`redis_commands_duration_seconds_total{cmd="incr"}`, math.SmallestNonzeroFloat64},
			{"redis_memory_used_bytes", 1},
			{"redis_memory_used_rss_bytes", m.get(t, "redis_memory_used_bytes")},
			{"redis_memory_used_peak_bytes", m.get(t, "redis_memory_used_bytes")},
			{"redis_total_system_memory_bytes", m.get(t, "redis_memory_used_rss_bytes")},
			{"redis_cpu_user_seconds_total", math.SmallestNonzeroFloat64},
			{"redis_cpu_sys_children_seconds_total", 0},
			// 70 INCRs of at least 24 bytes each.
			{"redis_net_input_bytes_total", 70 * 24},
			{"redis_net_output_bytes_total", 70 * 4},
			{"redis_connections_received_total", 2},
			{"redis_slowlog_length", 1},
			{"redis_slowlog_last_id", 1},
			{"redis_last_slow_execution_duration_seconds", 0},
			{`redis_latency_percentiles_usec{cmd="incr",quantile="99"}`, 1.024},
		} {
			if got := m.get(t, tc.series); got < tc.low {
				t.Errorf("%s = %v, want at least %v", tc.series, got, tc.low)
			}
		}
		if p50, p99 := m.get(t, `redis_latency_percentiles_usec{cmd="incr",quantile="50"}`),
			m.get(t, `redis_latency_percentiles_usec{cmd="incr",quantile="99"}`); p50 > p99 {
			t.Errorf("INCR's p50 %v above its p99 %v", p50, p99)
		}
		up := m.get(t, "redis_uptime_in_seconds")
		if start := m.get(t, "redis_start_time_seconds"); start > float64(now.Unix())+1 || start < float64(before.Unix())-up-1 {
			t.Errorf("start time %v, uptime %v, scraped between %v and %v", start, up, before.Unix(), now.Unix())
		}
		if saved := m.get(t, "redis_rdb_last_save_timestamp_seconds"); saved > float64(now.Unix())+1 || saved < float64(before.Unix())-up-1 {
			t.Errorf("last save %v: the last range taken, during the test", saved)
		}
		if got := m.withLabel("redis_latency_spike_last"); len(got) < 2 {
			t.Errorf("LATENCY events %v, want command and fast-command", got)
		}
		// CLIENT LIST as the exporter parses it: the test's client by name,
		// the exporter's own connection running CLIENT LIST.
		if got := m.withLabel("redis_connected_clients_details", `name="e2e"`, `db="0"`, `host="127.0.0.1"`, `cmd="incr"`); len(got) != 1 {
			t.Errorf("the test's client in CLIENT LIST: %v", m.withLabel("redis_connected_clients_details"))
		}
		if got := m.withLabel("redis_connected_clients_details", `name="redis_exporter"`, `cmd="client|list"`); len(got) != 1 {
			t.Errorf("the exporter's connection in CLIENT LIST: %v", m.withLabel("redis_connected_clients_details"))
		}
	})
}

// commandsMissing lists those of names leaf does not know (COMMAND INFO
// answers nil), for the tests that need commands added elsewhere.
func commandsMissing(t *testing.T, addr string, names ...string) []string {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1}))
	defer c.Close()
	var missing []string
	for _, n := range names {
		v, err := c.Do(context.Background(), "COMMAND", "INFO", n).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || v[0] == nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// TestExporterCheckKeys: with --check-keys and --count-keys the exporter
// reads each tag's value (GET: the last ID this server handed out) and
// size (STRLEN), and counts the tags matching a pattern (SCAN), without
// an error logged. It needs TYPE and SCAN: until leaf has them it skips.
func TestExporterCheckKeys(t *testing.T) {
	t.Parallel()
	needTool(t, "prometheus-redis-exporter", "prometheus-redis-exporter")
	p := startLeaf(t, t.TempDir())
	if missing := commandsMissing(t, p.Addr, "type", "scan"); len(missing) > 0 {
		t.Skipf("leaf does not have %v yet, which the exporter's key checks need", missing)
	}
	monitoringTraffic(t, p.Addr)
	exp := startExporter(t, p.Addr, "-check-keys=order,us*", "-count-keys=db0=*", "-redis-only-metrics")
	m := exp.scrape(t)
	if errs := exporterErrors(exp.Log()); len(errs) > 0 {
		t.Fatalf("the exporter logged:\n%s", strings.Join(errs, "\n"))
	}
	c := p.client(t)
	for _, tag := range []string{"order", "user"} {
		last, err := c.Get(context.Background(), tag).Int64()
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf(`{db="db0",key=%q}`, tag)
		if got := m.get(t, "redis_key_value"+key); got != float64(last) {
			t.Errorf("%s: value %v, want %d", tag, got, last)
		}
		if got := m.get(t, "redis_key_size"+key); got != float64(len(strconv.FormatInt(last, 10))) {
			t.Errorf("%s: size %v, want the length of %d", tag, got, last)
		}
	}
	if got := m.get(t, `redis_keys_count{db="db0",key="*"}`); got != 2 {
		t.Errorf("keys counted %v, want 2", got)
	}
}

// statLineRe is a data line of redis-cli --stat: keys, memory, clients,
// blocked, requests with the delta, connections.
var statLineRe = regexp.MustCompile(`^(\d+)\s+(\d+(?:\.\d+)?[BKMGTP])\s+(\d+)\s+(\d+)\s+(\d+) \(\+(\d+)\)\s+(\d+)\s*$`)

// TestRedisCliStat: redis-cli --stat against leaf prints true figures:
// the tags as keys, the memory, the clients (the test's and its own),
// none blocked, the requests, the connections; no missing figure (which
// redis-cli prints as -9223372036854775808).
func TestRedisCliStat(t *testing.T) {
	t.Parallel()
	needTool(t, "redis-cli", "redis-tools")
	stdbuf := needTool(t, "stdbuf", "coreutils")
	p := startLeaf(t, t.TempDir())
	monitoringTraffic(t, p.Addr)
	host, port, _ := net.SplitHostPort(p.Addr)
	// stdbuf: redis-cli writes to a pipe a line at a time.
	cmd := exec.Command(stdbuf, "-oL", "redis-cli", "-h", host, "-p", port, "--stat", "-i", "0.1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill() // by PID: the one started here
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	var lines []string
	for len(lines) < 3 && sc.Scan() {
		if l := sc.Text(); statLineRe.MatchString(l) || strings.Contains(l, "-9223372036854775808") {
			lines = append(lines, l)
		} else if !strings.Contains(l, "data") && !strings.Contains(l, "keys") {
			t.Fatalf("redis-cli --stat printed %q", l)
		}
	}
	if len(lines) < 3 {
		t.Fatalf("redis-cli --stat ended after %q: %v", lines, sc.Err())
	}
	prev := -1
	for _, l := range lines {
		m := statLineRe.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("redis-cli --stat line %q: a missing figure", l)
		}
		keys, clients, blocked, requests := m[1], m[3], m[4], m[5]
		if keys != "2" || clients != "2" || blocked != "0" {
			t.Errorf("%q: keys %s clients %s blocked %s, want 2 2 0", l, keys, clients, blocked)
		}
		n, _ := strconv.Atoi(requests)
		if n < 74 || n <= prev {
			t.Errorf("%q: %d requests after %d, want at least the test's 74, growing by --stat's own INFO", l, n, prev)
		}
		prev = n
	}
}

// TestRedisCliLatency: redis-cli --latency, which PINGs, prints its
// figures (min, max, avg, samples) consistent with one another.
func TestRedisCliLatency(t *testing.T) {
	t.Parallel()
	needTool(t, "redis-cli", "redis-tools")
	p := startLeaf(t, t.TempDir())
	host, port, _ := net.SplitHostPort(p.Addr)
	// Not on a terminal, --latency prints one line after the interval and
	// exits.
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "--latency", "-i", "0.2").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --latency: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("redis-cli --latency printed %q, want min max avg samples", out)
	}
	var v [4]float64
	for i, s := range f {
		if v[i], err = strconv.ParseFloat(s, 64); err != nil || v[i] < 0 {
			t.Fatalf("redis-cli --latency printed %q", out)
		}
	}
	if v[0] > v[2] || v[2] > v[1] || v[3] < 1 {
		t.Fatalf("redis-cli --latency: min %v avg %v max %v over %v samples", v[0], v[2], v[1], v[3])
	}
}

// TestRedisCliScanBigkeys: redis-cli --scan lists the tags and --bigkeys
// sizes them (by their last IDs), as for a redis-server given the same
// INCRs: the same keys, the same summary. They need SCAN, DBSIZE and
// TYPE: until leaf has them the test skips.
func TestRedisCliScanBigkeys(t *testing.T) {
	t.Parallel()
	needTool(t, "redis-cli", "redis-tools")
	p := startLeaf(t, t.TempDir())
	if missing := commandsMissing(t, p.Addr, "scan", "dbsize", "type"); len(missing) > 0 {
		t.Skipf("leaf does not have %v yet, which --scan and --bigkeys need", missing)
	}
	raddr := redistest.Start(t)
	run := func(addr, mode string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, mode).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %s: %v\n%s", mode, err, out)
		}
		return string(out)
	}
	for _, addr := range []string{p.Addr, raddr} {
		c := monitoringTraffic(t, addr)
		// Seven digits on both, wherever leaf's ranges happen to start (a
		// prefetch may or may not have run before): leaf's SET is a floor.
		if err := c.Set(context.Background(), "big", 1_000_000, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.IncrBy(context.Background(), "big", 99_999).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(out string) string {
		f := strings.Fields(out)
		sort.Strings(f)
		return strings.Join(f, " ")
	}
	if l, r := keys(run(p.Addr, "--scan")), keys(run(raddr, "--scan")); l != r || l != "big order user" {
		t.Errorf("redis-cli --scan: leaf %q, Redis %q", l, r)
	}
	summary := func(out string) string {
		_, after, ok := strings.Cut(out, "-------- summary -------")
		if !ok {
			t.Fatalf("redis-cli --bigkeys printed no summary:\n%s", out)
		}
		return after
	}
	lout := run(p.Addr, "--bigkeys")
	if l, r := summary(lout), summary(run(raddr, "--bigkeys")); l != r {
		t.Errorf("redis-cli --bigkeys summary:\n leaf  %s\n Redis %s", l, r)
	}
	for _, bad := range []string{"Error", "Warning", "-9223372036854775808", "Couldn't"} {
		if strings.Contains(lout, bad) {
			t.Errorf("redis-cli --bigkeys printed %q:\n%s", bad, lout)
		}
	}
}
