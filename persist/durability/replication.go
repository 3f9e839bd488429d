package durability

import (
	"context"
	"fmt"
)

// The durability check: how the database keeps a commit it acknowledged,
// as far as the database can tell. leaf's guarantee rests on a range that
// the database said was committed staying committed; a replicated database
// keeps that across a failover only if every commit reached a standby
// before it was acknowledged. A failover to an asynchronous replica can
// lose the last ranges handed out, and the next ones repeat their IDs:
// leaf_guard replicates the same way and cannot help.

// Durable is implemented by the stores that can tell how their database
// replicates. It is optional: a store without it is reported as unknown.
type Durable interface {
	// Durability reads the replication of the database as the store's
	// user may see it. Only what the database cannot be asked is an
	// error (persist.ErrUnavailable: it did not answer); what the user may not
	// read makes the answer Unknown, with the reason, never an error.
	Durability(ctx context.Context) (Replication, error)
}

// Safety says whether a failover can lose commits that the database
// acknowledged.
type Safety int

// The values of Safety. The zero value is Unknown.
const (
	// Unknown: the database does not show enough to tell.
	Unknown Safety = iota
	// Safe: every acknowledged commit survives the loss of a server the
	// database may fail over from (or there is only one server, and a
	// commit is as safe as its disk).
	Safe
	// Unsafe: a failover can lose acknowledged commits (asynchronous
	// replicas), or a crash can (a commit acknowledged before it is
	// written).
	Unsafe
)

// String is "safe", "unsafe" or "unknown".
func (s Safety) String() string {
	switch s {
	case Safe:
		return "safe"
	case Unsafe:
		return "unsafe"
	}
	return "unknown"
}

// Kinds of replication (Replication.Kind).
const (
	// ReplicationSingle: one server; nothing replicates from it, as far
	// as it shows (an SQLite file, a database with no replica connected).
	ReplicationSingle = "single"
	// ReplicationGalera: a MariaDB (or MySQL) Galera cluster; every commit
	// is certified by the cluster before it is acknowledged.
	ReplicationGalera = "galera"
	// ReplicationMySQL: MySQL or MariaDB replication from the binary log,
	// semi-synchronous or asynchronous.
	ReplicationMySQL = "mysql_replication"
	// ReplicationPostgres: PostgreSQL streaming replication, to
	// synchronous or asynchronous standbys.
	ReplicationPostgres = "postgres_streaming"
	// ReplicationRaft: a Raft (or Paxos) replicated store that acknowledges
	// a commit once a majority has it: etcd, CockroachDB, YugabyteDB, TiDB.
	ReplicationRaft = "raft"
	// ReplicationUnknown: the store does not tell.
	ReplicationUnknown = "unknown"
)

// Replication is the answer of Durable: how the database replicates, and
// whether a failover can lose what it acknowledged.
type Replication struct {
	// Kind is one of the Replication* kinds above.
	Kind string
	// Safety: can a failover (or a crash) lose acknowledged commits?
	Safety Safety
	// Members is the number of servers that hold the data as far as the
	// database shows them: 1 for a single server, the Galera cluster's
	// size, etcd's voting members, a primary and its connected standbys;
	// 0 when unknown.
	Members int
	// Sync and Async are the replicas connected now that acknowledge a
	// commit before the client sees it (PostgreSQL's synchronous and
	// quorum standbys, MySQL's semi-synchronous replicas) and those that
	// do not; -1 when the store's user may not see them.
	Sync, Async int
	// State is the database's own word for its state where it has one
	// (Galera's wsrep_cluster_status, "Primary"); "" otherwise.
	State string
	// Reason says in one line why Safety is what it is: what the database
	// showed.
	Reason string
	// Advice says, when Safety is not Safe, what to change so that a
	// failover loses nothing ("" when there is nothing to say).
	Advice string
}

// Safe reports whether Safety is Safe.
func (r Replication) Safe() bool { return r.Safety == Safe }

// String is the record on one line, for logs and errors.
func (r Replication) String() string {
	kind := r.Kind
	if kind == "" {
		kind = ReplicationUnknown
	}
	s := fmt.Sprintf("%s, %s", kind, r.Safety)
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// UnknownReplication is the record of a store that does not implement
// Durable, or of a check that has not answered yet.
func UnknownReplication(reason string) Replication {
	return Replication{Kind: ReplicationUnknown, Safety: Unknown, Sync: -1, Async: -1, Reason: reason}
}

// Read is the answer of s's Durable, or UnknownReplication when s has
// none.
func Read(ctx context.Context, s any) (Replication, error) {
	d, ok := s.(Durable)
	if !ok {
		return UnknownReplication("the store does not tell how it replicates"), nil
	}
	return d.Durability(ctx)
}
