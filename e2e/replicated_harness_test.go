package e2e

// Replicated databases as users run them: a MariaDB Galera cluster behind
// HAProxy (scripts/galera.sh), PostgreSQL under Patroni
// (scripts/patroni.sh), pgbouncer in front of PostgreSQL.

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
)

// galeraCluster is the Galera cluster of LEAF_TEST_GALERA_DIR (started by
// make test), held by one test alone, so that it may kill and restart its
// nodes.
type galeraCluster struct {
	t   *testing.T
	dir string
	dsn string // a fresh database, through HAProxy
}

// lockGalera takes the cluster of LEAF_TEST_GALERA_DIR for t alone (the
// tests of other packages wait), skipped without it, or failed when
// CI=true.
func lockGalera(t *testing.T) *galeraCluster {
	t.Helper()
	dir := os.Getenv(mysqltest.EnvGaleraDir)
	need(t, dir != "", mysqltest.EnvGaleraDir+" is not set: start a cluster with scripts/galera.sh start DIR and export what it prints")
	return &galeraCluster{t: t, dir: dir, dsn: mysqltest.GaleraDSNAlone(t)}
}

// kill crashes node n (1-3) and waits until it is gone; restart starts it
// again and waits until it has caught up with the cluster.
func (g *galeraCluster) kill(n int)    { g.t.Helper(); g.must("kill", n) }
func (g *galeraCluster) restart(n int) { g.t.Helper(); g.must("restart", n) }

func (g *galeraCluster) must(cmd string, n int) {
	g.t.Helper()
	out, err := exec.Command("bash", scriptPath("galera.sh"), cmd, g.dir, strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		g.t.Fatalf("galera.sh %s %d: %v\n%s", cmd, n, err, out)
	}
}
