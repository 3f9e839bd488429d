package e2e

// A Leaf user moving over: Leaf's own table and sample row, and the grants
// a DBA gives an application. leaf starts with any privileges that let
// Leaf itself run, and says at start what each missing one turns off.

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/postgres/postgrestest"
)

// TestLeafDatabaseLeastPrivilege: on MariaDB with Leaf's DDL and sample
// row, as in Leaf's README, and on PostgreSQL with the same in its types:
//
//   - SELECT, UPDATE on leaf_alloc only, schema creation and auto-create
//     off: leaf starts, warns that the guard is off and that tags cannot
//     be created, serves as Leaf does (first ID 1, Leaf's HTTP API 2,
//     max_id 2001, 3 after a clean stop), INFO shows guard_table:0, and
//     LEAF.CREATE answers an error naming INSERT;
//   - the same grant, auto-create on: an unknown tag is an error naming
//     INSERT (not TRYAGAIN), and the known tag serves on;
//   - SELECT, INSERT, UPDATE on the whole database, auto-create on: new
//     tags are created on first use.
func TestLeafDatabaseLeastPrivilege(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name, driver string
		// setup makes a fresh database and returns it, as its owner
		// sees it, and a function returning the DSN of a new user with
		// grants.
		setup func(t *testing.T) (store, func(grants ...string) string)
		ddl   string
	}{
		{"MySQL", "mysql", func(t *testing.T) (store, func(...string) string) {
			dsn := mysqltest.DSN(t)
			return mysqlStoreAt(t, dsn), func(grants ...string) string { return mysqltest.User(t, dsn, grants...) }
		}, mysqltest.LeafDDL},
		{"PostgreSQL", "postgres", func(t *testing.T) (store, func(...string) string) {
			dsn := postgrestest.DSN(t)
			return postgresStoreAt(t, dsn), func(grants ...string) string { return postgrestest.Role(t, dsn, grants...) }
		}, postgrestest.LeafDDL},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel() // a database of its own
			const tag = "leaf-segment-test"
			st, user := be.setup(t)
			st.exec(t, be.ddl)
			st.exec(t, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 1, 2000, 'Test leaf Segment Mode Get Id')`, tag)

			dir := t.TempDir()
			app := user("SELECT, UPDATE ON leaf_alloc")
			env := []string{"LEAF_STORE_DRIVER=" + be.driver, "LEAF_STORE_DSN=" + app,
				"LEAF_STORE_CREATE_SCHEMA=false", "LEAF_SEGMENT_AUTO_CREATE=false", "LEAF_HTTP_ADDR=127.0.0.1:0"}
			p := startLeaf(t, dir, env...)
			for _, warning := range []string{"so the persistent guard is off", "may not insert into leaf_alloc"} {
				if n := strings.Count(p.Log(), warning); n != 1 {
					t.Errorf("%d warnings saying %q at start, want 1:\n%s", n, warning, p.Log())
				}
			}
			if !strings.Contains(p.Log(), "GRANT SELECT, INSERT, UPDATE ON") || !strings.Contains(p.Log(), "GRANT INSERT ON") {
				t.Errorf("the warnings do not show the GRANTs:\n%s", p.Log())
			}
			c := patientClient(t, p)
			if id := redistest.Incr(t, c, tag); id != 1 {
				t.Fatalf("first INCR %s = %d, want 1", tag, id)
			}
			if code, body := httpGet(t, p.httpBase(t)+"/api/segment/get/"+tag); code != 200 || body != "2" {
				t.Fatalf("Leaf's API = %d %q, want 200 \"2\"", code, body)
			}
			if got := maxIDOf(t, st.db, st.rebind, tag); got != 2001 {
				t.Fatalf("max_id after the first segment = %d, want 2001", got)
			}
			if v := infoField(t, c, "leaf", "guard_table"); v != "0" {
				t.Errorf("INFO guard_table = %q, want 0", v)
			}
			err := c.Do(context.Background(), "LEAF.CREATE", "new").Err()
			var re redis.Error
			if !errors.As(err, &re) || !strings.Contains(re.Error(), "INSERT") || !strings.Contains(re.Error(), "GRANT") {
				t.Errorf("LEAF.CREATE without INSERT = %v, want an error naming INSERT and its GRANT", err)
			}
			p.Stop(syscall.SIGTERM)
			if got := maxIDOf(t, st.db, st.rebind, tag); got != 3 {
				t.Fatalf("max_id after a clean stop = %d, want 3 (the unused tail given back)", got)
			}

			// The same grant, auto-create on: an unknown tag says why it
			// cannot be made.
			p = startLeaf(t, dir, "LEAF_STORE_DRIVER="+be.driver, "LEAF_STORE_DSN="+app)
			c = patientClient(t, p)
			_, reply, err := incrErr(c, "new")
			if err != nil || !strings.HasPrefix(reply, "ERR unknown tag 'new', and the database refuses to create it: ") ||
				!strings.Contains(reply, "INSERT") || !strings.Contains(reply, "GRANT") {
				t.Errorf("INCR of a new tag without INSERT = %v, %q; want an error naming INSERT and its GRANT", err, reply)
			}
			if id := redistest.Incr(t, c, tag); id != 3 {
				t.Fatalf("INCR %s after the restart = %d, want 3", tag, id)
			}
			p.Stop(syscall.SIGTERM)

			// The whole database's DML, auto-create on: new tags are made.
			env = []string{"LEAF_STORE_DRIVER=" + be.driver, "LEAF_STORE_DSN=" + user("SELECT, INSERT, UPDATE ON *"),
				"LEAF_STORE_CREATE_SCHEMA=false"}
			p = startLeaf(t, dir, env...)
			c = patientClient(t, p)
			if id := redistest.Incr(t, c, tag); id != 4 {
				t.Fatalf("INCR %s after the restart = %d, want 4", tag, id)
			}
			if id := redistest.Incr(t, c, "created"); id != 1 {
				t.Fatalf("INCR of a new tag = %d, want 1", id)
			}
			p.Stop(syscall.SIGTERM)
		})
	}
}

// maxIDOf reads max_id of tag.
func maxIDOf(t *testing.T, db *sql.DB, rebind func(string) string, tag string) int64 {
	t.Helper()
	q := `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`
	if rebind != nil {
		q = rebind(q)
	}
	var n int64
	if err := db.QueryRowContext(context.Background(), q, tag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
