package sqlstore

import (
	"context"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// What InitSchema runs to learn what the user may do, without changing a
// row or taking a lock: each statement matches nothing, but the database
// checks the privileges (and that it may write) all the same.
const (
	probeUpdateAlloc = `UPDATE leaf_alloc SET max_id = max_id WHERE 1 = 0`
	probeInsertAlloc = `INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time)
		SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE 1 = 0`
	probeInsertGuard = `INSERT INTO leaf_guard (biz_tag, high) SELECT biz_tag, high FROM leaf_guard WHERE 1 = 0`
	probeUpdateGuard = `UPDATE leaf_guard SET high = high WHERE 1 = 0`
)

// The consequence of a missing leaf_guard, for the warnings.
const guardOffCost = "a server that starts after a row was deleted and re-created, or after max_id was lowered by hand, " +
	"hands out IDs again that were handed out before"

// InitSchema creates the tables when asked and checks that leaf_alloc is
// there with Leaf's columns, and that the user may read and update it on
// a database that takes writes: without that leaf cannot run (ErrSchema,
// ErrDenied naming the GRANT, ErrReadOnly). Every other capability is
// optional, and one missing turns one feature off with one warning:
//
//   - creating tables (create is on, the user may not): the tables are
//     used as they are;
//   - leaf_guard (missing and not created, or the user may not read or
//     write it): the persistent guard is off; the warning shows the
//     CREATE TABLE and the GRANT;
//   - inserting into leaf_alloc: tags cannot be created; Create answers
//     ErrDenied naming the GRANT.
//
// A leaf_guard without leaf's columns is ErrSchema. Opened ReadOnly, only
// leaf_alloc is checked, and the cluster registry's tables are looked for
// (tags are then read with their mode). The registry is optional too
// (initCluster).
func (c *Core) InitSchema(ctx context.Context, create bool) error {
	created, err := c.initAlloc(ctx, create)
	if err != nil {
		return err
	}
	if err := c.initStoreID(ctx, created); err != nil {
		return err
	}
	if c.readOnly {
		return c.findCluster(ctx)
	}
	return c.initCluster(ctx, created)
}

// initAlloc is InitSchema for leaf_alloc and leaf_guard; created reports
// that schema creation is on and the user may create tables.
func (c *Core) initAlloc(ctx context.Context, create bool) (created bool, err error) {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	if err := c.db.PingContext(ctx); err != nil {
		return false, c.Wrap(err)
	}
	noCreate := "schema creation is off" // why leaf_guard is not created
	if create {
		noCreate = ""
		if err := c.createTable(ctx, c.d.CreateTable, c.q.checkAlloc); err != nil {
			if !c.denied(err) {
				return false, fmt.Errorf("create table leaf_alloc: %w", c.Wrap(err))
			}
			noCreate = "this user may not create it"
			c.log.Warn("persist: store.create_schema is on but this user may not create tables: the tables are used as they are",
				"backend", c.d.Name, "err", err)
		}
	}
	if err := c.checkTable(ctx, c.q.checkAlloc); err != nil {
		switch {
		case c.d.NoTable(err):
			return false, fmt.Errorf("%w: table leaf_alloc does not exist; enable schema creation or create it as in Leaf's DDL", persist.ErrSchema)
		case c.denied(err):
			return false, c.needed(ctx, err)
		}
		return false, err
	}
	if c.readOnly {
		return false, nil // no write will be made: nothing else to learn
	}
	c.folds = c.d.Folds != nil && c.d.Folds(ctx, c.db)
	if err := c.writable(ctx); err != nil {
		return false, err
	}
	if noCreate, err = c.initGuard(ctx, noCreate); err != nil {
		return false, err
	}
	if c.d.Denied != nil {
		if _, err := c.db.ExecContext(ctx, probeInsertAlloc); c.denied(err) {
			c.grantInsert = c.d.Grant(ctx, c.db, "INSERT", "leaf_alloc")
			c.log.Warn("persist: this user may not insert into leaf_alloc, so tags cannot be created: "+
				"auto-create and LEAF.CREATE answer an error; grant INSERT to create tags",
				"backend", c.d.Name, "grant", c.grantInsert)
		}
	}
	return noCreate == "", nil
}

// needed is the error of a user who may not read or update leaf_alloc.
func (c *Core) needed(ctx context.Context, err error) error {
	return fmt.Errorf("%w: leaf needs SELECT and UPDATE on leaf_alloc (%s): %w",
		persist.ErrDenied, c.d.Grant(ctx, c.db, "SELECT, UPDATE", "leaf_alloc"), err)
}

// writable fails unless the user may update leaf_alloc on a database that
// takes writes.
func (c *Core) writable(ctx context.Context) error {
	if c.d.ReadOnlyState != nil {
		if why := c.d.ReadOnlyState(ctx, c.db); why != "" {
			return fmt.Errorf("%w: %s; leaf takes ranges by updating leaf_alloc: point store.dsn at a writable primary", persist.ErrReadOnly, why)
		}
	}
	if c.d.Denied == nil {
		return nil
	}
	_, err := c.db.ExecContext(ctx, probeUpdateAlloc)
	switch {
	case err == nil:
		return nil
	case c.d.ReadOnly != nil && c.d.ReadOnly(err):
		return fmt.Errorf("%w: leaf takes ranges by updating leaf_alloc: point store.dsn at a writable primary: %w", persist.ErrReadOnly, err)
	case c.denied(err):
		return c.needed(ctx, err)
	}
	return c.Wrap(err)
}

// initGuard turns the persistent guard on when leaf_guard is there (made
// now unless noCreate says why not) and the user may read and write it;
// otherwise it warns, once, saying what to do. It returns why tables
// cannot be created ("" when they can).
func (c *Core) initGuard(ctx context.Context, noCreate string) (string, error) {
	ddl := c.d.GuardDDL(ctx, c.db)
	var denied error
	if noCreate == "" {
		if err := c.createTable(ctx, ddl, c.q.checkGuard); err != nil {
			if !c.denied(err) {
				return noCreate, fmt.Errorf("create table leaf_guard: %w", c.Wrap(err))
			}
			noCreate, denied = "this user may not create it", err
		}
	}
	grant := func() string { return c.d.Grant(ctx, c.db, "SELECT, INSERT, UPDATE", "leaf_guard") }
	err := c.checkTable(ctx, c.q.checkGuard)
	switch {
	case err == nil:
	case c.d.NoTable(err):
		attrs := []any{"backend", c.d.Name, "sql", oneLine(ddl)}
		if c.d.Grant != nil {
			attrs = append(attrs, "grant", grant())
		}
		if denied != nil {
			attrs = append(attrs, "err", denied)
		}
		c.log.Warn("persist: table leaf_guard is missing and "+noCreate+", so the persistent guard is off: "+guardOffCost+
			"; create the table (store.create_schema: true creates it, given the privilege) to turn the guard on", attrs...)
		return noCreate, nil
	case c.denied(err):
		// MySQL says so of a table that does not exist, too.
		c.warnGuardDenied(ddl, grant(), err)
		return noCreate, nil
	default:
		return noCreate, fmt.Errorf("table leaf_guard (want biz_tag, high): %w", err)
	}
	if c.d.Denied != nil {
		for _, probe := range []string{probeInsertGuard, probeUpdateGuard} {
			if _, err := c.db.ExecContext(ctx, probe); c.denied(err) {
				c.warnGuardDenied(ddl, grant(), err)
				return noCreate, nil
			}
		}
	}
	c.guard = true
	return noCreate, nil
}

func (c *Core) warnGuardDenied(ddl, grant string, err error) {
	c.log.Warn("persist: table leaf_guard is missing or this user may not read and write it, so the persistent guard is off: "+
		guardOffCost+"; create the table if it is missing, and grant the privileges, to turn the guard on",
		"backend", c.d.Name, "sql", oneLine(ddl), "grant", grant, "err", err)
}

// createTable runs ddl, a CREATE TABLE IF NOT EXISTS. PostgreSQL fails
// one of two such statements that run at once on a table that did not
// exist (a unique violation on its catalogue, 23505, or 42710): servers
// starting together on a fresh database. A failure after which the table
// is there (check, a SELECT of its columns, answers) is that race, and no
// error.
func (c *Core) createTable(ctx context.Context, ddl, check string) error {
	_, err := c.db.ExecContext(ctx, ddl)
	if err == nil || c.denied(err) {
		return err
	}
	if c.checkTable(ctx, check) == nil {
		return nil
	}
	return err
}

// checkTable runs query (a SELECT of the columns leaf needs, matching no
// row). A missing table, or one the user may not read, comes back as the
// driver's error (Dialect.NoTable and Denied tell them); a failure to
// reach the database wrapped with ErrUnavailable; any other error as
// ErrSchema.
func (c *Core) checkTable(ctx context.Context, query string) error {
	rows, err := c.db.QueryContext(ctx, query)
	if err != nil {
		switch {
		case c.d.NoTable(err), c.denied(err):
			return err
		case c.isUnavailable(err):
			return c.Wrap(err)
		}
		return fmt.Errorf("%w: %w", persist.ErrSchema, err)
	}
	return c.Wrap(rows.Close())
}
