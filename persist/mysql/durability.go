package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/persist/durability"
)

var _ durability.Durable = (*Store)(nil)

// Server error numbers of the durability check.
const (
	erUnknownSystemVariable = 1193
	erSpecificAccessDenied  = 1227 // SHOW REPLICAS without REPLICATION SLAVE (MariaDB: REPLICATION MASTER ADMIN)
	erParse                 = 1064 // SHOW REPLICAS before MySQL 8.0.22
)

// Durability implements durability.Durable from what any user may read:
// system variables (@@wsrep_on, @@log_bin, the semi-synchronous
// replication's rpl_semi_sync_master_* or, MySQL 8.0.26's plugin,
// rpl_semi_sync_source_*) and global status (wsrep_*,
// Rpl_semi_sync_*_status and _clients; MariaDB's Slaves_connected counts
// the replicas connected). MySQL shows its replicas only to a user with
// REPLICATION SLAVE (SHOW REPLICAS): without it, a server that writes a
// binary log with semi-synchronous replication off is reported as
// unknown, and the reason says so.
func (s *Store) Durability(ctx context.Context) (durability.Replication, error) {
	ctx, cancel := s.core.Deadline(ctx)
	defer cancel()
	f, err := readFacts(ctx, s.core.DB())
	if err != nil {
		return durability.Replication{}, fmt.Errorf("persist: mysql: durability: %w", s.core.Wrap(err))
	}
	return f.replication(), nil
}

// facts are what the server shows of its replication.
type facts struct {
	tidb bool

	galera        bool   // wsrep_on
	size          int    // wsrep_cluster_size
	clusterStatus string // wsrep_cluster_status: Primary, non-Primary, Disconnected
	ready         string // wsrep_ready: ON, OFF
	logBin        bool   // @@log_bin
	semi          string // "master" or "source": which semi-synchronous variables the server has; "" none
	semiOn        bool   // rpl_semi_sync_*_enabled
	semiActive    bool   // Rpl_semi_sync_*_status: the primary waits for acknowledgements now
	semiClients   int    // Rpl_semi_sync_*_clients
	waitPoint     string // rpl_semi_sync_*_wait_point
	timeoutMS     int64  // rpl_semi_sync_*_timeout
	replicas      int    // replicas connected; -1 unknown
	unseen        string // why the replicas are unknown: the privilege that shows them
}

// readFacts reads facts with db.
func readFacts(ctx context.Context, db *sql.DB) (facts, error) {
	f := facts{replicas: -1}
	var version string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return f, err
	}
	if strings.Contains(strings.ToLower(version), "tidb") {
		f.tidb = true
		return f, nil
	}
	status, err := globalStatus(ctx, db)
	if err != nil {
		return f, err
	}
	var on sql.NullInt64
	switch err := db.QueryRowContext(ctx, `SELECT @@wsrep_on`).Scan(&on); {
	case err == nil:
		f.galera = on.Int64 != 0
	case errNo(err) != erUnknownSystemVariable:
		return f, err
	}
	if f.galera {
		f.size, _ = strconv.Atoi(status["wsrep_cluster_size"])
		f.clusterStatus, f.ready = status["wsrep_cluster_status"], status["wsrep_ready"]
		return f, nil
	}
	var logBin sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT @@log_bin`).Scan(&logBin); err != nil {
		return f, err
	}
	f.logBin = logBin.Int64 != 0
	for _, name := range []string{"source", "master"} {
		var enabled sql.NullInt64
		var point sql.NullString
		var timeout sql.NullInt64
		err := db.QueryRowContext(ctx, `SELECT @@rpl_semi_sync_`+name+`_enabled, @@rpl_semi_sync_`+name+`_wait_point, @@rpl_semi_sync_`+name+`_timeout`).
			Scan(&enabled, &point, &timeout)
		if errNo(err) == erUnknownSystemVariable {
			continue // not this one's plugin (or none loaded)
		}
		if err != nil {
			return f, err
		}
		f.semi, f.semiOn, f.waitPoint, f.timeoutMS = name, enabled.Int64 != 0, point.String, timeout.Int64
		f.semiActive = strings.EqualFold(status["Rpl_semi_sync_"+name+"_status"], "ON")
		f.semiClients, _ = strconv.Atoi(status["Rpl_semi_sync_"+name+"_clients"])
		break
	}
	if n, ok := status["Slaves_connected"]; ok { // MariaDB
		f.replicas, _ = strconv.Atoi(n)
		return f, nil
	}
	f.replicas, f.unseen, err = countReplicas(ctx, db)
	return f, err
}

// globalStatus reads the status variables of the check, by name.
func globalStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN
		('wsrep_cluster_size', 'wsrep_cluster_status', 'wsrep_ready',
		 'Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_clients',
		 'Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_clients', 'Slaves_connected')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	status := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		status[name] = value
	}
	return status, rows.Err()
}

// countReplicas counts the replicas registered with the server (SHOW
// REPLICAS, or SHOW SLAVE HOSTS before MySQL 8.0.22); -1 and the
// privilege it needs when the user may not see them.
func countReplicas(ctx context.Context, db *sql.DB) (int, string, error) {
	rows, err := db.QueryContext(ctx, `SHOW REPLICAS`)
	if errNo(err) == erParse {
		rows, err = db.QueryContext(ctx, `SHOW SLAVE HOSTS`)
	}
	if errNo(err) == erSpecificAccessDenied {
		return -1, "SHOW REPLICAS needs the REPLICATION SLAVE privilege", nil
	}
	if err != nil {
		return -1, "", err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, "", rows.Err()
}

// adviceSemiSync is the advice of an unsafe record.
func (f facts) adviceSemiSync() string {
	p := "rpl_semi_sync_master_"
	if f.semi == "source" {
		p = "rpl_semi_sync_source_"
	}
	return "enable semi-synchronous replication (" + p + "enabled = ON, " + p + "wait_point = AFTER_SYNC, " +
		"the replicas' plugin too) and fail over only to a replica that acknowledged, or run on a Galera cluster"
}

// replication judges f.
func (f facts) replication() durability.Replication {
	if f.tidb {
		return durability.Replication{Kind: durability.ReplicationRaft, Safety: durability.Safe, Sync: -1, Async: -1,
			Reason: "TiDB replicates every commit through Raft (TiKV) to a majority of its replicas before acknowledging it"}
	}
	if f.galera {
		r := durability.Replication{Kind: durability.ReplicationGalera, Safety: durability.Safe, Members: f.size,
			Sync: max(f.size-1, 0), Async: 0, State: f.clusterStatus,
			Reason: fmt.Sprintf("every commit is certified by the %d nodes of the Galera cluster before it is acknowledged", f.size)}
		if f.size == 1 {
			r.Reason = "a Galera cluster of one node: a commit is as safe as its disk"
		}
		if f.clusterStatus != "Primary" || !strings.EqualFold(f.ready, "ON") {
			r.Reason = fmt.Sprintf("this Galera node is outside the cluster's primary component (wsrep_cluster_status = %s, wsrep_ready = %s): "+
				"writes fail here until it rejoins; commits acknowledged before are on the other nodes", f.clusterStatus, f.ready)
		}
		return r
	}
	r := durability.Replication{Kind: durability.ReplicationMySQL, Sync: -1, Async: -1}
	semiVar := "Rpl_semi_sync_" + f.semi + "_status"
	fellBack := fmt.Sprintf("semi-synchronous replication is enabled but off now (%s = OFF: no replica acknowledged "+
		"within rpl_semi_sync_%s_timeout = %d ms, or none is connected)", semiVar, f.semi, f.timeoutMS)
	switch {
	case f.semiOn && f.semiActive:
		r.Safety = durability.Safe
		r.Sync = f.semiClients
		if f.replicas >= 0 {
			r.Async = max(f.replicas-f.semiClients, 0)
			r.Members = 1 + max(f.replicas, f.semiClients)
		}
		r.Reason = fmt.Sprintf("semi-synchronous replication (wait point %s): a commit is acknowledged once a replica has it; "+
			"%d semi-synchronous replica%s connected", f.waitPoint, f.semiClients, plural(f.semiClients))
		if r.Async > 0 {
			r.Reason += fmt.Sprintf(", %d asynchronous: fail over only to one that acknowledged", r.Async)
		}
	case !f.logBin:
		r.Kind, r.Safety, r.Members, r.Sync, r.Async = durability.ReplicationSingle, durability.Safe, 1, 0, 0
		r.Reason = "the binary log is off: nothing replicates from this server, and a commit is as safe as its disk"
	case f.replicas == 0:
		r.Kind, r.Safety, r.Members, r.Sync, r.Async = durability.ReplicationSingle, durability.Safe, 1, 0, 0
		r.Reason = "the binary log is on but no replica is connected: a commit is as safe as the server's disk"
	case f.replicas > 0:
		r.Safety, r.Members, r.Sync, r.Async = durability.Unsafe, 1+f.replicas, 0, f.replicas
		r.Reason = fmt.Sprintf("%d replica%s replicate%s asynchronously: a commit does not wait for them",
			f.replicas, plural(f.replicas), plural1(f.replicas))
		if f.semiOn {
			r.Reason = fmt.Sprintf("%d replica%s connected, and %s", f.replicas, plural(f.replicas), fellBack)
		}
		r.Advice = f.adviceSemiSync()
	case f.semiOn:
		r.Safety = durability.Unsafe
		r.Reason = fellBack
		r.Advice = f.adviceSemiSync()
	default:
		r.Reason = "the binary log is on and semi-synchronous replication is off, but leaf's user cannot see replicas (" +
			f.unseen + "): a failover to an asynchronous replica would lose the last commits"
		r.Advice = "if a replica may be promoted, " + f.adviceSemiSync()
	}
	return r
}

// plural is "s" unless n is 1; plural1 is the verb's "s" when n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func plural1(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}
