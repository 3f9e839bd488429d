package etcd_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/etcd"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
)

// The test cluster's three members: a write is acknowledged once two of
// them have it. A cluster that cannot be reached is an error (the
// database did not answer), not a verdict.
func TestDurability(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	s, err := etcd.Open(t.Context(), etcd.Config{Endpoints: eps, Prefix: etcdtest.Prefix(t, eps)}, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Durability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != durability.ReplicationRaft || r.Safety != durability.Safe || r.Members != 3 ||
		!strings.Contains(r.Reason, "a majority of its 3 voting members") {
		t.Errorf("got %+v, want Raft, safe, 3 members", r)
	}

	down, err := etcd.Open(t.Context(), etcd.Config{Endpoints: "127.0.0.1:1", Lazy: true}, persist.Options{QueryTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if r, err := down.Durability(t.Context()); !errors.Is(err, persist.ErrUnavailable) {
		t.Errorf("unreachable cluster: %+v, %v; want ErrUnavailable", r, err)
	}
}
