package httpapi_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leaf-id/leaf/httpapi"
	"github.com/leaf-id/leaf/persist/durability"
)

// leaf_store_replication_safe and the status page show the durability
// check's last result, read at each scrape; without the check there is
// no such series.
func TestReplicationShown(t *testing.T) {
	var last atomic.Pointer[durability.Replication]
	last.Store(&durability.Replication{Kind: durability.ReplicationPostgres, Safety: durability.Unsafe, Members: 2, Sync: -1, Async: -1,
		Reason: "1 standby streams asynchronously", Advice: "set synchronous_standby_names"})
	e := start(t, setup{http: func(o *httpapi.Options) { o.Replication = func() durability.Replication { return *last.Load() } }})
	const unsafe = `leaf_store_replication_safe{durability="unsafe",kind="postgres_streaming"}`
	if m := metrics(t, e.URL); len(matching(m, "leaf_store_replication_safe")) != 1 || m[unsafe] != 0 {
		t.Errorf("series %v, want %s 0", matching(m, "leaf_store_replication_safe"), unsafe)
	}
	page := get(t, e.URL+"/").body
	if want := `<b id="replication" class="bad">postgres_streaming, unsafe</b>: 1 standby streams asynchronously; set synchronous_standby_names`; !strings.Contains(page, want) {
		t.Errorf("status page lacks %q", want)
	}

	last.Store(&durability.Replication{Kind: durability.ReplicationGalera, Safety: durability.Safe, Members: 3, Reason: "certified"})
	const safe = `leaf_store_replication_safe{durability="safe",kind="galera"}`
	if m := metrics(t, e.URL); len(matching(m, "leaf_store_replication_safe")) != 1 || m[safe] != 1 {
		t.Errorf("series %v, want %s 1", matching(m, "leaf_store_replication_safe"), safe)
	}
	if want := `<b id="replication" class="ok">galera, safe</b>: certified</li>`; !strings.Contains(get(t, e.URL+"/").body, want) {
		t.Errorf("status page lacks %q", want)
	}

	plain := start(t, setup{})
	if s := matching(metrics(t, plain.URL), "leaf_store_replication_safe"); len(s) != 0 {
		t.Errorf("without the check: %v", s)
	}
}

// matching are the series of m named name.
func matching(m map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}
