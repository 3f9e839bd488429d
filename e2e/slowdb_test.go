package e2e

// A distant database: leaf on MariaDB and on PostgreSQL with every byte
// between them delayed, as over a long link. A segment load then costs
// its round trips times the delay, and a burst on an idle tag must still
// meet at most two loads that a request waits for (one is the design's
// bound, segment.TestBurstOnIdleTagWaitsAtMostOneLoad on the injected
// clock: the load in flight when the burst was seen; a busy machine that
// stalls leaf while it measures the burst's rate may cost one more), here
// through the real binary, driver and database. What is counted is the server's own
// count (INFO leaf waited_loads), never a time.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/internal/roundtrip"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

const (
	// slowDBDelay is added to every byte in each direction between leaf
	// and its database: 100 ms a round trip.
	slowDBDelay = 50 * time.Millisecond
	// slowDBClients is the burst's connections, each sending one INCR at
	// a time (redis-benchmark -c 50 -P 1).
	slowDBClients = 50
	// slowDBEnvIncrs names the variable that sets the burst's INCRs,
	// slowDBIncrs by default.
	slowDBEnvIncrs = "LEAF_TEST_SLOWDB_INCRS"
	slowDBIncrs    = 100_000
)

// TestSlowDatabaseBurst: on each SQL backend behind a delaying proxy, a
// tag created and used once, then a burst of INCRs from slowDBClients
// connections at once. At most two loads are waited for during the burst,
// every ID is unique, and each connection's IDs increase. Not parallel:
// whether a load is waited for depends on the rate the burst keeps, which
// other tests' load on the machine would shake.
func TestSlowDatabaseBurst(t *testing.T) {
	for _, tc := range []struct {
		name string
		via  func(t *testing.T) []string // leaf's store settings, through a delaying proxy
	}{
		{"MariaDB", func(t *testing.T) []string {
			cfg, err := mysql.ParseDSN(mysqltest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Addr = roundtrip.StartDelayed(t, cfg.Addr, slowDBDelay).Addr()
			return []string{"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + cfg.FormatDSN()}
		}},
		{"PostgreSQL", func(t *testing.T) []string {
			u, err := url.Parse(postgrestest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			u.Host = roundtrip.StartDelayed(t, u.Host, slowDBDelay).Addr()
			return []string{"LEAF_STORE_DRIVER=postgres", "LEAF_STORE_DSN=" + u.String()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(tc.via(t),
				// A request waits for a load this long at most: far above
				// what one costs here (about a second), so that a busy
				// machine shows as waits counted, never as errors.
				"LEAF_SEGMENT_LOAD_TIMEOUT=1m",
				"LEAF_LOG_LEVEL=info")
			p := startLeaf(t, t.TempDir(), env...)
			slowDBBurst(t, p, slowDBIncrsWanted(t))
		})
	}
}

// slowDBIncrsWanted is the burst's size: slowDBEnvIncrs, or slowDBIncrs.
func slowDBIncrsWanted(t *testing.T) int {
	t.Helper()
	v := os.Getenv(slowDBEnvIncrs)
	if v == "" {
		return slowDBIncrs
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < slowDBClients {
		t.Fatalf("%s=%q: want a count of at least %d", slowDBEnvIncrs, v, slowDBClients)
	}
	return n
}

// slowDBBurst creates a tag on p, takes one ID, then sends n INCRs of it
// from slowDBClients connections at once, and checks the IDs and the
// loads waited for.
func slowDBBurst(t *testing.T, p *proc, n int) {
	ctx := context.Background()
	c := patientClient(t, p)
	waitServing(t, c)
	const tag = "burst"
	if err := c.Do(ctx, "LEAF.CREATE", tag).Err(); err != nil {
		t.Fatalf("LEAF.CREATE %s: %v", tag, err)
	}
	first := redistest.Incr(t, c, tag) // its first segment loaded: an idle tag

	clients := make([]*redis.Client, slowDBClients)
	for i := range clients {
		clients[i] = patientClient(t, p)
		if err := clients[i].Ping(ctx).Err(); err != nil { // connected before the burst
			t.Fatalf("PING: %v", err)
		}
	}
	before := infoLeaf(t, c)

	var left atomic.Int64
	left.Store(int64(n))
	start := make(chan struct{})
	ids := make([][]int64, len(clients))
	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			<-start
			for left.Add(-1) >= 0 {
				id, err := cl.Incr(ctx, tag).Result()
				if err != nil {
					errs <- fmt.Errorf("connection %d, INCR %d: %w", i, len(ids[i])+1, err)
					return
				}
				ids[i] = append(ids[i], id)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := infoLeaf(t, c)
	info := redistest.LeafInfo(t, c, tag)

	// Each connection's replies increase; no ID repeats, none is at or
	// below the one taken before the burst.
	all := make([]int64, 0, n)
	for i, got := range ids {
		for j := 1; j < len(got); j++ {
			if got[j] <= got[j-1] {
				t.Fatalf("connection %d: INCR %d = %d after %d", i, j+1, got[j], got[j-1])
			}
		}
		all = append(all, got...)
	}
	if len(all) != n && !t.Failed() {
		t.Fatalf("%d IDs from the burst, want %d", len(all), n)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	if len(all) > 0 && all[0] <= first {
		t.Fatalf("the burst's lowest ID %d is not above %d, taken before it", all[0], first)
	}

	waited := after.int(t, "waited_loads") - before.int(t, "waited_loads")
	t.Logf("%d INCRs from %d connections in %s (%.0f/s): %d requests waited on the database, for %d loads; the tag loaded %d segments in all, its step now %d",
		n, len(clients), took.Round(time.Millisecond), float64(n)/took.Seconds(),
		after.int(t, "waits")-before.int(t, "waits"), waited, infoInt(t, info, "loads"), infoInt(t, info, "step"))
	if waited > 2 {
		t.Errorf("the burst waited for %d loads, want at most 2 (the one planned before it was seen, the one in flight when it was)", waited)
	}
}
