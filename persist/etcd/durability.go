package etcd

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
)

var _ durability.Durable = (*Store)(nil)

// Durability implements durability.Durable: etcd acknowledges a write once a
// majority of its voting members has it in its log on disk (Raft), so the
// loss of a minority loses nothing acknowledged. The members come from
// the member list, which every user may read; learners do not vote and
// are not counted as members.
func (s *Store) Durability(ctx context.Context) (durability.Replication, error) {
	var voting, learners int
	err := s.do(ctx, "member list", "", func(ctx context.Context, _ clientv3.KV) error {
		c := s.conn.Load()
		if c == nil {
			return persist.ErrClosed
		}
		// As the store's KV: failing fast while no member answers.
		cl := clientv3.NewClusterFromClusterClient(pb.NewClusterClient(c.cli.ActiveConnection()), nil)
		resp, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		voting, learners = 0, 0
		for _, m := range resp.Members {
			if m.IsLearner {
				learners++
			} else {
				voting++
			}
		}
		return nil
	})
	if err != nil {
		return durability.Replication{}, fmt.Errorf("persist: etcd: durability: %w", err)
	}
	r := durability.Replication{Kind: durability.ReplicationRaft, Safety: durability.Safe, Members: voting, Sync: -1, Async: -1,
		Reason: fmt.Sprintf("etcd acknowledges a write once a majority of its %d voting members has it (Raft)", voting)}
	if voting == 1 {
		r.Kind = durability.ReplicationSingle
		r.Reason = "a single etcd member: a write is as safe as its disk"
	}
	if learners > 0 {
		r.Reason += fmt.Sprintf("; learners, not voting: %d", learners)
	}
	return r, nil
}
