package mysql

import (
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist/durability"
)

// What each state of a server's replication is judged, from what a user
// sees of it. The test servers show only a single server and Galera;
// replication from the binary log is judged here only.
func TestReplicationJudged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       facts
		kind    string
		safety  durability.Safety
		members int
		sync    int
		async   int
		reason  string // a part of the reason
	}{
		{"binary log off", facts{replicas: 0}, durability.ReplicationSingle, durability.Safe, 1, 0, 0, "the binary log is off"},
		{"binary log on, no replica (MariaDB)", facts{logBin: true, semi: "master", replicas: 0},
			durability.ReplicationSingle, durability.Safe, 1, 0, 0, "no replica is connected"},
		{"asynchronous replicas", facts{logBin: true, semi: "master", replicas: 2},
			durability.ReplicationMySQL, durability.Unsafe, 3, 0, 2, "2 replicas replicate asynchronously"},
		{"one asynchronous replica", facts{logBin: true, replicas: 1},
			durability.ReplicationMySQL, durability.Unsafe, 2, 0, 1, "1 replica replicates asynchronously"},
		{"replicas not shown (MySQL)", facts{logBin: true, replicas: -1, unseen: "SHOW REPLICAS needs the REPLICATION SLAVE privilege"},
			durability.ReplicationMySQL, durability.Unknown, 0, -1, -1, "cannot see replicas (SHOW REPLICAS needs the REPLICATION SLAVE privilege)"},
		{"semi-synchronous, AFTER_SYNC", facts{logBin: true, semi: "source", semiOn: true, semiActive: true, semiClients: 1, waitPoint: "AFTER_SYNC", replicas: -1},
			durability.ReplicationMySQL, durability.Safe, 0, 1, -1, "semi-synchronous replication (wait point AFTER_SYNC)"},
		{"semi-synchronous and asynchronous", facts{logBin: true, semi: "master", semiOn: true, semiActive: true, semiClients: 1, waitPoint: "AFTER_COMMIT", replicas: 2},
			durability.ReplicationMySQL, durability.Safe, 3, 1, 1, "1 asynchronous: fail over only to one that acknowledged"},
		{"semi-synchronous fell back, replicas shown", facts{logBin: true, semi: "master", semiOn: true, timeoutMS: 10000, replicas: 1},
			durability.ReplicationMySQL, durability.Unsafe, 2, 0, 1, "Rpl_semi_sync_master_status = OFF"},
		{"semi-synchronous fell back, replicas hidden", facts{logBin: true, semi: "source", semiOn: true, timeoutMS: 10000, replicas: -1},
			durability.ReplicationMySQL, durability.Unsafe, 0, -1, -1, "rpl_semi_sync_source_timeout = 10000 ms"},
		{"semi-synchronous enabled, no replica", facts{logBin: true, semi: "master", semiOn: true, replicas: 0},
			durability.ReplicationSingle, durability.Safe, 1, 0, 0, "no replica is connected"},
		{"Galera", facts{galera: true, size: 3, clusterStatus: "Primary", ready: "ON"},
			durability.ReplicationGalera, durability.Safe, 3, 2, 0, "certified by the 3 nodes"},
		{"Galera node cut off", facts{galera: true, size: 1, clusterStatus: "non-Primary", ready: "OFF"},
			durability.ReplicationGalera, durability.Safe, 1, 0, 0, "outside the cluster's primary component"},
		{"TiDB", facts{tidb: true}, durability.ReplicationRaft, durability.Safe, 0, -1, -1, "TiDB replicates every commit through Raft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.f.replication()
			if r.Kind != tc.kind || r.Safety != tc.safety || r.Members != tc.members || r.Sync != tc.sync || r.Async != tc.async {
				t.Errorf("judged %s %s, members %d, sync %d, async %d; want %s %s, members %d, sync %d, async %d",
					r.Kind, r.Safety, r.Members, r.Sync, r.Async, tc.kind, tc.safety, tc.members, tc.sync, tc.async)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", r.Reason, tc.reason)
			}
			if r.Safety == durability.Unsafe && !strings.Contains(r.Advice, "AFTER_SYNC") {
				t.Errorf("advice %q, want semi-synchronous replication with AFTER_SYNC", r.Advice)
			}
		})
	}
}
