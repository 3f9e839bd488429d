package server_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server/servertest"
)

// INFO compared with redis-server's: the same commands sent to both, then
// every field leaf writes is checked against Redis's (same section, same
// shape) and, where both count the same thing, the same value.

// infoSection is one section of INFO: its title and its fields in order.
type infoSection struct {
	title  string
	fields [][2]string
}

// get is the value of field k, and whether the section has it.
func (s infoSection) get(k string) (string, bool) {
	for _, f := range s.fields {
		if f[0] == k {
			return f[1], true
		}
	}
	return "", false
}

// parseInfo splits INFO's text into sections, checking Redis's layout:
// CRLF line ends, "# Title" headers, "key:value" lines, a blank line
// between sections.
func parseInfo(t *testing.T, text string) []infoSection {
	t.Helper()
	if strings.Contains(strings.ReplaceAll(text, "\r\n", ""), "\n") {
		t.Fatalf("INFO has a line not ending in CRLF:\n%s", text)
	}
	var out []infoSection
	for _, block := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n\r\n") {
		lines := strings.Split(block, "\r\n")
		title, ok := strings.CutPrefix(lines[0], "# ")
		if !ok {
			t.Fatalf("section starts %q, not a title:\n%s", lines[0], text)
		}
		sec := infoSection{title: title}
		for _, l := range lines[1:] {
			k, v, ok := strings.Cut(l, ":")
			if !ok || k == "" {
				t.Fatalf("section %s: line %q is not key:value", title, l)
			}
			sec.fields = append(sec.fields, [2]string{k, v})
		}
		out = append(out, sec)
	}
	return out
}

// bySection indexes sections by title.
func bySection(secs []infoSection) map[string]infoSection {
	m := map[string]infoSection{}
	for _, s := range secs {
		m[s.title] = s
	}
	return m
}

// leafOnlyFields are the fields of Redis's sections that Redis 7.0 does
// not write: leaf's own, documented in README.md (Monitoring).
var leafOnlyFields = map[string]bool{
	"Server/leaf_version":          true,
	"Server/leaf_git_sha1":         true,
	"Server/go_version":            true,
	"Stats/acl_access_denied_auth": true, // Redis 7.2's
	"Keyspace/leaf":                true,
}

// freeText are fields whose text differs in form between two servers
// (paths, names, versions).
var freeText = map[string]bool{"os": true, "executable": true, "config_file": true, "mem_allocator": true}

// shapeOf describes a value's form: an integer, a decimal with n places,
// a percentage, a size ("1.23M"), key=value lists (keys and value forms),
// or text.
func shapeOf(v string) string {
	switch {
	case regexp.MustCompile(`^-?\d+$`).MatchString(v):
		return "int"
	case regexp.MustCompile(`^-?\d+\.\d+$`).MatchString(v):
		return "decimal" + strconv.Itoa(len(v)-strings.IndexByte(v, '.')-1)
	case regexp.MustCompile(`^\d+\.\d\d%$`).MatchString(v):
		return "percent"
	case regexp.MustCompile(`^(\d+B|\d+\.\d\d[KMGTP])$`).MatchString(v):
		return "size"
	case strings.Contains(v, "=") && !strings.Contains(v, " "):
		var parts []string
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			parts = append(parts, k+"="+shapeOf(val))
		}
		return strings.Join(parts, ",")
	}
	return "text"
}

// sameCommands sends the commands of the comparison to one server.
func sameCommands(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		if err := c.Incr(ctx, "a").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]any{
		{"INCRBY", "a", "x"}, // fails: failed_calls
		{"INCR"},             // refused: rejected_calls
		{"NOSUCH", "x"},      // unknown: counted only as an error reply
		{"ECHO", "hello"},
	} {
		_ = c.Do(ctx, args...).Err()
	}
}

// infoPair starts leaf and redis-server, sends both sameCommands from a
// client each, and returns both clients.
func infoPair(t *testing.T) (leaf, rds *redis.Client, in *servertest.Instance) {
	t.Helper()
	raddr := redistest.Start(t)
	in = servertest.Start(t, servertest.Options{})
	mk := func(addr string) *redis.Client {
		// DisableIdentity: Redis 7.0 does not know CLIENT SETINFO, which
		// would make the two command streams differ.
		c := redis.NewClient(redistest.Options(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, DisableIdentity: true}))
		t.Cleanup(func() { c.Close() })
		return c
	}
	leaf, rds = mk(in.Addr), mk(raddr)
	sameCommands(t, leaf)
	sameCommands(t, rds)
	return leaf, rds, in
}

// TestInfoLikeRedis: INFO everything of leaf next to redis-server's:
// sections in Redis's order, every field of a Redis section a field Redis
// writes there (but leaf's own few), of the same form, and the counts
// both keep of the same commands equal.
func TestInfoLikeRedis(t *testing.T) {
	leaf, rds, in := infoPair(t)
	ctx := context.Background()
	ltext, err := leaf.Info(ctx, "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	rtext, err := rds.Info(ctx, "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	lsecs, rsecs := parseInfo(t, ltext), parseInfo(t, rtext)
	rby, lby := bySection(rsecs), bySection(lsecs)

	t.Run("sections", func(t *testing.T) {
		// Redis's order, with leaf's own section before Keyspace.
		var want []string
		for _, s := range rsecs {
			if s.title == "Keyspace" {
				want = append(want, "Leaf")
			}
			want = append(want, s.title)
		}
		var got []string
		for _, s := range lsecs {
			got = append(got, s.title)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("sections %v, want %v", got, want)
		}
	})

	t.Run("fields", func(t *testing.T) {
		for _, ls := range lsecs {
			rs, ok := rby[ls.title]
			if !ok || ls.title == "Cluster" {
				continue // leaf's own section; Cluster: leaf's registry (cmd_cluster.go)
			}
			for _, f := range ls.fields {
				k := f[0]
				if leafOnlyFields[ls.title+"/"+k] {
					continue
				}
				rv, ok := rs.get(k)
				if !ok {
					// A command or error code Redis did not see: the
					// same form as one it did.
					for prefix, seen := range map[string]string{
						"cmdstat_": "cmdstat_incr", "latency_percentiles_usec_": "latency_percentiles_usec_incr", "errorstat_": "errorstat_ERR",
					} {
						if strings.HasPrefix(k, prefix) {
							rv, ok = rs.get(seen)
						}
					}
				}
				if !ok {
					t.Errorf("%s: %s is not a field Redis writes there", ls.title, k)
					continue
				}
				if lshape, rshape := shapeOf(f[1]), shapeOf(rv); lshape != rshape && !freeText[k] {
					t.Errorf("%s: %s = %q (%s), Redis writes %q (%s)", ls.title, k, f[1], lshape, rv, rshape)
				}
			}
		}
	})

	t.Run("same counts", func(t *testing.T) {
		for _, f := range []struct{ sec, key string }{
			{"Clients", "connected_clients"},
			{"Clients", "blocked_clients"},
			{"Stats", "total_connections_received"},
			{"Stats", "total_commands_processed"},
			{"Stats", "total_net_input_bytes"},
			{"Stats", "rejected_connections"},
			{"Stats", "total_error_replies"},
			{"Stats", "expired_keys"},
			{"Stats", "evicted_keys"},
			{"Memory", "maxmemory"},
			{"Memory", "maxmemory_policy"},
			{"Errorstats", "errorstat_ERR"},
			{"Keyspace", "db0"},
			{"Persistence", "loading"},
			{"Persistence", "rdb_bgsave_in_progress"},
			{"Persistence", "aof_enabled"},
			{"Replication", "role"},
			{"Replication", "connected_slaves"},
		} {
			lv, lok := lby[f.sec].get(f.key)
			rv, rok := rby[f.sec].get(f.key)
			if !lok || !rok || lv != rv {
				t.Errorf("%s %s: leaf %q (%v), Redis %q (%v)", f.sec, f.key, lv, lok, rv, rok)
			}
		}
		// commandstats: the same calls, refusals and failures.
		callsRe := regexp.MustCompile(`calls=\d+`)
		counts := func(v string) string {
			return callsRe.FindString(v) + strings.Join(regexp.MustCompile(`(rejected|failed)_calls=\d+`).FindAllString(v, -1), ",")
		}
		for _, cmd := range []string{"incr", "incrby", "echo", "hello"} {
			lv, _ := lby["Commandstats"].get("cmdstat_" + cmd)
			rv, _ := rby["Commandstats"].get("cmdstat_" + cmd)
			if counts(lv) != counts(rv) || lv == "" {
				t.Errorf("cmdstat_%s: leaf %q, Redis %q", cmd, lv, rv)
			}
		}
		// Keyspace: leaf's hits are the INCRs answered from memory; Redis
		// counts a hit for each INCR of an existing key. Both saw INCR a
		// three times, the first a miss for Redis and a database wait for
		// leaf.
		if lv, _ := lby["Stats"].get("keyspace_misses"); lv != "1" {
			t.Errorf("keyspace_misses %s, want 1 (the first INCR loaded a segment)", lv)
		}
		if lv, _ := lby["Stats"].get("keyspace_hits"); lv != "2" {
			t.Errorf("keyspace_hits %s, want 2", lv)
		}
		if lv, _ := lby["Leaf"].get("waited_loads"); lv != "1" {
			t.Errorf("waited_loads %s, want 1 (the first INCR waited for the first load)", lv)
		}
	})

	t.Run("true values", func(t *testing.T) {
		sv := lby["Server"]
		want := map[string]string{
			"process_id":    strconv.Itoa(os.Getpid()),
			"tcp_port":      in.Addr[strings.LastIndexByte(in.Addr, ':')+1:],
			"redis_version": "7.0.0",
			"redis_mode":    "standalone",
			"config_file":   "",
		}
		exe, _ := os.Executable()
		want["executable"] = exe
		for k, v := range want {
			if got, _ := sv.get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		if id, _ := sv.get("run_id"); !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(id) {
			t.Errorf("run_id %q", id)
		}
		num := func(sec, k string) float64 {
			t.Helper()
			v, _ := lby[sec].get(k)
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if err != nil {
				t.Fatalf("%s %s = %q: %v", sec, k, v, err)
			}
			return f
		}
		if used, rss, peak := num("Memory", "used_memory"), num("Memory", "used_memory_rss"), num("Memory", "used_memory_peak"); used <= 0 || rss < used || peak < used {
			t.Errorf("memory: used %v, rss %v, peak %v", used, rss, peak)
		}
		if num("Memory", "total_system_memory") < num("Memory", "used_memory_rss") {
			t.Errorf("total_system_memory below the process's")
		}
		if num("CPU", "used_cpu_user")+num("CPU", "used_cpu_sys") <= 0 {
			t.Errorf("no CPU time")
		}
		if out := num("Stats", "total_net_output_bytes"); out <= 0 {
			t.Errorf("total_net_output_bytes %v", out)
		}
		if v, _ := lby["Latencystats"].get("latency_percentiles_usec_incr"); v == "" {
			t.Errorf("no latency percentiles for incr")
		}
	})
}

// TestInfoSectionsSelected: INFO without arguments and "default" leave
// commandstats and latencystats out, as Redis does; naming them, "all"
// or "everything" prints them; several names print several sections;
// an unknown one prints nothing.
func TestInfoSectionsSelected(t *testing.T) {
	leaf, rds, _ := infoPair(t)
	ctx := context.Background()
	titles := func(c *redis.Client, args ...string) string {
		t.Helper()
		text, err := c.Info(ctx, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		if text == "" {
			return ""
		}
		var out []string
		for _, s := range parseInfo(t, text) {
			if s.title != "Leaf" {
				out = append(out, s.title)
			}
		}
		return strings.Join(out, ",")
	}
	for _, args := range [][]string{
		nil, {"default"}, {"all"}, {"everything"}, {"commandstats"}, {"LATENCYSTATS", "cpu"},
		{"server", "clients", "memory"}, {"errorstats"}, {"keyspace"}, {"nosuch"}, {"default", "commandstats"},
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			if got, want := titles(leaf, args...), titles(rds, args...); got != want {
				t.Fatalf("leaf %q, Redis %q", got, want)
			}
		})
	}
}
