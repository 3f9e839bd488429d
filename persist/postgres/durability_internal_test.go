package postgres

import (
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist/durability"
)

// What each state of a server's replication is judged, from what a role
// sees of it: the states that a test server cannot be put in (a standby
// that is synchronous by name but not connected, quorum commit, a
// CockroachDB) are judged here only.
func TestReplicationJudged(t *testing.T) {
	on := func(f facts) facts {
		if f.syncCommit == "" {
			f.syncCommit = "on"
		}
		return f
	}
	for _, tc := range []struct {
		name   string
		f      facts
		kind   string
		safety durability.Safety
		sync   int
		async  int
		reason string // a part of the reason
	}{
		{"single", on(facts{}), durability.ReplicationSingle, durability.Safe, 0, 0, "no standby streams"},
		{"single, synchronous_commit local", facts{syncCommit: "local", names: "node2"}, durability.ReplicationSingle, durability.Safe, 0, 0, "synchronous_commit = local"},
		{"single, synchronous_commit off", facts{syncCommit: "off"}, durability.ReplicationSingle, durability.Unsafe, 0, 0, "crash of the server loses it"},
		{"names set, no standby connected", on(facts{names: "node2"}), durability.ReplicationSingle, durability.Safe, 0, 0, "commits wait until one does"},
		{"asynchronous standby, hidden", on(facts{standbys: 1}), durability.ReplicationPostgres, durability.Unsafe, -1, -1, "1 standby streams asynchronously"},
		{"asynchronous standbys, seen", on(facts{standbys: 2, visible: 2, async: 2}), durability.ReplicationPostgres, durability.Unsafe, 0, 2, "2 standbys stream asynchronously"},
		{"synchronous_commit local", facts{syncCommit: "local", names: "*", standbys: 1, visible: 1, sync: 1},
			durability.ReplicationPostgres, durability.Unsafe, 1, 0, "does not wait for the 1 standby"},
		{"synchronous_commit off", facts{syncCommit: "off", names: "*", standbys: 1}, durability.ReplicationPostgres, durability.Unsafe, -1, -1, "synchronous_commit = off"},
		{"synchronous, hidden", on(facts{names: `"node2"`, standbys: 2}), durability.ReplicationPostgres, durability.Safe, -1, -1, "pg_read_all_stats"},
		{"synchronous and potential (Patroni)", on(facts{names: `"node2"`, standbys: 2, visible: 2, sync: 1, async: 1}),
			durability.ReplicationPostgres, durability.Safe, 1, 1, "fail over only to a synchronous one"},
		{"quorum", facts{syncCommit: "remote_apply", names: "ANY 1 (a, b)", standbys: 2, visible: 2, sync: 2},
			durability.ReplicationPostgres, durability.Safe, 2, 0, "waits for 2 synchronous standbys"},
		{"names set, none synchronous", on(facts{names: "gone", standbys: 1, visible: 1, async: 1}),
			durability.ReplicationPostgres, durability.Unknown, 0, 1, "none of the 1 standby is synchronous"},
		{"a standby", on(facts{recovery: true}), durability.ReplicationSingle, durability.Unknown, 0, 0, "connected to a standby"},
		{"CockroachDB", facts{raft: "CockroachDB"}, durability.ReplicationRaft, durability.Safe, -1, -1, "CockroachDB replicates every commit through Raft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.f.replication()
			if r.Kind != tc.kind || r.Safety != tc.safety || r.Sync != tc.sync || r.Async != tc.async || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("%+v judged %+v; want %s, %s, sync %d, async %d, a reason with %q", tc.f, r, tc.kind, tc.safety, tc.sync, tc.async, tc.reason)
			}
			if r.Kind != durability.ReplicationRaft && r.Members != 1+tc.f.standbys {
				t.Errorf("members %d, want %d", r.Members, 1+tc.f.standbys)
			}
			if (r.Safety == durability.Unsafe) != (r.Advice != "") && r.Safety != durability.Unknown {
				t.Errorf("advice %q with %s", r.Advice, r.Safety)
			}
		})
	}
}
