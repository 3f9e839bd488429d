package etcd_test

import (
	"testing"

	"github.com/leaf-id/leaf/persist/etcd"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
	"github.com/leaf-id/leaf/persist/storetest"
)

func BenchmarkTake(b *testing.B) {
	eps := etcdtest.Endpoints(b)
	s, err := etcd.Open(b.Context(), etcd.Config{Endpoints: eps, Prefix: etcdtest.Prefix(b, eps)}, storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTake(b, s)
}

// TestNoStoreWaitsAfterWarmup: at 200,000 IDs a second on one tag, once
// the step has grown, the allocator never waits on etcd.
func TestNoStoreWaitsAfterWarmup(t *testing.T) {
	s, _ := openStore(t)
	storetest.NoWaitsAfterWarmup(t, s)
}
