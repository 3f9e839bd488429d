package e2e

import (
	"os"
	"strings"
	"testing"

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
