package e2e

// A database that goes away under a running server, whatever the way:
// MariaDB hung (SIGSTOP) or crashed (SIGKILL), SQLite unable to write. The
// first request that needs the database waits for it at most load_timeout;
// from then on leaf answers at once (TRYAGAIN) what needs the database,
// serves its cached IDs, shows the state, and one probe at a time finds
// the database back.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

const (
	// awayLoadTimeout is load_timeout in these tests: the longest a
	// request waits for the database.
	awayLoadTimeout = 5 * time.Second
	// awayPipelineTimeout bounds the read of the 1,000 replies of the
	// pipeline sent while the database is away: far above one
	// load_timeout, which is what the pipeline may cost (a slow machine
	// has room), and far below the 1,000 load_timeouts of a server that
	// waits for the database request after request. The exact bound is
	// asserted by counting: at most two requests waited.
	awayPipelineTimeout = 12 * awayLoadTimeout
	// awayTags is the number of uncached tags in the pipeline: half known
	// to the server but never loaded, half never seen.
	awayTags = 1000
)

// awayEnv: segments of exactly 100 IDs, load_timeout awayLoadTimeout,
// probes at most a second apart, and the HTTP side for /readyz and
// /metrics.
func awayEnv() []string {
	return []string{
		"LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100",
		"LEAF_SEGMENT_LOAD_TIMEOUT=" + awayLoadTimeout.String(),
		"LEAF_SEGMENT_MAX_RETRY_BACKOFF=1s",
		"LEAF_HTTP_ADDR=127.0.0.1:0", "LEAF_LOG_LEVEL=info",
	}
}

// TestStoreAway runs one outage per way a database goes away (see
// storeAwayEpisode). SQLite cannot be made to fail with permissions (root
// ignores them, and a running leaf keeps its database files open, so
// not even another user's leaf notices a directory or file made
// read-only); its writes fail when the process may not grow a file
// (RLIMIT_FSIZE, set on the running process with prlimit), exactly as
// they fail on a full disk, for root too.
func TestStoreAway(t *testing.T) {
	t.Parallel()
	t.Run("SQLite/NoWrites", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		st := sqliteStore(t, dir)
		var p *proc
		start := func() *proc { p = startLeaf(t, dir, append(awayEnv(), st.env...)...); return p }
		storeAwayEpisode(t, "sqlite_", start,
			func() { limitFileSize(t, p, "1") },
			func() { limitFileSize(t, p, "unlimited") })
	})
	t.Run("MariaDB", func(t *testing.T) {
		t.Parallel()
		db := ownMariaDB(t) // Hang and Crash in turn on it
		for _, tc := range []struct {
			name           string
			fault, recover func()
		}{
			{"Hang", db.pause, db.resume},
			{"Crash", db.kill, db.start},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st := mysqlStoreAt(t, db.dsn)
				dir := t.TempDir()
				start := func() *proc { return startLeaf(t, dir, append(awayEnv(), st.env...)...) }
				recovered := false
				t.Cleanup(func() {
					if !recovered {
						tc.recover()
					}
				})
				prefix := strings.ToLower(tc.name) + "_" // one database for both
				storeAwayEpisode(t, prefix, start, tc.fault, func() { tc.recover(); recovered = true })
			})
		}
	})
}

// limitFileSize sets the soft RLIMIT_FSIZE of p (prlimit(1)): past that
// size every write of the process fails with EFBIG, as on a full disk.
// leaf, a Go program, ignores the SIGXFSZ that comes with it.
func limitFileSize(t *testing.T, p *proc, size string) {
	t.Helper()
	out, err := exec.Command("prlimit", "--pid", strconv.Itoa(p.cmd.Process.Pid), "--fsize="+size+":").CombinedOutput()
	if err != nil {
		t.Fatalf("prlimit --fsize=%s: %v\n%s", size, err, out)
	}
}

// storeAwayEpisode: a leaf process (started by start) with one tag cached
// and 500 tags known but never loaded. The database goes away (fault):
//   - a pipeline of 1,000 INCRs of uncached tags (the 500, and 500 names
//     never seen) is answered TRYAGAIN, all of it, within
//     awayPipelineTimeout; at most two of its requests waited for the
//     database (the first, and one that began before the first one's load
//     ended), every other was refused at once;
//   - the cached tag serves on, and INFO, LEAF.INFO, /readyz and /metrics
//     show the database away and since when.
//
// The database comes back (recover): at most one probe more finds it, the
// next INCR of a new tag gets its first ID, the 500 refused tags are
// loaded. Across the episode no ID repeats: each tag's IDs increase, and a
// server started after a SIGKILL of this one goes on above all of them.
// Every tag name starts with prefix.
func storeAwayEpisode(t *testing.T, prefix string, start func() *proc, fault, recover func()) {
	ctx := context.Background()
	p := start()
	c := patientClient(t, p)
	cached := prefix + "cached"
	served := map[string]int64{} // highest ID served per tag
	serve := func(tag string, n int) {
		t.Helper()
		for range n {
			id := redistest.Incr(t, c, tag)
			if id <= served[tag] {
				t.Fatalf("INCR %s = %d after %d", tag, id, served[tag])
			}
			served[tag] = id
		}
	}
	serve(cached, 20) // past the prefetch point: both segments cached
	nextReady(t, c, cached)
	known := make([]string, awayTags/2)
	if _, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := range known {
			known[i] = fmt.Sprintf("%sknown_%03d", prefix, i)
			pl.Do(ctx, "LEAF.CREATE", known[i])
		}
		return nil
	}); err != nil {
		t.Fatalf("LEAF.CREATE: %v", err)
	}
	before := infoLeaf(t, c)

	fault()
	serve(cached, 10) // cached IDs need no database

	pc := redis.NewClient(&redis.Options{
		Addr: p.Addr, PoolSize: 1, MaxRetries: -1,
		ReadTimeout: awayPipelineTimeout, WriteTimeout: awayPipelineTimeout,
	})
	defer pc.Close()
	sent := time.Now()
	cmds, err := pc.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, tag := range known {
			pl.Incr(ctx, tag)
		}
		for i := range awayTags / 2 {
			pl.Incr(ctx, fmt.Sprintf("%snew_%03d", prefix, i))
		}
		return nil
	})
	var re redis.Error
	if err != nil && !errors.As(err, &re) {
		t.Fatalf("pipeline of %d INCRs with the database away: %v (not answered within %v)", awayTags, err, awayPipelineTimeout)
	}
	for i, cmd := range cmds {
		if err := cmd.Err(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN ") {
			t.Fatalf("pipeline reply %d (%v): %v, want TRYAGAIN", i, cmd.Args(), err)
		}
	}
	took := time.Since(sent)
	during := infoLeaf(t, c)
	t.Logf("pipeline of %d: %v (load_timeout %v); waited %d, refused at once %d", awayTags, took.Round(time.Millisecond),
		awayLoadTimeout, during.int(t, "waits")-before.int(t, "waits"), during.int(t, "store_refused")-before.int(t, "store_refused"))
	if waited := during.int(t, "waits") - before.int(t, "waits"); waited > 2 {
		t.Errorf("%d requests waited for the database, want at most 2: the others must be refused at once", waited)
	}
	if refused := during.int(t, "store_refused") - before.int(t, "store_refused"); refused < awayTags-2 {
		t.Errorf("%d requests refused at once, want at least %d", refused, awayTags-2)
	}
	if during["store_ok"] != "0" || during.int(t, "store_outages") != before.int(t, "store_outages")+1 {
		t.Errorf("INFO during the outage: store_ok %s, store_outages %s; want 0 and one more", during["store_ok"], during["store_outages"])
	}
	since := during.int(t, "store_away_since")
	if since <= 0 {
		t.Errorf("INFO store_away_since = %d during the outage, want unix milliseconds", since)
	}
	if f := redistest.LeafInfo(t, c, cached); f["store_ok"] != int64(0) || f["store_away_since"] != since {
		t.Errorf("LEAF.INFO during the outage: store_ok %v store_away_since %v; want 0, %d", f["store_ok"], f["store_away_since"], since)
	}
	base := p.httpBase(t)
	if code, body := httpGet(t, base+"/readyz"); code != 200 || !strings.HasPrefix(body, "partially ready: database away since ") {
		t.Errorf("GET /readyz during the outage = %d %q; want 200, partially ready", code, body)
	}
	_, m := httpGet(t, base+"/metrics")
	if v := metricValue(t, m, "leaf_store_up"); v != 0 {
		t.Errorf("leaf_store_up = %v during the outage, want 0", v)
	}
	if v := metricValue(t, m, "leaf_store_away_since_seconds"); math.Abs(v*1000-float64(since)) >= 1 {
		t.Errorf("leaf_store_away_since_seconds = %v, want %d ms", v, since)
	}
	serve(cached, 10)

	recover()
	probes := infoLeaf(t, c).int(t, "store_probes")
	waitStoreOK(t, c, "1")
	if n := infoLeaf(t, c).int(t, "store_probes") - probes; n > 1 {
		t.Errorf("%d probes after the database was back, want at most 1: the first one must find it", n)
	}
	fresh := prefix + "fresh"
	if id, reply, err := incrErr(c, fresh); err != nil || reply != "" || id != 1 {
		t.Fatalf("first INCR of a new tag once the database is back = %d, %q, %v; want 1\n%s", id, reply, err, p.Log())
	}
	served[fresh] = 1
	for _, tag := range []string{known[0], known[len(known)-1]} {
		nextReady(t, c, tag) // refused while away, loaded once it is back
		serve(tag, 1)
	}
	serve(cached, 250) // through more loads

	p.Stop(syscall.SIGKILL) // nothing given back: the database alone says what was served
	c = patientClient(t, start())
	for tag, high := range served {
		if id := redistest.Incr(t, c, tag); id <= high {
			t.Errorf("INCR %s after a restart = %d, not above %d served before", tag, id, high)
		}
	}
}

// leafSection is INFO leaf, field by field.
type leafSection map[string]string

func infoLeaf(t testing.TB, c *redis.Client) leafSection {
	t.Helper()
	s, err := c.Info(context.Background(), "leaf").Result()
	if err != nil {
		t.Fatalf("INFO leaf: %v", err)
	}
	out := leafSection{}
	for line := range strings.SplitSeq(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// int is an integer field.
func (s leafSection) int(t testing.TB, key string) int64 {
	t.Helper()
	return mustInt(t, key, s[key])
}
