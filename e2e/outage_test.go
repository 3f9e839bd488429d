package e2e

// Database outages under a running server, on a MariaDB of the test's own
// that it kills, pauses and restarts: leaf serves from its cached segments,
// then answers TRYAGAIN, reports the state in INFO and LEAF.INFO, and
// recovers by itself when the database is back.

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
)

// outageEnv: leaf on db, segments of exactly 100 IDs (the step cannot
// grow), requests that give up on the database after one second, and
// probes of a database that is away at most a second apart.
func outageEnv(db *dbServer) []string {
	return append(db.env(),
		"LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100",
		"LEAF_SEGMENT_LOAD_TIMEOUT=1s", "LEAF_SEGMENT_MAX_RETRY_BACKOFF=1s", "LEAF_LOG_LEVEL=info",
	)
}

// TestDatabaseOutage: with two segments cached, the database crashes
// (SIGKILL) or hangs (SIGSTOP). INCR answers every cached ID, in order,
// then TRYAGAIN: at once when the database refuses connections, after
// load_timeout when it does not answer (the test asserts that the error
// comes, not how fast). INFO and LEAF.INFO show the database unreachable,
// the error and no runway. Once the database is back the same process
// serves again, above every ID it served before.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	servers := []struct {
		name string
		own  func(t *testing.T) *dbServer
		more func(t *testing.T, db *dbServer) // on the same server
	}{
		{"MySQL", ownMariaDB, testReadOnlyServer},
		{"PostgreSQL", ownPostgres, nil},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel() // a server of its own
			db := srv.own(t)
			testDatabaseOutage(t, db)
			if srv.more != nil {
				srv.more(t, db)
			}
		})
	}
}

// testReadOnlyServer: a MariaDB made read-only (read_only, as a replica):
// leaf does not start, and says so, instead of failing on a connection the
// driver drops (the read-only refusals of sessions, and PostgreSQL's, are
// in persist's grant tests).
func testReadOnlyServer(t *testing.T, db *dbServer) {
	t.Run("ReadOnlyServer", func(t *testing.T) {
		st := mysqlStoreAt(t, db.dsn)
		st.exec(t, "CREATE TABLE IF NOT EXISTS leaf_alloc (biz_tag VARCHAR(128) NOT NULL PRIMARY KEY, max_id BIGINT NOT NULL DEFAULT 1, "+
			"step INT NOT NULL, description VARCHAR(256), update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)")
		db.rootSQL("SET GLOBAL read_only = ON")
		t.Cleanup(func() { db.rootSQL("SET GLOBAL read_only = OFF") })
		code, stderr := runLeafToExit(t, t.TempDir(), append(db.env(), "LEAF_STORE_CREATE_SCHEMA=false")...)
		if code == 0 || !strings.Contains(stderr, "the database is read-only") || !strings.Contains(stderr, "read_only is ON") {
			t.Fatalf("leaf on a read-only server: exit %d, want a refusal saying the server is read-only:\n%s", code, stderr)
		}
	})
}

func testDatabaseOutage(t *testing.T, db *dbServer) {
	tests := []struct {
		name           string
		fault, recover func()
		// want is in the TRYAGAIN reply: what the request met, in
		// leaf's words (a driver's own wording for a lost connection
		// varies with the moment the server died).
		want []string
	}{
		{"Crash", db.kill, db.start, []string{"the database is unavailable", "no segment within 1s"}},
		// The paused server accepts connections and never answers: the
		// load ends at its deadline (or the request's wait does first).
		{"Hang", db.pause, db.resume, []string{"deadline exceeded", "no segment within 1s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := "outage_" + strings.ToLower(tc.name)
			p := startLeaf(t, t.TempDir(), outageEnv(db)...)
			c := patientClient(t, p)

			var last int64
			for range 20 { // past the prefetch point (10%)
				last = redistest.Incr(t, c, tag)
			}
			nextReady(t, c, tag)

			tc.fault()
			recovered := false
			t.Cleanup(func() {
				if !recovered {
					tc.recover()
				}
			})
			f := redistest.LeafInfo(t, c, tag)
			runway := infoInt(t, f, "runway_ids")
			if runway != 180 {
				t.Fatalf("runway_ids = %d with 20 of 200 cached IDs used, want 180", runway)
			}
			last = incrRising(t, c, tag, "cached ID", last, runway)
			// The cache is empty: the answer is an error, within
			// load_timeout (a hang would end the test at its deadline).
			_, reply, err := incrErr(c, tag)
			if err != nil || !strings.HasPrefix(reply, "TRYAGAIN no cached IDs for tag '"+tag+"'") {
				t.Fatalf("INCR with no cached IDs and the database down = %v, %q; want TRYAGAIN", err, reply)
			}
			if !slices.ContainsFunc(tc.want, func(w string) bool { return strings.Contains(reply, w) }) {
				t.Errorf("TRYAGAIN reply %q says none of %q", reply, tc.want)
			}

			// The request may give up (load_timeout) just before the load
			// it waited for records its failure.
			waitStoreOK(t, c, "0")
			if v := infoField(t, c, "leaf", "store_last_error"); v == "" {
				t.Errorf("INFO store_last_error is empty during the outage")
			}
			if v := infoField(t, c, "leaf", "store_last_error_at"); mustInt(t, "store_last_error_at", v) <= 0 {
				t.Errorf("INFO store_last_error_at = %q during the outage", v)
			}
			f = redistest.LeafInfo(t, c, tag)
			if f["store_ok"] != int64(0) || f["runway_ids"] != int64(0) || f["last_error"] == "" || infoInt(t, f, "failures") == 0 {
				t.Errorf("LEAF.INFO during the outage: store_ok %v runway_ids %v failures %v last_error %q; want 0, 0, >0, an error",
					f["store_ok"], f["runway_ids"], f["failures"], f["last_error"])
			}

			tc.recover()
			recovered = true
			id, retried := incrAfterRecovery(t, c, tag)
			if len(retried) > 0 {
				t.Logf("TRYAGAIN before the first ID after recovery: %q", retried)
			}
			if id <= last {
				t.Fatalf("first INCR after recovery = %d, want > %d", id, last)
			}
			incrRising(t, c, tag, "ID after recovery", id, 250) // through more segment loads
			if v := infoField(t, c, "leaf", "store_ok"); v != "1" {
				t.Errorf("INFO store_ok = %q after recovery, want 1", v)
			}
			f = redistest.LeafInfo(t, c, tag)
			if f["store_ok"] != int64(1) || infoInt(t, f, "runway_ids") <= 0 {
				t.Errorf("LEAF.INFO after recovery: store_ok %v runway_ids %v; want 1, > 0", f["store_ok"], f["runway_ids"])
			}
			p.Stop(syscall.SIGTERM)
			if strings.Contains(p.Log(), db.password()) {
				t.Errorf("the log shows the database password")
			}
		})
	}

	// A leaf process started while the database is down serves (errors),
	// instead of exiting into a restart loop, and recovers when the
	// database comes up.
	t.Run("DownAtStart", func(t *testing.T) {
		const tag = "outage_start"
		db.stop()
		recovered := false
		t.Cleanup(func() {
			if !recovered {
				db.start()
			}
		})
		p := startLeaf(t, t.TempDir(), outageEnv(db)...)
		c := patientClient(t, p)
		if !strings.Contains(p.Log(), "database unreachable at start") {
			t.Errorf("no warning that the database is unreachable; log:\n%s", p.Log())
		}
		for range 3 {
			_, reply, err := incrErr(c, tag)
			if err != nil || !strings.HasPrefix(reply, "TRYAGAIN ") {
				t.Fatalf("INCR with the database down since start = %v, %q; want TRYAGAIN", err, reply)
			}
		}
		waitStoreOK(t, c, "0")

		db.start()
		recovered = true
		id, _ := incrAfterRecovery(t, c, tag)
		if id != 1 {
			t.Fatalf("first INCR of a new tag = %d, want 1", id)
		}
		if got := redistest.Incr(t, c, tag); got != 2 {
			t.Fatalf("second INCR = %d, want 2", got)
		}
		if v := infoField(t, c, "leaf", "store_ok"); v != "1" {
			t.Errorf("INFO store_ok = %q after the database came up, want 1", v)
		}
		p.Stop(syscall.SIGTERM)
		// The clean stop gave the rest back: a new process goes on at 3.
		p = startLeaf(t, t.TempDir(), outageEnv(db)...)
		if got := redistest.Incr(t, patientClient(t, p), tag); got != 3 {
			t.Fatalf("INCR after a restart = %d, want 3", got)
		}
		p.Stop(syscall.SIGTERM)
		if strings.Contains(p.Log(), db.password()) {
			t.Errorf("the log shows the database password")
		}
	})
}
