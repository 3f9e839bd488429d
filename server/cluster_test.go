package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/server/servertest"
	"github.com/leaf-id/leaf/snowflake"
)

// startNode starts a server that is a node of the cluster registry of the
// SQLite file at path, with the given heartbeat (an hour: it beats only at
// start and when the test says).
func startNode(t *testing.T, path, id string, heartbeat, ack time.Duration) *servertest.Instance {
	t.Helper()
	return servertest.Start(t, servertest.Options{
		Path:      path,
		Cluster:   nodeOptions(id, heartbeat, ack),
		Snowflake: snowflake.Options{MaxClockBack: 5 * time.Millisecond},
	})
}

// nodeOptions are a node's options: a lease of an hour, the heartbeat and
// the ack timeout given.
func nodeOptions(id string, heartbeat, ack time.Duration) *cluster.Options {
	return &cluster.Options{Heartbeat: heartbeat, Lease: time.Hour, AckTimeout: ack, Node: persist.NodeInfo{ID: id, Version: "test"}}
}

// nodes reads LEAF.NODES as id -> fields.
func nodes(t *testing.T, c *redis.Client) map[string]map[string]any {
	t.Helper()
	v, err := c.Do(context.Background(), "LEAF.NODES").Result()
	if err != nil {
		t.Fatalf("LEAF.NODES: %v", err)
	}
	out := map[string]map[string]any{}
	for _, e := range v.([]any) {
		f := map[string]any{}
		switch e := e.(type) {
		case map[any]any: // RESP3
			for k, v := range e {
				f[k.(string)] = v
			}
		case []any: // RESP2
			for i := 0; i+1 < len(e); i += 2 {
				f[e[i].(string)] = e[i+1]
			}
		}
		if len(f) != 10 {
			t.Fatalf("LEAF.NODES entry %v: %d fields, want 10", f, len(f))
		}
		out[f["id"].(string)] = f
	}
	return out
}

// TestSnowflakeTags: LEAF.CREATE ... MODE snowflake makes a tag whose IDs
// are Snowflake IDs, taken by INCR and INCRBY; segment-only commands and
// bad options are refused with texts that say why.
func TestSnowflakeTags(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto int) {
		in := startNode(t, filepath.Join(t.TempDir(), "leaf.db"), "n1", time.Hour, time.Minute)
		c := newClient(t, in.Addr, proto, "")
		ctx := context.Background()
		if err := c.Do(ctx, "LEAF.CREATE", "sf", "MODE", "snowflake", "DESC", "orders").Err(); err != nil {
			t.Fatalf("LEAF.CREATE MODE snowflake: %v", err)
		}
		a := redistest.Incr(t, c, "sf")
		b, err := c.IncrBy(ctx, "sf", 10).Result()
		if err != nil {
			t.Fatal(err)
		}
		l := snowflake.DefaultLayout()
		pa, _ := l.Decode(a)
		pb, _ := l.Decode(b)
		worker := in.Node.Status().Worker
		if a <= 1<<40 || b <= a || pa.Worker != worker || pb.Worker != worker || time.Since(pb.Time) > time.Hour {
			t.Fatalf("INCR %d (%+v), INCRBY 10 %d (%+v): want Snowflake IDs of worker %d", a, pa, b, pb, worker)
		}
		if pb.Seq < 9 {
			t.Fatalf("INCRBY 10 returned sequence %d: the batch does not fit one unit", pb.Seq)
		}
		wantErr(t, c, "ERR snowflake: count exceeds the IDs of one time unit: 5000, at most 4096", "INCRBY", "sf", "5000")
		wantErr(t, c, `ERR not in this tag's mode: tag "sf" is a snowflake tag: a floor applies to segment tags`, "LEAF.FLOOR", "sf", "5")
		wantErr(t, c, `ERR not in this tag's mode: tag "sf" is a snowflake tag: a step applies to segment tags`, "LEAF.STEP", "sf", "5")
		wantErr(t, c, "ERR tag 'sf' already exists", "LEAF.CREATE", "sf", "MODE", "snowflake")
		wantErr(t, c, "ERR unknown MODE 'sequence': segment or snowflake", "LEAF.CREATE", "x", "MODE", "sequence")
		wantErr(t, c, "ERR STEP applies to segment tags only, not to MODE snowflake", "LEAF.CREATE", "x", "STEP", "5", "MODE", "snowflake")
		if err := c.Do(ctx, "LEAF.CREATE", "seg", "MODE", "SEGMENT", "STEP", "5").Err(); err != nil {
			t.Fatalf("LEAF.CREATE MODE segment: %v", err)
		}
		if id := redistest.Incr(t, c, "seg"); id != 1 {
			t.Fatalf("segment tag's first ID %d", id)
		}
		f := redistest.LeafInfo(t, c, "sf")
		if f["mode"] != "snowflake" || f["issued"] != int64(11) {
			t.Fatalf("LEAF.INFO sf: mode %v issued %v", f["mode"], f["issued"])
		}
		// No segment fields, no runway: a Snowflake tag has neither.
		for _, k := range []string{"segment0_value", "step", "runway_ids", "runway_seconds", "guard_high"} {
			if v, ok := f[k]; ok {
				t.Errorf("LEAF.INFO of a Snowflake tag shows %s = %v", k, v)
			}
		}
		if len(f) != 9 {
			t.Errorf("LEAF.INFO of a Snowflake tag: %d fields: %v", len(f), f)
		}
		// GET answers its last ID.
		if v, err := c.Get(ctx, "sf").Int64(); err != nil || v != b {
			t.Fatalf("GET sf = %d, %v; want the last ID %d", v, err, b)
		}
	})
}

// TestFloorConfirmedByEveryServer: LEAF.FLOOR and SET through one server
// answer once the others confirmed, and then none hands out an ID at or
// below the floor; a server whose heartbeat stalled is named in the error.
func TestFloorConfirmedByEveryServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	a := startNode(t, path, "a", 20*time.Millisecond, 5*time.Second)
	b := startNode(t, path, "b", 20*time.Millisecond, 5*time.Second)
	// LEAF.FLOOR may wait up to the ack timeout: longer than go-redis's
	// default read timeout of 3s.
	ca, cb := slowClient(t, a.Addr), slowClient(t, b.Addr)
	ctx := context.Background()
	redistest.Incr(t, ca, "t")
	if id := redistest.Incr(t, cb, "t"); id > 5000 {
		t.Fatalf("b's first ID %d: the test needs IDs below the floor cached", id)
	}
	if got, err := ca.Do(ctx, "LEAF.FLOOR", "t", "5000").Int64(); err != nil || got < 5000 {
		t.Fatalf("LEAF.FLOOR = %d, %v", got, err)
	}
	if id := redistest.Incr(t, cb, "t"); id <= 5000 {
		t.Fatalf("b handed out %d after LEAF.FLOOR t 5000 answered", id)
	}
	if err := cb.Set(ctx, "t", 90_000, 0).Err(); err != nil {
		t.Fatalf("SET through b: %v", err)
	}
	if id := redistest.Incr(t, ca, "t"); id <= 90_000 {
		t.Fatalf("a handed out %d after SET t 90000 answered", id)
	}

	got := nodes(t, ca)
	if len(got) != 2 || got["a"]["self"] != int64(1) || got["b"]["self"] != int64(0) ||
		got["b"]["addr"] != b.Addr || got["a"]["worker_id"] == got["b"]["worker_id"] ||
		got["a"]["store_id"] == "" || got["a"]["store_id"] != nodes(t, cb)["a"]["store_id"] {
		t.Fatalf("LEAF.NODES = %v", got)
	}
	info, err := ca.Info(ctx, "cluster").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cluster_enabled:0\r\n", "leaf_cluster:1\r\n", "node_id:a\r\n", "node_serving:1\r\n", "nodes:2\r\n",
		fmt.Sprintf("id=b,addr=%s,worker_id=", b.Addr)} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO cluster lacks %q:\n%s", want, info)
		}
	}

	// c's heartbeat stalls (an hour): the floor through a names it.
	c := startNode(t, path, "c", time.Hour, 5*time.Second)
	cc := newClient(t, c.Addr, 3, "")
	redistest.Incr(t, cc, "t")
	want := fmt.Sprintf("ERR floor 200000 of tag 't' is set in the store and on this server, but "+
		"servers did not confirm the change within 5s: c (%s)", c.Addr)
	wantErr(t, ca, want, "LEAF.FLOOR", "t", "200000")
	if err := c.Node.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if id := redistest.Incr(t, cc, "t"); id <= 200_000 {
		t.Fatalf("c handed out %d after reading the floor 200000", id)
	}
	// Steps the same way; a server that left cleanly is not waited for.
	wantErr(t, ca, strings.Replace(want, "floor 200000", "step 2000", 1), "LEAF.STEP", "t", "2000")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := ca.Do(ctx, "LEAF.STEP", "t", "3000").Err(); err != nil {
		t.Fatalf("LEAF.STEP once c left: %v", err)
	}
}

// TestClusterOff: without a node, LEAF.NODES says the features are off and
// INFO cluster says it is no Redis Cluster and has no registry.
func TestClusterOff(t *testing.T) {
	in := start(t)
	c := newClient(t, in.Addr, 2, "")
	wantErr(t, c, "ERR cluster features are off", "LEAF.NODES")
	info, err := c.Info(context.Background(), "cluster").Result()
	if err != nil || info != "# Cluster\r\ncluster_enabled:0\r\nleaf_cluster:0\r\n" {
		t.Fatalf("INFO cluster = %q, %v", info, err)
	}
}

// slowClient is newClient with a read timeout longer than any ack timeout
// of these tests.
func slowClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: time.Minute})
	t.Cleanup(func() { c.Close() })
	return c
}
