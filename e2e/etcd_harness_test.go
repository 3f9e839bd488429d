package e2e

// Helpers of the etcd tests: a prefix of the test's own on the shared test
// cluster, and a cluster of the test's own (scripts/etcd.sh) whose members
// it kills, pauses and restarts.

import (
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

// ownEtcd starts a cluster for t alone, stopped at cleanup
// (etcdtest.StartCluster: skipped without etcd, failed when CI=true).
func ownEtcd(t *testing.T) *etcdCluster {
	t.Helper()
	dir, eps := etcdtest.StartCluster(t)
	return &etcdCluster{dir: dir, endpoints: eps}
}

// member acts on one member ("1".."3" or "leader") with scripts/etcd.sh:
// cmd is kill (SIGKILL), stop (SIGTERM), pause (SIGSTOP), resume (SIGCONT)
// or start (again, on its ports and data). It returns the member's number.
func (e *etcdCluster) member(t *testing.T, cmd, which string) string {
	t.Helper()
	c := exec.Command("bash", etcdtest.Script(), cmd, e.dir, which)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("etcd.sh %s %s %s: %v\n%s%s", cmd, e.dir, which, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
