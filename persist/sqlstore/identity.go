package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// storeDDL is leaf_store's CREATE TABLE, the same in every SQL database:
// leaf's own facts about the store, a row each.
const storeDDL = `CREATE TABLE IF NOT EXISTS leaf_store (
	name VARCHAR(64) NOT NULL PRIMARY KEY,
	val VARCHAR(255) NOT NULL
)`

const readStoreID = `SELECT val FROM leaf_store WHERE name = '` + persist.StoreIDKey + `'`

// initStoreID gives the store its identity when it has none yet: it
// creates leaf_store when create is set, and inserts the row unless one
// is there (two servers starting at once keep the first one's). A store
// where neither can be done (a user who may not, a read-only open) is
// read as it is; one without the table has no identity, which is logged
// once, at info: nothing else depends on it.
func (c *Core) initStoreID(ctx context.Context, create bool) error {
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	if create && !c.readOnly {
		if err := c.createTable(ctx, storeDDL, readStoreID); err != nil && !c.denied(err) {
			return fmt.Errorf("create table leaf_store: %w", c.Wrap(err))
		}
	}
	id, err := c.readStoreID(ctx)
	switch {
	case err == nil && (id != "" || c.readOnly || c.d.IfAbsent == nil):
		c.identity = true
		return nil
	case err == nil:
		id = persist.NewStoreID()
		ins := c.rebind(`INSERT INTO leaf_store (name, val) VALUES (?, ?)` + c.d.IfAbsent("name"))
		n, err := affected(ctx, c.db, ins, persist.StoreIDKey, id)
		switch {
		case err == nil:
			c.identity = true
			if n == 1 {
				c.log.Info("persist: the store had no identity: gave it one", "backend", c.d.Name, "store_id", id)
			}
			return nil
		case c.denied(err) || (c.d.ReadOnly != nil && c.d.ReadOnly(err)):
			c.identity = true // readable: shown as it is, "" until a server may write it
			return nil
		case c.d.Retryable != nil && c.d.Retryable(err):
			// Another server wrote it at the same time (PostgreSQL under
			// SERIALIZABLE fails the second insert): read theirs.
			if again, rerr := c.readStoreID(ctx); rerr == nil && again != "" {
				c.identity = true
				return nil
			}
		}
		return fmt.Errorf("write the store's identity into leaf_store: %w", c.Wrap(err))
	case c.d.NoTable(err) || c.denied(err):
		if c.readOnly {
			return nil // a listing: no advice about the schema
		}
		c.log.Info("persist: table leaf_store is missing (or this user may not read it), so the store has no identity: "+
			"INFO and LEAF.NODES show store_id empty; create it (store.create_schema: true creates it, given the privilege) "+
			"and grant SELECT, INSERT on it to give the store one",
			"backend", c.d.Name, "sql", oneLine(storeDDL))
		return nil
	}
	return fmt.Errorf("read the store's identity from leaf_store: %w", c.Wrap(err))
}

// readStoreID reads the identity; "" when the row is missing.
func (c *Core) readStoreID(ctx context.Context) (string, error) {
	var id string
	err := c.db.QueryRowContext(ctx, readStoreID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// StoreID implements persist.Identified: the row of leaf_store, read again
// at each call, so that a store swapped under a running server (a DSN whose
// host now names another database) shows as another identity.
func (c *Core) StoreID(ctx context.Context) (string, error) {
	if !c.identity {
		return "", nil
	}
	ctx, cancel := c.Deadline(ctx)
	defer cancel()
	id, err := c.readStoreID(ctx)
	if err != nil {
		return "", fmt.Errorf("persist: read the store's identity: %w", c.Wrap(err))
	}
	return id, nil
}

var _ persist.Identified = (*Deferred)(nil)

// StoreID implements persist.Identified: the opened backend's answer. Before the
// database was opened it does not try to open it: ErrUnavailable.
func (d *Deferred) StoreID(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", persist.ErrClosed
	}
	m := d.m.Load()
	if m == nil {
		return "", fmt.Errorf("persist: %s: %w: not opened yet", d.name, persist.ErrUnavailable)
	}
	return persist.StoreID(ctx, m.Backend)
}
