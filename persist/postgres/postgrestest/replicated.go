package postgrestest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leaf-id/leaf/persist/storetest"
)

// The environment of the replicated PostgreSQL servers' tests.
const (
	// EnvAsyncDSN holds the DSN of a primary that a standby streams from
	// asynchronously (scripts/postgres.sh replica), of a role allowed to
	// create databases and roles.
	EnvAsyncDSN = "LEAF_TEST_POSTGRES_ASYNC_DSN"
	// EnvPatroniDSN holds the DSN of a Patroni cluster (every node, with
	// target_session_attrs=read-write; scripts/patroni.sh), and
	// EnvPatroniDir the directory its tests lock.
	EnvPatroniDSN = "LEAF_TEST_PATRONI_DSN"
	EnvPatroniDir = "LEAF_TEST_PATRONI_DIR"
)

// AsyncPrimary is the DSN of LEAF_TEST_POSTGRES_ASYNC_DSN, for
// NewDatabase; skipped without it, or failed when CI=true.
func AsyncPrimary(t testing.TB) string {
	t.Helper()
	admin := storetest.EnvDSN(t, EnvAsyncDSN, "start a primary with an asynchronous standby with "+
		"`scripts/postgres.sh start /tmp/leaf-pga && eval \"export $(scripts/postgres.sh replica /tmp/leaf-pgr /tmp/leaf-pga)\"`")
	return admin
}

// Patroni is the DSN of LEAF_TEST_PATRONI_DSN, for NewDatabase. The test
// holds the cluster's lock shared until it ends, so that a test that
// kills its primary (holding it alone) does not run meanwhile. Skipped
// without the cluster, or failed when CI=true.
func Patroni(t testing.TB) string {
	t.Helper()
	how := "start a cluster with `scripts/patroni.sh start /tmp/leaf-patroni` and export what it prints"
	admin := storetest.EnvDSN(t, EnvPatroniDSN, how)
	dir := storetest.EnvDSN(t, EnvPatroniDir, how)
	f, err := os.OpenFile(filepath.Join(dir, "tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
	return admin
}
