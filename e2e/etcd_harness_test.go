package e2e

// Helpers of the etcd tests: a prefix of the test's own on the shared test
// cluster, and a cluster of the test's own (scripts/etcd.sh) whose members
// it kills, pauses and restarts.

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
)

// etcdStore is a fresh prefix on the cluster of LEAF_TEST_ETCD_ENDPOINTS
// (skipped when unset, failed when CI=true: etcdtest.Endpoints).
func etcdStore(t *testing.T) store {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	return etcdStoreAt(t, eps, etcdtest.Prefix(t, eps))
}

func etcdStoreAt(t *testing.T, endpoints, prefix string) store {
	t.Helper()
	return store{
		name: "etcd",
		env:  []string{"LEAF_STORE_DRIVER=etcd", "LEAF_STORE_DSN=" + endpoints, "LEAF_STORE_ETCD_PREFIX=" + prefix},
		raw:  etcdtest.Keys{Client: etcdtest.Client(t, endpoints), Prefix: prefix},
	}
}

// etcdCluster is a three-member cluster of one test alone (scripts/etcd.sh
// in a temporary directory).
type etcdCluster struct {
	dir       string
	endpoints string // comma-separated client URLs
}

// Timing of the clusters the tests start: scripts/etcd.sh's defaults,
// etcd's own (--heartbeat-interval 100, --election-timeout 1000).
const etcdElectionMS = 1000

// ownEtcd starts a cluster for t alone, stopped at cleanup. Its data is on
// a memory file system when there is one (/dev/shm), as in make test.
// Without etcd (and not root, to install it) the test is skipped, or
// failed when CI=true.
func ownEtcd(t *testing.T) *etcdCluster {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil && os.Getuid() != 0 {
		const why = "etcd not found: install etcd-server (make test does, as root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	dir, err := os.MkdirTemp("/dev/shm", "leaf-etcd-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	e := &etcdCluster{dir: dir}
	t.Cleanup(func() {
		if out, err := e.script("stop", dir); err != nil {
			t.Errorf("etcd.sh stop: %v\n%s", err, out)
		}
	})
	out := e.must(t, "start", dir)
	eps, ok := strings.CutPrefix(out, etcdtest.EnvEndpoints+"=")
	if !ok {
		t.Fatalf("etcd.sh start printed %q", out)
	}
	e.endpoints = eps
	return e
}

// script runs scripts/etcd.sh with args; stdout and stderr apart.
func (e *etcdCluster) script(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{scriptPath("etcd.sh")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return strings.TrimSpace(string(out)), nil
}

// must runs scripts/etcd.sh with args and returns what it printed.
func (e *etcdCluster) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.script(args...)
	if err != nil {
		t.Fatalf("etcd.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// member acts on one member ("1".."3" or "leader"): cmd is kill (SIGKILL),
// stop (SIGTERM), pause (SIGSTOP), resume (SIGCONT) or start (again, on
// its ports and data). It returns the member's number.
func (e *etcdCluster) member(t *testing.T, cmd, which string) string {
	t.Helper()
	return e.must(t, cmd, e.dir, which)
}
