package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// INFO leaf and LEAF.INFO show the durability check's last result as the
// server is told it (Options.Replication), read anew each time.
func TestInfoReplication(t *testing.T) {
	results := make(chan durability.Replication, 1)
	results <- durability.Replication{Kind: durability.ReplicationPostgres, Safety: durability.Unsafe, Members: 2, Sync: -1, Async: -1,
		Reason: "1 standby streams asynchronously", Advice: "set synchronous_standby_names"}
	last := durability.Replication{}
	in := servertest.Start(t, servertest.Options{Server: server.Options{Replication: func() durability.Replication {
		select {
		case last = <-results:
		default:
		}
		return last
	}, StoreID: func() string { return "0123abcd" }}})
	c := newClient(t, in.Addr, 2, "")
	redistest.Incr(t, c, "repl")
	info := func() infoSection {
		t.Helper()
		text, err := c.Info(context.Background(), "leaf").Result()
		if err != nil {
			t.Fatal(err)
		}
		return parseInfo(t, text)[0]
	}
	for k, want := range map[string]string{
		"store_replication": "postgres_streaming", "store_durability": "unsafe", "store_replication_members": "2",
		"store_replication_sync": "-1", "store_replication_async": "-1", "store_replication_state": "",
		"store_durability_reason": "1 standby streams asynchronously", "store_durability_advice": "set synchronous_standby_names",
		"store_id": "0123abcd",
	} {
		if v, ok := info().get(k); !ok || v != want {
			t.Errorf("INFO leaf %s = %q (%v), want %q", k, v, ok, want)
		}
	}
	if f := redistest.LeafInfo(t, c, "repl"); f["store_replication"] != "postgres_streaming" || f["store_durability"] != "unsafe" {
		t.Errorf("LEAF.INFO store_replication %v, store_durability %v", f["store_replication"], f["store_durability"])
	}

	// Free text with "," and "=" (SQLite's reason has both): written so
	// that clients do not take it for k=v pairs (redis-py fails on those).
	results <- durability.Replication{Kind: durability.ReplicationGalera, Safety: durability.Safe, Members: 3, Sync: 2, State: "Primary",
		Reason: "every commit is certified by the 3 nodes, wsrep_sync_wait=0"}
	sec := info()
	var got []string
	for _, f := range sec.fields {
		if strings.HasPrefix(f[0], "store_replication") || strings.HasPrefix(f[0], "store_durability") {
			got = append(got, f[0]+":"+f[1])
		}
	}
	want := "store_replication:galera store_durability:safe store_replication_members:3 store_replication_sync:2 " +
		"store_replication_async:0 store_replication_state:Primary " +
		"store_durability_reason:every commit is certified by the 3 nodes; wsrep_sync_wait=0 store_durability_advice:"
	if strings.Join(got, " ") != want {
		t.Errorf("INFO leaf:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	// As redis-py reads INFO: a value with "," and "=" must be k=v items.
	text, err := c.Info(context.Background(), "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(text, "\r\n") {
		_, v, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") || !strings.Contains(v, ",") || !strings.Contains(v, "=") {
			continue
		}
		for _, item := range strings.Split(v, ",") {
			if !strings.Contains(item, "=") {
				t.Errorf("INFO line %q: item %q is not k=v (redis-py's INFO parser fails on it)", l, item)
			}
		}
	}
}
