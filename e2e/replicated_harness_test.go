package e2e

// Replicated databases as users run them: a MariaDB Galera cluster behind
// HAProxy (scripts/galera.sh), PostgreSQL under Patroni
// (scripts/patroni.sh), pgbouncer in front of PostgreSQL.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// patroniCluster is the Patroni cluster of LEAF_TEST_PATRONI_DIR (started
// by make test), held by one test alone, so that it may kill its primary.
type patroniCluster struct {
	t   *testing.T
	dir string
	dsn string // every node, target_session_attrs=read-write
}

// lockPatroni takes the Patroni cluster for t alone; skipped without it,
// or failed when CI=true.
func lockPatroni(t *testing.T) *patroniCluster {
	t.Helper()
	dir, dsn := os.Getenv("LEAF_TEST_PATRONI_DIR"), os.Getenv("LEAF_TEST_PATRONI_DSN")
	need(t, dir != "" && dsn != "", "LEAF_TEST_PATRONI_DIR and LEAF_TEST_PATRONI_DSN are not set: start a cluster with scripts/patroni.sh start DIR and export what it prints")
	lockFile(t, filepath.Join(dir, "tests.lock"))
	return &patroniCluster{t: t, dir: dir, dsn: dsn}
}

// lockFile holds an exclusive lock on path until t ends.
func lockFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// script runs scripts/patroni.sh with args on the cluster; its output.
func (p *patroniCluster) script(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("bash", append([]string{scriptPath("patroni.sh"), args[0], p.dir}, args[1:]...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("patroni.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// primary is the number of the node that leads.
func (p *patroniCluster) primary() int {
	p.t.Helper()
	n, err := strconv.Atoi(p.script("primary"))
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}
