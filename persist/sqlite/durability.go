package sqlite

import (
	"context"

	"github.com/leaf-id/leaf/persist/durability"
)

var _ durability.Durable = (*Store)(nil)

// Durability implements durability.Durable: one file, nothing replicated,
// written with synchronous=FULL (Open checks it), so a commit is as safe
// as the disk the file is on.
func (s *Store) Durability(context.Context) (durability.Replication, error) {
	return durability.Replication{Kind: durability.ReplicationSingle, Safety: durability.Safe, Members: 1,
		Reason: "one SQLite file, written with synchronous=FULL: a commit is as safe as the disk it is on"}, nil
}
