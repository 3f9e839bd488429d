package main

// Faults a running server meets in its database: the row deleted and
// re-created lower; and the database password kept out of the log whatever
// happens to the connection.

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist/storetest"
)

// TestDeletedRow: the tag's row is deleted under a running server. It
// keeps serving the IDs it reserved, then refuses (the tag is gone). The
// row is re-created with max_id = 1: every range the database hands out
// below the IDs already reserved is refused by the guard (an ERR reply, and
// guard_trips), and the first ID served again is above every earlier one.
func TestDeletedRow(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T, dir string) store
	}{
		{"SQLite", sqliteStore},
		{"MySQL", func(t *testing.T, _ string) store { return mysqlStore(t) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const tag = "deleted"
			dir := t.TempDir()
			st := tc.open(t, dir)
			env := append([]string{"LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100", "LEAF_LOG_LEVEL=info"}, st.env...)
			p := startLeaf(t, dir, env...)
			c := patientClient(t, p)

			var last int64
			for range 20 {
				last = incr(t, c, tag)
			}
			// A dedicated range far above the row's step: the row, once
			// re-created at 1, stays below the reserved IDs for many loads.
			if last, _ = c.IncrBy(context.Background(), tag, 3000).Result(); last <= 20 {
				t.Fatalf("INCRBY %s 3000 = %d", tag, last)
			}
			f := nextReady(t, c, tag)
			high := infoInt(t, f, "guard_high")

			st.exec(t, `DELETE FROM leaf_alloc WHERE biz_tag = ?`, tag)
			runway := infoInt(t, leafInfo(t, c, tag), "runway_ids")
			if runway <= 0 {
				t.Fatalf("runway_ids = %d with the next segment ready", runway)
			}
			for i := range runway {
				id, reply, err := incrErr(c, tag)
				if err != nil || reply != "" {
					t.Fatalf("reserved ID %d of %d after the DELETE: INCR = %v, %q", i+1, runway, err, reply)
				}
				if id <= last {
					t.Fatalf("INCR = %d after %d", id, last)
				}
				last = id
			}
			_, reply, err := incrErr(c, tag)
			if err != nil || !strings.HasPrefix(reply, "ERR tag '"+tag+"' was deleted from the database") {
				t.Fatalf("INCR with the reserved IDs spent and the row gone = %v, %q", err, reply)
			}
			if f := leafInfo(t, c, tag); f["vanished"] != int64(1) {
				t.Errorf("LEAF.INFO vanished = %v with the row gone, want 1", f["vanished"])
			}

			st.exec(t, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 1, 100, 'recreated')`, tag)
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
			f = leafInfo(t, c, tag)
			if infoInt(t, f, "guard_trips") < int64(guarded) || f["vanished"] != int64(0) {
				t.Errorf("LEAF.INFO guard_trips %v vanished %v; want >= %d, 0", f["guard_trips"], f["vanished"], guarded)
			}
			if v := mustInt(t, "guard_trips", infoField(t, c, "leaf", "guard_trips")); v < int64(guarded) {
				t.Errorf("INFO guard_trips = %d, want >= %d", v, guarded)
			}
			for range 150 {
				if id := incr(t, c, tag); id <= last {
					t.Fatalf("INCR = %d after %d", id, last)
				} else {
					last = id
				}
			}
			p.Stop(syscall.SIGTERM)
		})
	}
}

// TestPasswordNotLogged: the DSN's password appears nowhere in leaf's
// output (at debug level), whether the database answers, cannot be
// reached, or refuses the password.
func TestPasswordNotLogged(t *testing.T) {
	dsn := storetest.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	withPassword := func(addr, pw string) string {
		c := cfg.Clone()
		c.Addr, c.Passwd = addr, pw
		return c.FormatDSN()
	}
	const secret = "s3cret-Pa55word"

	t.Run("Reachable", func(t *testing.T) {
		p := startLeaf(t, t.TempDir(), "LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN="+dsn)
		incr(t, p.client(t), "pw")
		p.Stop(syscall.SIGTERM)
		if strings.Contains(p.Log(), cfg.Passwd) {
			t.Fatalf("the log shows the password:\n%s", p.Log())
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		p := startLeaf(t, t.TempDir(), "LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN="+withPassword("127.0.0.1:1", secret))
		if _, reply, err := incrErr(p.client(t), "pw"); err != nil || !strings.HasPrefix(reply, "TRYAGAIN ") {
			t.Errorf("INCR with the database unreachable = %v, %q; want TRYAGAIN", err, reply)
		}
		p.Stop(syscall.SIGTERM)
		if !strings.Contains(p.Log(), "127.0.0.1:1") {
			t.Errorf("the log does not say which database is unreachable:\n%s", p.Log())
		}
		if strings.Contains(p.Log(), secret) {
			t.Fatalf("the log shows the password:\n%s", p.Log())
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		// A refused password is a mistake no wait fixes: leaf exits.
		cmd := exec.Command(leafBin)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"LEAF_SERVER_ADDR=127.0.0.1:0", "LEAF_LOG_LEVEL=debug",
			"LEAF_STORE_DRIVER=mysql", "LEAF_STORE_DSN=" + withPassword(cfg.Addr, secret)}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Access denied") {
			t.Errorf("leaf with a wrong password: %v, want exit 1 saying access denied\n%s", err, out)
		}
		if strings.Contains(string(out), secret) {
			t.Fatalf("the output shows the password:\n%s", out)
		}
	})
}
