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
