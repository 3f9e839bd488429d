package e2e

// Faults a running server meets in its database: the row deleted and
// re-created lower; and the database password kept out of the log whatever
// happens to the connection.

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// TestDeletedRow: the tag's row (etcd: its key) is deleted under a running server. It
// keeps serving the IDs it reserved, then refuses (the tag is gone). The
// row is re-created with max_id = 1:
//
//   - with the persistent guard (leaf_guard, created with the schema), the
//     database itself answers above every range handed out (guard_repairs):
//     the running server serves on, strictly increasing, without a refusal;
//     and a server started afresh after the row was deleted and re-created
//     once more, which cannot know from memory what was served, hands out
//     only IDs above everything served before;
//   - without leaf_guard (an existing Leaf database, store.create_schema
//     off), the running server's in-memory guard refuses every range below
//     the IDs it reserved (an ERR reply, and guard_trips), and the first ID
//     served again is above every earlier one.
func TestDeletedRow(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name string
		open func(t *testing.T, dir string) store
		// leafDDL is Leaf's CREATE TABLE in the backend's dialect; ""
		// where the guard cannot be missing.
		leafDDL string
	}{
		{"SQLite", sqliteStore, `CREATE TABLE leaf_alloc (
		  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
		  max_id      BIGINT       NOT NULL DEFAULT 1,
		  step        INT          NOT NULL,
		  description VARCHAR(256) DEFAULT NULL,
		  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
		  PRIMARY KEY (biz_tag))`},
		{"MySQL", func(t *testing.T, _ string) store { return mysqlStore(t) }, `CREATE TABLE leaf_alloc (
		  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
		  max_id      BIGINT       NOT NULL DEFAULT 1,
		  step        INT          NOT NULL,
		  description VARCHAR(256) DEFAULT NULL,
		  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
		  PRIMARY KEY (biz_tag))`},
		{"PostgreSQL", func(t *testing.T, _ string) store { return postgresStore(t) }, `CREATE TABLE leaf_alloc (
		  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
		  max_id      BIGINT       NOT NULL DEFAULT 1,
		  step        INTEGER      NOT NULL,
		  description VARCHAR(256) DEFAULT NULL,
		  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
		  PRIMARY KEY (biz_tag))`},
		{"Etcd", func(t *testing.T, _ string) store { return etcdStore(t) }, ""},
	}
	variants := []struct {
		name       string
		guardTable bool
	}{
		{"Guard", true},
		{"NoGuardTable", false},
	}
	for _, be := range backends {
		for _, v := range variants {
			if !v.guardTable && be.leafDDL == "" {
				continue
			}
			t.Run(be.name+"/"+v.name, func(t *testing.T) {
				t.Parallel() // a store of its own
				const tag = "deleted"
				dir := t.TempDir()
				st := be.open(t, dir)
				// Segments of 100, each a load: on a busy machine one may
				// take longer than the 2 s default load_timeout.
				env := append([]string{"LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100", "LEAF_SEGMENT_LOAD_TIMEOUT=1m",
					"LEAF_LOG_LEVEL=info"}, st.env...)
				if !v.guardTable {
					// A Leaf database where leaf may not create tables.
					st.exec(t, be.leafDDL)
					env = append(env, "LEAF_STORE_CREATE_SCHEMA=false")
				}
				p := startLeaf(t, dir, env...)
				if warned := strings.Contains(p.Log(), "leaf_guard is missing"); warned == v.guardTable {
					t.Errorf("warning about the missing leaf_guard: %v, want %v\n%s", warned, !v.guardTable, p.Log())
				}
				c := patientClient(t, p)
				last, high := deleteUnderServer(t, st, c, tag)

				st.raw.Insert(t, tag, 1, 100, "recreated")
				if v.guardTable {
					last = servesAboveWithoutRefusal(t, c, tag, last, high)
				} else {
					last = servesAboveAfterRefusals(t, c, tag, last, high)
				}
				last = incrRising(t, c, tag, "ID after the repair", last, 150)
				p.Stop(syscall.SIGTERM)
				if !v.guardTable {
					return
				}

				// Deleted and re-created once more, with no server up: a
				// new server has nothing in memory; the database answers
				// above every ID served before.
				st.raw.Delete(t, tag)
				st.raw.Insert(t, tag, 1, 100, "recreated")
				p2 := startLeaf(t, dir, env...)
				c2 := patientClient(t, p2)
				first, prev := int64(0), last
				for range 150 {
					id := redistest.Incr(t, c2, tag)
					if id <= last {
						t.Fatalf("INCR on a server started after the row was re-created = %d; IDs up to %d were served", id, last)
					}
					if first == 0 {
						first = id
					}
					last = id
				}
				t.Logf("the new server's first ID: %d (the last one served before the restart: %d)", first, prev)
				f := redistest.LeafInfo(t, c2, tag)
				if infoInt(t, f, "guard_repairs") < 1 || infoInt(t, f, "guard_trips") != 0 {
					t.Errorf("new server: LEAF.INFO guard_repairs %v guard_trips %v; want >= 1, 0", f["guard_repairs"], f["guard_trips"])
				}
				if !strings.Contains(p2.Log(), "the persistent guard moved it above them") {
					t.Errorf("new server: no warning about the repaired range:\n%s", p2.Log())
				}
				p2.Stop(syscall.SIGTERM)
			})
		}
	}
}

// deleteUnderServer serves tag through c, with a dedicated range far above
// the step (so a row re-created at 1 stays below the reserved IDs for many
// loads), deletes the row, serves the IDs the server still holds, and
// checks that the next INCR is refused because the tag is gone. It returns
// the last ID served and guard_high, the end of the IDs reserved.
func deleteUnderServer(t *testing.T, st store, c *redis.Client, tag string) (last, high int64) {
	t.Helper()
	for range 20 {
		last = redistest.Incr(t, c, tag)
	}
	if last, _ = c.IncrBy(context.Background(), tag, 3000).Result(); last <= 20 {
		t.Fatalf("INCRBY %s 3000 = %d", tag, last)
	}
	high = infoInt(t, nextReady(t, c, tag), "guard_high")

	st.raw.Delete(t, tag)
	runway := infoInt(t, redistest.LeafInfo(t, c, tag), "runway_ids")
	if runway <= 0 {
		t.Fatalf("runway_ids = %d with the next segment ready", runway)
	}
	last = incrRising(t, c, tag, "reserved ID after the DELETE", last, runway)
	_, reply, err := incrErr(c, tag)
	if err != nil || !strings.HasPrefix(reply, "ERR tag '"+tag+"' was deleted from the database") {
		t.Fatalf("INCR with the reserved IDs spent and the row gone = %v, %q", err, reply)
	}
	if f := redistest.LeafInfo(t, c, tag); f["vanished"] != int64(1) {
		t.Errorf("LEAF.INFO vanished = %v with the row gone, want 1", f["vanished"])
	}
	return last, high
}

// servesAboveWithoutRefusal: with leaf_guard, the row re-created at 1 is
// repaired by the database on the first load, so the running server never
// refuses a range: the first ID is at or above high and above last, the
// repair is counted, and the in-memory guard never trips. It returns the
// ID served.
func servesAboveWithoutRefusal(t *testing.T, c *redis.Client, tag string, last, high int64) int64 {
	t.Helper()
	for retries := 0; ; retries++ {
		id, reply, err := incrErr(c, tag)
		if err != nil {
			t.Fatal(err)
		}
		if reply == "" {
			if id < high || id <= last {
				t.Fatalf("INCR after the row came back at max_id = 1 gave %d; IDs up to %d are reserved, %d served", id, high-1, last)
			}
			last = id
			break
		}
		// A load that ran before the INSERT may still answer "deleted"
		// once; nothing else, and never the in-memory guard's refusal.
		if !strings.HasPrefix(reply, "ERR tag '"+tag+"' was deleted") || retries == 3 {
			t.Fatalf("INCR after the row came back: %q (after %d retries)", reply, retries)
		}
	}
	f := redistest.LeafInfo(t, c, tag)
	if infoInt(t, f, "guard_repairs") < 1 || infoInt(t, f, "guard_trips") != 0 || f["vanished"] != int64(0) {
		t.Errorf("LEAF.INFO guard_repairs %v guard_trips %v vanished %v; want >= 1, 0, 0", f["guard_repairs"], f["guard_trips"], f["vanished"])
	}
	if v := mustInt(t, "guard_repairs", infoField(t, c, "leaf", "guard_repairs")); v < 1 {
		t.Errorf("INFO guard_repairs = %d, want >= 1", v)
	}
	if v := mustInt(t, "guard_trips", infoField(t, c, "leaf", "guard_trips")); v != 0 {
		t.Errorf("INFO guard_trips = %d, want 0", v)
	}
	return last
}

// servesAboveAfterRefusals: without leaf_guard, the running server's
// in-memory guard refuses every range below the IDs it reserved, each
// refused load moving max_id up, until the database answers above them. It
// returns the first ID served again.
func servesAboveAfterRefusals(t *testing.T, c *redis.Client, tag string, last, high int64) int64 {
	t.Helper()
	guarded := 0
	for {
		id, reply, err := incrErr(c, tag)
		if err != nil {
			t.Fatal(err)
		}
		if reply == "" {
			if id < high || id <= last {
				t.Fatalf("INCR after the row came back at max_id = 1 gave %d; IDs up to %d are reserved, %d served", id, high-1, last)
			}
			last = id
			break
		}
		switch {
		case strings.HasPrefix(reply, "ERR tag '"+tag+"': the database answered a range below IDs already reserved"):
			guarded++
		case strings.HasPrefix(reply, "ERR tag '"+tag+"' was deleted"):
			// A retry that ran before the INSERT.
		default:
			t.Fatalf("INCR after the row came back: %q", reply)
		}
		if guarded > int(high/100)+5 {
			t.Fatalf("still refused after %d loads of 100 from 1; guard at %d", guarded, high)
		}
	}
	if guarded == 0 {
		t.Errorf("no INCR was refused by the guard")
	}
	f := redistest.LeafInfo(t, c, tag)
	if infoInt(t, f, "guard_trips") < int64(guarded) || infoInt(t, f, "guard_repairs") != 0 || f["vanished"] != int64(0) {
		t.Errorf("LEAF.INFO guard_trips %v guard_repairs %v vanished %v; want >= %d, 0, 0", f["guard_trips"], f["guard_repairs"], f["vanished"], guarded)
	}
	if v := mustInt(t, "guard_trips", infoField(t, c, "leaf", "guard_trips")); v < int64(guarded) {
		t.Errorf("INFO guard_trips = %d, want >= %d", v, guarded)
	}
	return last
}

// TestPasswordNotLogged: the DSN's password appears nowhere in leaf's
// output (at debug level), whether the database answers, cannot be
// reached, or refuses the password; where the DSN is named, it is in
// leaf's one redacted form (REDACTED, never a driver's own mask).
func TestPasswordNotLogged(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pa55word"
	backends := []struct {
		name, driver string
		dsn          func(t *testing.T) (dsn, password, addr string)
		withPassword func(t *testing.T, dsn, addr, pw string) string
		denied       string // the database's refusal of a wrong password
	}{
		{"MySQL", "mysql", func(t *testing.T) (string, string, string) {
			dsn := mysqltest.DSN(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return dsn, cfg.Passwd, cfg.Addr
		}, func(t *testing.T, dsn, addr, pw string) string {
			c, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			c.Addr, c.Passwd = addr, pw
			return c.FormatDSN()
		}, "Access denied"},
		{"PostgreSQL", "postgres", func(t *testing.T) (string, string, string) {
			dsn := postgrestest.DSN(t)
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			pw, _ := u.User.Password()
			return dsn, pw, u.Host
		}, func(t *testing.T, dsn, addr, pw string) string {
			return postgrestest.WithUser(t, postgrestest.WithAddr(t, dsn, addr), "leaf", pw)
		}, "password authentication failed"},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel() // a database of its own
			dsn, password, addr := be.dsn(t)
			env := func(dsn string) []string { return []string{"LEAF_STORE_DRIVER=" + be.driver, "LEAF_STORE_DSN=" + dsn} }
			t.Run("Reachable", func(t *testing.T) {
				p := startLeaf(t, t.TempDir(), env(dsn)...)
				redistest.Incr(t, p.client(t), "pw")
				p.Stop(syscall.SIGTERM)
				if leaksPassword(p.Log(), password) {
					t.Fatalf("the log shows the password, or a mask other than REDACTED:\n%s", p.Log())
				}
			})
			t.Run("Unreachable", func(t *testing.T) {
				p := startLeaf(t, t.TempDir(), env(be.withPassword(t, dsn, "127.0.0.1:1", secret))...)
				if _, reply, err := incrErr(p.client(t), "pw"); err != nil || !strings.HasPrefix(reply, "TRYAGAIN ") {
					t.Errorf("INCR with the database unreachable = %v, %q; want TRYAGAIN", err, reply)
				}
				p.Stop(syscall.SIGTERM)
				if !strings.Contains(p.Log(), "127.0.0.1:1") {
					t.Errorf("the log does not say which database is unreachable:\n%s", p.Log())
				}
				if leaksPassword(p.Log(), secret) {
					t.Fatalf("the log shows the password, or a mask other than REDACTED:\n%s", p.Log())
				}
			})
			t.Run("WrongPassword", func(t *testing.T) {
				// A refused password is a mistake no wait fixes: leaf exits.
				cmd := exec.Command(leafBin)
				cmd.Dir = t.TempDir()
				cmd.Env = append([]string{"LEAF_SERVER_ADDR=127.0.0.1:0", "LEAF_LOG_LEVEL=debug"}, env(be.withPassword(t, dsn, addr, secret))...)
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), be.denied) || !strings.Contains(string(out), "REDACTED") {
					t.Errorf("leaf with a wrong password: %v, want exit 1 saying %q, naming the DSN redacted\n%s", err, be.denied, out)
				}
				if leaksPassword(string(out), secret) {
					t.Fatalf("the output shows the password, or a mask other than REDACTED:\n%s", out)
				}
			})
		})
	}
}

// leaksPassword reports whether out shows the password, or masks one
// otherwise than leaf does (pgx's xxxxx, a ***).
func leaksPassword(out, password string) bool {
	return strings.Contains(out, password) || strings.Contains(out, "xxxxx") || strings.Contains(out, "***")
}
