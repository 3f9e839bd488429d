package sqlite

import (
	"context"

	"github.com/leaf-id/leaf/persist"
)

var _ persist.Durable = (*Store)(nil)

// Durability implements persist.Durable: one file, nothing replicated,
// written with synchronous=FULL (Open checks it), so a commit is as safe
// as the disk the file is on.
func (s *Store) Durability(context.Context) (persist.Replication, error) {
	return persist.Replication{Kind: persist.ReplicationSingle, Safety: persist.Safe, Members: 1,
		Reason: "one SQLite file, written with synchronous=FULL: a commit is as safe as the disk it is on"}, nil
}
