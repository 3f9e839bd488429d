package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
)

// repairLog is what a server logs when the database answered a range
// below IDs already handed out: on a database that nobody touches by hand,
// a sign that a commit leaf took for done was lost.
const repairLog = "the database answered a range below IDs already handed out"

// assertNoRepairs fails when a server logged a repair.
func assertNoRepairs(t *testing.T, logs []string) {
	t.Helper()
	n := 0
	for _, l := range logs {
		n += strings.Count(l, repairLog)
	}
	if n > 0 {
		t.Errorf("%d ranges below IDs already handed out were repaired: commits were lost", n)
	}
}

// The chaos on a three-node Galera cluster, each server on its own node,
// as users run it with a load balancer per data centre: the servers'
// transactions on one tag conflict all the time, and Galera certifies
// them optimistically, aborting one of two at COMMIT or while it waits.
// No database fault: no ID may repeat and nothing may be repaired.
func TestChaosGalera(t *testing.T) {
	t.Parallel()
	nodes := mysqltest.GaleraNodes(t)
	env := append([]string{"LEAF_STORE_DRIVER=mysql"}, chaosEnv...)
	res := runChaosWith(t, t.TempDir(), env, chaosOptions{
		slotEnv: func(i int) []string { return []string{"LEAF_STORE_DSN=" + nodes[i%len(nodes)]} },
	})
	assertNoRepairs(t, res.logs)
}

// The chaos on the Galera cluster, the servers through HAProxy, while its
// nodes are killed (SIGKILL) and restarted one at a time: the cluster
// keeps its quorum, connections to the dead node break mid-transaction,
// and the node catches up (IST) when it comes back. The test holds the
// cluster alone meanwhile.
//
// A restart takes some 20 seconds (crash recovery, then IST): make test
// kills two nodes in turn, LEAF_TEST_LONG=1 all three.
func TestChaosGaleraNodeKills(t *testing.T) {
	t.Parallel()
	g := lockGalera(t)
	nodes := 2
	if os.Getenv("LEAF_TEST_LONG") != "" {
		nodes = 3
	}
	env := append([]string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + g.dsn}, chaosEnv...)
	res := runChaosWith(t, t.TempDir(), env, chaosOptions{storeFault: func(ev int) {
		// Events 1, 5, 9 kill nodes 1, 2, 3; events 3, 7, 11 restart them.
		node := ev/4 + 1
		if node > nodes {
			return
		}
		switch ev % 4 {
		case 1:
			g.kill(node)
		case 3:
			g.restart(node)
		}
	}})
	assertNoRepairs(t, res.logs)
}

// The chaos on a three-node PostgreSQL cluster under Patroni
// (synchronous_mode), the servers' DSN listing every node with
// target_session_attrs=read-write, while the primary is killed (SIGKILL,
// Patroni and PostgreSQL) and fails over, twice; the old primary rejoins
// as a standby after each. No ID may repeat. Beside the chaos, a fourth
// server answers two probes through each failover: a tag whose IDs it
// holds in cache must answer every INCR (a failover never stops a cached
// tag), and a tag never seen before gets IDs again once the new primary
// takes writes, after a time the test reports (Patroni's ttl, 10 s here,
// and the promotion).
func TestChaosPatroniFailover(t *testing.T) {
	t.Parallel()
	p := lockPatroni(t)
	dir := t.TempDir()
	store := []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + p.dsn}
	probe := startLeaf(t, dir, append(store, "LEAF_SEGMENT_DEFAULT_STEP=1000000", "LEAF_SEGMENT_MAX_STEP=1000000",
		"LEAF_SEGMENT_LOAD_TIMEOUT=2s", "LEAF_LOG_LEVEL=info")...)
	pc := redis.NewClient(&redis.Options{Addr: probe.Addr, PoolSize: 2, MaxRetries: -1,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = pc.Close() })
	cached := "patroni_cached"
	if _, err := pc.Incr(t.Context(), cached).Result(); err != nil {
		t.Fatal(err)
	}

	var resumed []time.Duration
	fresh := 0
	failover := func() {
		old := p.primary()
		stop := make(chan struct{})
		cachedErrs := make(chan error, 1)
		go func() { // the cached tag, all through the failover
			defer close(cachedErrs)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := pc.Incr(context.Background(), cached).Result(); err != nil {
					cachedErrs <- err
					return
				}
			}
		}()
		killed := time.Now()
		p.script("kill", strconv.Itoa(old))
		// A new tag, a new name each try, until one gets an ID.
		for {
			fresh++
			_, err := pc.Incr(context.Background(), fmt.Sprintf("patroni_new_%d", fresh)).Result()
			if err == nil {
				break
			}
			if time.Since(killed) > 3*time.Minute {
				t.Fatalf("no ID for a new tag 3 minutes after the primary was killed: %v", err)
			}
		}
		resumed = append(resumed, time.Since(killed))
		close(stop)
		if err := <-cachedErrs; err != nil {
			t.Errorf("the cached tag stopped serving during the failover: %v", err)
		}
		p.script("restart", strconv.Itoa(old))
		p.script("wait")
	}
	env := append(store, chaosEnv...)
	// Each failover takes some 40 seconds (Patroni's ttl, the old primary's
	// pg_rewind): make test fails over once, LEAF_TEST_LONG=1 twice.
	long := os.Getenv("LEAF_TEST_LONG") != ""
	res := runChaosWith(t, dir, env, chaosOptions{storeFault: func(ev int) {
		if ev == 2 || (long && ev == 7) {
			failover()
		}
	}})
	assertNoRepairs(t, append(res.logs, probe.Log()))
	t.Logf("a new tag got IDs again %v after each primary was killed", resumed)
}
