package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/leaf-id/leaf/persist/durability"
)

var _ durability.Durable = (*Store)(nil)

// Durability implements durability.Durable: PostgreSQL's own account of its
// replication, from what any role may read. pg_is_in_recovery(),
// synchronous_commit (the value of leaf's sessions: a role's or a
// database's setting counts) and synchronous_standby_names are readable by
// every role; pg_stat_replication lists every standby streaming from the
// server, but shows its sync_state only to roles with pg_read_all_stats
// (or a superuser): without it the standbys are counted, not told apart.
// Under Patroni the standbys stream from the primary, so it shows them
// all. CockroachDB and YugabyteDB replicate through Raft, and say so in
// version().
func (s *Store) Durability(ctx context.Context) (durability.Replication, error) {
	ctx, cancel := s.core.Deadline(ctx)
	defer cancel()
	f, err := readFacts(ctx, s.core.DB())
	if err != nil {
		return durability.Replication{}, fmt.Errorf("persist: postgres: durability: %w", s.core.Wrap(err))
	}
	return f.replication(), nil
}

// facts are what the server shows of its replication.
type facts struct {
	raft       string // "CockroachDB", "YugabyteDB": a Raft-replicated engine; "" for PostgreSQL
	recovery   bool   // pg_is_in_recovery(): a standby
	syncCommit string // synchronous_commit of leaf's sessions
	names      string // synchronous_standby_names
	standbys   int    // physical standbys streaming from the server (walsenders with no database)
	visible    int    // those whose sync_state the role may see
	sync       int    // sync_state sync or quorum: a commit waits for them
	async      int    // sync_state async or potential: it does not
}

// readFacts reads facts with q.
func readFacts(ctx context.Context, q *sql.DB) (facts, error) {
	var f facts
	var version string
	if err := q.QueryRowContext(ctx, `SELECT version()`).Scan(&version); err != nil {
		return f, err
	}
	switch {
	case strings.Contains(version, "CockroachDB"):
		f.raft = "CockroachDB"
		return f, nil
	case strings.Contains(version, "-YB-"):
		f.raft = "YugabyteDB"
		return f, nil
	}
	err := q.QueryRowContext(ctx, `SELECT pg_is_in_recovery(), current_setting('synchronous_commit'),
		current_setting('synchronous_standby_names')`).Scan(&f.recovery, &f.syncCommit, &f.names)
	if err != nil {
		return f, err
	}
	// A walsender serving a database is logical replication (its datid
	// is visible to every role), not a standby that could be promoted;
	// a base backup in progress is not one either, where its state shows.
	rows, err := q.QueryContext(ctx, `SELECT r.sync_state FROM pg_stat_replication r
		JOIN pg_stat_activity a ON a.pid = r.pid
		WHERE a.datid IS NULL AND r.state IS DISTINCT FROM 'backup'`)
	if err != nil {
		return f, err
	}
	defer rows.Close()
	for rows.Next() {
		var state sql.NullString
		if err := rows.Scan(&state); err != nil {
			return f, err
		}
		f.standbys++
		if !state.Valid {
			continue
		}
		f.visible++
		switch state.String {
		case "sync", "quorum":
			f.sync++
		default: // async, potential
			f.async++
		}
	}
	return f, rows.Err()
}

// The advice of an unsafe record.
const (
	adviceStandby = "make the standbys synchronous: set synchronous_standby_names on the primary " +
		"(synchronous_commit on), or synchronous_mode: true under Patroni"
	adviceCommit = "set synchronous_commit = on for leaf's role (ALTER ROLE ... SET synchronous_commit = on) or in postgresql.conf"
)

// replication judges f.
func (f facts) replication() durability.Replication {
	if f.raft != "" {
		return durability.Replication{Kind: durability.ReplicationRaft, Safety: durability.Safe, Sync: -1, Async: -1,
			Reason: f.raft + " replicates every commit through Raft to a majority of its replicas before acknowledging it"}
	}
	r := durability.Replication{Kind: durability.ReplicationPostgres, Members: 1 + f.standbys, Sync: -1, Async: -1}
	if f.visible == f.standbys {
		r.Sync, r.Async = f.sync, f.async
	}
	if f.standbys == 0 {
		r.Kind = durability.ReplicationSingle
	}
	names := strings.TrimSpace(f.names)
	switch {
	case f.recovery:
		r.Reason = "connected to a standby (pg_is_in_recovery): leaf's writes fail here"
		r.Advice = "point store.dsn at the primary (list every node with target_session_attrs=read-write)"
	case f.syncCommit == "off":
		r.Safety = durability.Unsafe
		r.Reason = "synchronous_commit = off: a commit is acknowledged before it is written, and a crash of the server loses it"
		r.Advice = adviceCommit
	case f.standbys == 0 && names == "":
		r.Safety = durability.Safe
		r.Reason = "no standby streams from this server: a commit is as safe as its disk"
	case f.standbys == 0 && f.syncCommit == "local":
		r.Safety = durability.Safe
		r.Reason = "no standby streams from this server (synchronous_commit = local): a commit is as safe as its disk"
	case f.standbys == 0:
		r.Safety = durability.Safe
		r.Reason = fmt.Sprintf("synchronous_standby_names = '%s' and no standby streams now: commits wait until one does", names)
	case names == "":
		r.Safety = durability.Unsafe
		r.Reason = fmt.Sprintf("%s stream%s asynchronously (synchronous_standby_names is empty): a commit does not wait for %s",
			standbys(f.standbys), plural(f.standbys, "", "s"), plural(f.standbys, "them", "it"))
		r.Advice = adviceStandby
	case f.syncCommit == "local":
		r.Safety = durability.Unsafe
		r.Reason = fmt.Sprintf("synchronous_commit = local: a commit does not wait for the %s", standbys(f.standbys))
		r.Advice = adviceCommit
	case f.visible < f.standbys:
		r.Safety = durability.Safe
		r.Reason = fmt.Sprintf("a commit waits for the standbys of synchronous_standby_names = '%s' (%s stream%s; "+
			"which are synchronous shows only to a role with pg_read_all_stats)", names, standbys(f.standbys), plural(f.standbys, "", "s"))
	case f.sync == 0:
		r.Reason = fmt.Sprintf("synchronous_standby_names = '%s' but none of the %s is synchronous now: "+
			"commits wait, and those acknowledged before may be missing on them", names, standbys(f.standbys))
		r.Advice = "bring a synchronous standby back before any failover"
	default:
		r.Safety = durability.Safe
		r.Reason = fmt.Sprintf("a commit waits for %d synchronous standby%s (synchronous_standby_names = '%s')",
			f.sync, plural(f.sync, "s", ""), names)
		if f.async > 0 {
			r.Reason += fmt.Sprintf("; %d more stream%s asynchronously: fail over only to a synchronous one (Patroni's synchronous_mode does)",
				f.async, plural(f.async, "", "s"))
		}
	}
	return r
}

// standbys is "1 standby" or "n standbys".
func standbys(n int) string { return fmt.Sprintf("%d standby%s", n, plural(n, "s", "")) }

// plural is many when n is not 1, else one.
func plural(n int, many, one string) string {
	if n == 1 {
		return one
	}
	return many
}
