package e2e

// Servers that know each other through the store: floors confirmed by
// every live server before OK, a server that cannot confirm named, and
// Snowflake tags under kills and restarts, a paused database and worker ids
// that run out.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// clusterEnv: heartbeats every 100ms, so changes are confirmed quickly;
// an ack timeout a busy machine does not run out while three servers on
// one SQLite file take turns at its lock; and a lease long enough that a
// stalled server stays live while a floor waits that long for it.
var clusterEnv = []string{"LEAF_CLUSTER_HEARTBEAT=100ms", "LEAF_CLUSTER_LEASE=60s", "LEAF_CLUSTER_ACK_TIMEOUT=15s", "LEAF_LOG_LEVEL=info"}

// liveNodes reads LEAF.NODES through c, by address.
func liveNodes(t *testing.T, c *redis.Client) map[string]map[string]any {
	t.Helper()
	v, err := c.Do(context.Background(), "LEAF.NODES").Result()
	if err != nil {
		t.Fatalf("LEAF.NODES: %v", err)
	}
	out := map[string]map[string]any{}
	for _, e := range v.([]any) {
		f := map[string]any{}
		for k, v := range e.(map[any]any) {
			f[k.(string)] = v
		}
		out[f["addr"].(string)] = f
	}
	return out
}

// TestFloorsEverywhere: three servers on one store each cache IDs of a
// tag; once LEAF.FLOOR or SET through one answers, none hands out an ID at
// or below the floor. A server stopped (SIGSTOP) is still live and cannot
// confirm: the floor's error names it, and it applies the floor once it
// runs again.
func TestFloorsEverywhere(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dir string, env []string) {
		env = append(env, clusterEnv...)
		var procs []*proc
		var clients []*redis.Client
		for range 3 {
			p := startLeaf(t, dir, env...)
			procs = append(procs, p)
			clients = append(clients, patientClient(t, p))
		}
		ctx := context.Background()
		for i, c := range clients {
			if id := redistest.Incr(t, c, "migrate"); id > 1_000_000 {
				t.Fatalf("server %d's first ID %d: the test needs IDs below the floor cached", i, id)
			}
		}
		if f, err := clients[0].Do(ctx, "LEAF.FLOOR", "migrate", "1000000").Int64(); err != nil || f < 1_000_000 {
			t.Fatalf("LEAF.FLOOR = %d, %v", f, err)
		}
		for i, c := range clients {
			if id := redistest.Incr(t, c, "migrate"); id <= 1_000_000 {
				t.Fatalf("server %d handed out %d after LEAF.FLOOR migrate 1000000 answered", i, id)
			}
		}
		if err := clients[1].Set(ctx, "migrate", 2_000_000, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		for i, c := range clients {
			if id := redistest.Incr(t, c, "migrate"); id <= 2_000_000 {
				t.Fatalf("server %d handed out %d after SET migrate 2000000 answered", i, id)
			}
		}
		nodes := liveNodes(t, clients[0])
		workers := map[any]bool{}
		for _, p := range procs {
			n, ok := nodes[p.Addr]
			if !ok {
				t.Fatalf("LEAF.NODES lacks %s: %v", p.Addr, nodes)
			}
			workers[n["worker_id"]] = true
		}
		if len(nodes) != 3 || len(workers) != 3 {
			t.Fatalf("LEAF.NODES = %v: want 3 servers with 3 worker ids", nodes)
		}
		// One store, one identity: in every server's INFO and LEAF.NODES;
		// a server on a store of its own shows another.
		ids := map[string]bool{}
		for _, c := range clients {
			ids[infoField(t, c, "leaf", "store_id")] = true
		}
		for _, n := range nodes {
			ids[fmt.Sprint(n["store_id"])] = true
		}
		if len(ids) != 1 || ids[""] {
			t.Fatalf("store_id in INFO and LEAF.NODES of servers on one store: %v, want one", ids)
		}
		alone := startLeaf(t, t.TempDir())
		if id := infoField(t, patientClient(t, alone), "leaf", "store_id"); id == "" || ids[id] {
			t.Fatalf("a server on another store: store_id %q, the shared store's %v", id, ids)
		}

		// Server 2 stops: live, and silent.
		stopped := procs[2]
		t.Cleanup(func() { _ = stopped.cmd.Process.Signal(syscall.SIGCONT) })
		var err error
		for attempt := 1; ; attempt++ {
			if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			err = clients[0].Do(ctx, "LEAF.FLOOR", "migrate", "3000000").Err()
			// A stop inside one of its heartbeat's writes leaves the
			// SQLite file's write lock held until it runs again, and no
			// other server can write: run it on until another server's
			// write passes (its write ended), and stop it again.
			if !strings.HasSuffix(t.Name(), "/SQLite") || attempt == 5 || err == nil ||
				!strings.Contains(err.Error(), "database unavailable") {
				break
			}
			t.Logf("stopped inside a write (%v): again", err)
			if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if err := clients[0].Do(ctx, "LEAF.CREATE", fmt.Sprintf("probe%d", attempt)).Err(); err != nil {
				t.Fatalf("a write after the stopped server ran on: %v", err)
			}
		}
		if err == nil || !strings.Contains(err.Error(), "servers did not confirm the change within 15s") ||
			!strings.Contains(err.Error(), "("+stopped.Addr+")") || strings.Contains(err.Error(), procs[1].Addr) {
			t.Fatalf("LEAF.FLOOR with server 2 stopped: %v; want an error naming %s alone", err, stopped.Addr)
		}
		if id := redistest.Incr(t, clients[1], "migrate"); id <= 3_000_000 {
			t.Fatalf("server 1 handed out %d after confirming the floor 3000000", id)
		}
		if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// It reads the floor at its next heartbeat and confirms it.
		head := liveNodes(t, clients[0])[procs[0].Addr]["applied"].(int64)
		var applied int64
		poll(t, func() bool {
			applied = liveNodes(t, clients[0])[stopped.Addr]["applied"].(int64)
			return applied >= head
		}, func() string { return fmt.Sprintf("server 2 applied change %d, not %d", applied, head) })
		if id := redistest.Incr(t, clients[2], "migrate"); id <= 3_000_000 {
			t.Fatalf("server 2 handed out %d after confirming the floor 3000000", id)
		}
		for _, p := range procs {
			p.Stop(syscall.SIGTERM)
		}
	})
}

// snowflakeChaosEnv: leases of a second (heartbeats every 100ms) and 4
// worker ids for 3 servers, so that a killed server's id is taken again,
// after its lease, by a restarted one, which must start after its bound.
var snowflakeChaosEnv = []string{
	"LEAF_CLUSTER_HEARTBEAT=100ms", "LEAF_CLUSTER_LEASE=1s",
	"LEAF_CLUSTER_SNOWFLAKE_TIME_BITS=49", "LEAF_CLUSTER_SNOWFLAKE_WORKER_BITS=2", "LEAF_LOG_LEVEL=info",
}

// TestSnowflakeChaos: the chaos schedule (kills and restarts while six
// clients take IDs) on Snowflake tags: no ID twice, each connection's and
// each process life's increasing.
func TestSnowflakeChaos(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, dir string, env []string) {
		env = append(env, snowflakeChaosEnv...)
		p := startLeaf(t, dir, env...)
		c := patientClient(t, p)
		for _, tag := range chaosTags {
			if err := c.Do(context.Background(), "LEAF.CREATE", tag, "MODE", "snowflake").Err(); err != nil {
				t.Fatalf("LEAF.CREATE %s MODE snowflake: %v", tag, err)
			}
		}
		p.Stop(syscall.SIGTERM)
		runChaos(t, dir, env, nil)
	})
}

// TestSnowflakeStopsOnPausedStore: the store stops answering (SIGSTOP):
// the server serves Snowflake IDs and cached segment IDs until its lease
// lapses, then TRYAGAIN for both; once the store answers it serves again,
// repeating nothing.
func TestSnowflakeStopsOnPausedStore(t *testing.T) {
	// Not parallel (see harness_test.go): the server must keep a lease of
	// two seconds but while the store is paused (one lapse, no more).
	db := ownMariaDB(t)
	p := startLeaf(t, t.TempDir(), "LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN="+db.dsn,
		"LEAF_CLUSTER_HEARTBEAT=200ms", "LEAF_CLUSTER_LEASE=2s", "LEAF_SEGMENT_LOAD_TIMEOUT=1s", "LEAF_LOG_LEVEL=info")
	c := patientClient(t, p)
	ctx := context.Background()
	if err := c.Do(ctx, "LEAF.CREATE", "sf", "MODE", "snowflake").Err(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var last int64
	take := func() (string, bool) {
		id, reply, err := incrErr(c, "sf")
		if err != nil {
			t.Fatal(err)
		}
		if reply != "" {
			return reply, false
		}
		if seen[id] || id <= last {
			t.Fatalf("INCR sf = %d after %d (seen before: %v)", id, last, seen[id])
		}
		seen[id], last = true, id
		return "", true
	}
	for range 100 {
		take()
	}
	redistest.Incr(t, c, "seg") // a segment of 1000 cached

	db.pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			db.resume()
		}
	})
	var reply string
	poll(t, func() bool {
		r, ok := take()
		reply = r
		return !ok
	}, func() string { return "Snowflake IDs still issued with the store paused" })
	if !strings.HasPrefix(reply, "TRYAGAIN tag 'sf': ") || !strings.Contains(reply, "lease was not renewed in time") {
		t.Fatalf("INCR sf once the lease lapsed: %q", reply)
	}
	if _, r, err := incrErr(c, "seg"); err != nil || !strings.HasPrefix(r, "TRYAGAIN tag 'seg': this server's lease in the cluster registry lapsed") {
		t.Fatalf("INCR seg (cached) once the lease lapsed: %q, %v", r, err)
	}
	if v := infoField(t, c, "cluster", "node_serving"); v != "0" {
		t.Fatalf("INFO node_serving = %q once the lease lapsed", v)
	}

	db.resume()
	resumed = true
	poll(t, func() bool { _, ok := take(); return ok }, func() string { return "no Snowflake ID after the store came back" })
	for range 100 {
		if r, ok := take(); !ok {
			t.Fatalf("INCR sf after the store came back: %q", r)
		}
	}
	if v := infoField(t, c, "cluster", "lease_lapses"); v != "1" {
		t.Errorf("INFO lease_lapses = %q, want 1", v)
	}
	p.Stop(syscall.SIGTERM)
}

// TestSnowflakeWorkersRunOut: with 2 worker ids for 3 servers, the third
// answers a clear TRYAGAIN; when a holder stops, it takes the id.
func TestSnowflakeWorkersRunOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := append(sqliteStore(t, dir).env, "LEAF_CLUSTER_HEARTBEAT=100ms",
		"LEAF_CLUSTER_SNOWFLAKE_TIME_BITS=50", "LEAF_CLUSTER_SNOWFLAKE_WORKER_BITS=1", "LEAF_LOG_LEVEL=info")
	var procs []*proc
	for range 3 {
		procs = append(procs, startLeaf(t, dir, env...))
	}
	c0 := patientClient(t, procs[0])
	if err := c0.Do(context.Background(), "LEAF.CREATE", "sf", "MODE", "snowflake").Err(); err != nil {
		t.Fatal(err)
	}
	nodes := liveNodes(t, c0)
	var without *proc
	var holders []*proc
	for _, p := range procs {
		if nodes[p.Addr]["worker_id"] == int64(-1) {
			without = p
		} else {
			holders = append(holders, p)
		}
	}
	if without == nil || len(holders) != 2 {
		t.Fatalf("LEAF.NODES = %v: want two servers with a worker id, one without", nodes)
	}
	c := patientClient(t, without)
	_, reply, err := incrErr(c, "sf")
	if err != nil || reply != "TRYAGAIN tag 'sf': this server holds no worker id: all 2 worker ids are leased to live servers; "+
		"one is free when a server stops or its lease ends" {
		t.Fatalf("INCR sf without a worker id: %q, %v", reply, err)
	}
	holders[0].Stop(syscall.SIGTERM)
	poll(t, func() bool {
		_, reply, err = incrErr(c, "sf")
		return err == nil && reply == ""
	}, func() string { return fmt.Sprintf("INCR sf once a worker id was free: %q, %v", reply, err) })
	for _, p := range []*proc{holders[1], without} {
		p.Stop(syscall.SIGTERM)
	}
}

// TestSnowflakeLayoutRunningOut: a layout with less than a year left is
// refused at start, naming the keys.
func TestSnowflakeLayoutRunningOut(t *testing.T) {
	t.Parallel()
	epoch := time.Now().Add(-300 * 24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	code, stderr := runLeafToExit(t, t.TempDir(), "LEAF_CLUSTER_SNOWFLAKE_EPOCH="+epoch,
		"LEAF_CLUSTER_SNOWFLAKE_TIME_BITS=35", "LEAF_CLUSTER_SNOWFLAKE_SEQUENCE_BITS=18") // 2^35 ms: 398 days
	if code != 1 || !strings.Contains(stderr, "cluster.snowflake_*") || !strings.Contains(stderr, "less than a year from now") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
