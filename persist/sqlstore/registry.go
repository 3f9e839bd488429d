package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// The cluster registry on the SQL core: leaf's own four tables, created
// with the others (Options.CreateSchema). Without them (a user that may
// not create tables, and nobody created them) every Registry method
// answers ErrNoCluster and the servers run alone; tags are then read
// without a mode.
//
//	leaf_node   (node_id PK, addr, version, started, renewed, expires, seen)
//	leaf_worker (worker_id PK, node_id, expires, bound)
//	leaf_change (seq PK, kind, biz_tag, arg, node_id, created)
//	leaf_mode   (biz_tag PK, mode, layout)
//
// renewed, expires and created are the database's clock (Dialect.Now), in
// Unix milliseconds; started and bound are the node's. leaf_change's row 0
// is the log's head: arg is the last sequence number given.

var _ persist.Registry = (*Core)(nil)

// nodeGC: registrations expired this long are deleted when a node joins.
const nodeGC = time.Hour

// leaseAttempts bounds LeaseWorker's retries when other nodes take the
// free ids first.
const leaseAttempts = 20

// clusterTables are the registry's tables, each with the columns leaf
// reads, for the check at open.
var clusterTables = []struct{ name, columns string }{
	{"leaf_node", "node_id, addr, version, started, renewed, expires, seen"},
	{"leaf_worker", "worker_id, node_id, expires, bound"},
	{"leaf_change", "seq, kind, biz_tag, arg, node_id, created"},
	{"leaf_mode", "biz_tag, mode, layout"},
}

// clusterStatements are the registry's statements in the dialect's form.
type clusterStatements struct {
	deleteNode, insertNode, gcNodes, renewNode, nodeExists string
	nodes                                                  string
	renewWorker, workerHolder, freeWorker                  string
	freeCandidate, lockWorker, takeWorker                  string
	maxWorker, insertWorker                                string
	head, insertChange, trimChanges, changes               string
	bumpHead, insertHead, readHead, touchHead              string
	oldestChange, floorsAfter, floorsAfterAll              string
	deleteMode, insertMode                                 string
}

func newClusterStatements(d *Dialect) clusterStatements {
	rebind := d.Rebind
	if rebind == nil {
		rebind = func(q string) string { return q }
	}
	ifAbsent := func(string) string { return "" }
	if d.IfAbsent != nil {
		ifAbsent = d.IfAbsent
	}
	return clusterStatements{
		deleteNode: rebind(`DELETE FROM leaf_node WHERE node_id = ?`),
		insertNode: rebind(`INSERT INTO leaf_node (node_id, addr, version, started, renewed, expires, seen)
			VALUES (?, ?, ?, ?, ?, ?, ?)`),
		gcNodes:    rebind(`DELETE FROM leaf_node WHERE expires < ?`),
		renewNode:  rebind(`UPDATE leaf_node SET renewed = ?, expires = ?, seen = ? WHERE node_id = ?`),
		nodeExists: rebind(`SELECT 1 FROM leaf_node WHERE node_id = ?`),
		nodes: rebind(`SELECT n.node_id, n.addr, n.version, n.started, n.renewed, n.expires, n.seen, w.worker_id
			FROM leaf_node n LEFT JOIN leaf_worker w ON w.node_id = n.node_id AND w.expires > ?
			WHERE n.expires > ? ORDER BY n.node_id, w.worker_id`),
		// The bound only grows while a node holds the id: it is what the
		// next holder starts after.
		renewWorker: rebind(`UPDATE leaf_worker SET expires = ?, bound = CASE WHEN bound < ? THEN ? ELSE bound END
			WHERE worker_id = ? AND node_id = ?`),
		workerHolder: rebind(`SELECT node_id FROM leaf_worker WHERE worker_id = ?`),
		freeWorker:   rebind(`UPDATE leaf_worker SET node_id = NULL, expires = 0, bound = ? WHERE worker_id = ? AND node_id = ?`),
		freeCandidate: rebind(`SELECT worker_id FROM leaf_worker
			WHERE worker_id < ? AND (node_id IS NULL OR expires <= ?) AND bound < ?
			ORDER BY bound, worker_id LIMIT 1`),
		lockWorker: rebind(`SELECT node_id, expires, bound FROM leaf_worker WHERE worker_id = ?` + d.ForUpdate),
		takeWorker: rebind(`UPDATE leaf_worker SET node_id = ?, expires = ?, bound = CASE WHEN bound < ? THEN ? ELSE bound END
			WHERE worker_id = ?`),
		maxWorker: rebind(`SELECT COALESCE(MAX(worker_id), -1) FROM leaf_worker WHERE worker_id < ?`),
		insertWorker: rebind(`INSERT INTO leaf_worker (worker_id, node_id, expires, bound) VALUES (?, ?, ?, ?)` +
			ifAbsent("worker_id")),
		head:     `SELECT COALESCE(MAX(seq), 0) FROM leaf_change`,
		bumpHead: `UPDATE leaf_change SET arg = arg + 1 WHERE seq = 0`,
		readHead: `SELECT arg FROM leaf_change WHERE seq = 0`,
		// A real change of the head row (created means nothing there): it
		// takes the row's lock, as Publish's bump does, and on a
		// certifying cluster (Galera) it conflicts with a Publish
		// committed elsewhere meanwhile.
		touchHead:      `UPDATE leaf_change SET created = created + 1 WHERE seq = 0`,
		oldestChange:   `SELECT COALESCE(MIN(seq), 0) FROM leaf_change WHERE seq > 0`,
		floorsAfter:    rebind(`SELECT COUNT(*) FROM leaf_change WHERE seq > ? AND kind = ? AND biz_tag = ? AND arg >= ?`),
		floorsAfterAll: rebind(`SELECT biz_tag, MAX(arg) FROM leaf_change WHERE seq > ? AND kind = ? GROUP BY biz_tag`),
		insertHead: rebind(`INSERT INTO leaf_change (seq, kind, biz_tag, arg, node_id, created) VALUES (0, 'head', '', ?, '', ?)` +
			ifAbsent("seq")),
		insertChange: rebind(`INSERT INTO leaf_change (seq, kind, biz_tag, arg, node_id, created) VALUES (?, ?, ?, ?, ?, ?)` +
			ifAbsent("seq")),
		trimChanges: rebind(`DELETE FROM leaf_change WHERE seq > 0 AND seq <= ?`),
		changes:     rebind(`SELECT seq, kind, biz_tag, arg, node_id FROM leaf_change WHERE seq > ? ORDER BY seq`),
		deleteMode:  rebind(`DELETE FROM leaf_mode WHERE biz_tag = ?`),
		insertMode:  rebind(`INSERT INTO leaf_mode (biz_tag, mode, layout) VALUES (?, ?, ?)`),
	}
}

// initCluster creates the registry's tables when asked and they are
// missing, and turns the registry on when all four are there. Missing
// tables are no error: the registry stays off, with one warning that shows
// how to create them.
func (c *Core) initCluster(ctx context.Context, create bool) error {
	if c.d.ClusterDDL == nil || c.d.Now == "" || c.d.IfAbsent == nil {
		return nil // a dialect without the registry
	}
	missing, err := c.missingClusterTables(ctx)
	if err != nil {
		return err
	}
	dctx, cancel := c.Deadline(ctx)
	defer cancel()
	ddl := c.d.ClusterDDL(dctx, c.db)
	if len(missing) > 0 && create {
		// One transaction: one sync to disk where DDL is transactional.
		if err := c.inTx(dctx, func(tx *sql.Tx) error {
			for _, stmt := range ddl {
				if _, err := tx.ExecContext(dctx, stmt); err != nil {
					return err
				}
			}
			return nil
		}); err != nil && !c.denied(err) {
			// Another server starting at the same time may have made
			// them first (PostgreSQL's CREATE ... IF NOT EXISTS then
			// fails on its catalogue's unique index).
			if again, merr := c.missingClusterTables(ctx); merr != nil || len(again) > 0 {
				return fmt.Errorf("create the cluster tables: %w", c.Wrap(err))
			}
		}
		if missing, err = c.missingClusterTables(ctx); err != nil {
			return err
		}
	}
	if len(missing) == 0 {
		missing = c.deniedClusterTables(ctx)
	}
	if len(missing) > 0 {
		var grants []string
		if c.d.Grant != nil {
			for _, tb := range missing {
				grants = append(grants, c.d.Grant(dctx, c.db, "SELECT, INSERT, UPDATE, DELETE", tb))
			}
		}
		c.log.Warn("persist: the cluster tables are missing (and not created: schema creation is off or this user may not create them) "+
			"or this user may not use them, so cluster features are off: "+
			"this server runs alone (floors and steps take effect on it at once, on other servers when their cached IDs run out), "+
			"LEAF.NODES lists nothing and Snowflake tags are refused; create the tables (store.create_schema: true creates them, "+
			"given the privilege) and grant their use to turn them on: the statements follow, one a line",
			"backend", c.d.Name, "missing", strings.Join(missing, ","))
		// One statement a line, on one line each, so each can be copied
		// as it is (a multi-line value would show as \n escapes).
		for _, stmt := range ddl {
			c.log.Warn("persist: to turn cluster features on, run", "sql", oneLine(stmt)+";")
		}
		for _, g := range grants {
			c.log.Warn("persist: to turn cluster features on, grant", "sql", oneLine(g)+";")
		}
		return nil
	}
	c.cluster = true
	return nil
}

// deniedClusterTables names the registry's tables this user may not
// change (the registry inserts, updates and deletes rows of each), probed
// with statements that match no row.
func (c *Core) deniedClusterTables(ctx context.Context) []string {
	if c.d.Denied == nil {
		return nil
	}
	var denied []string
	for _, tb := range clusterTables {
		first, _, _ := strings.Cut(tb.columns, ",")
		for _, probe := range []string{
			`INSERT INTO ` + tb.name + ` (` + tb.columns + `) SELECT ` + tb.columns + ` FROM ` + tb.name + ` WHERE 1 = 0`,
			`UPDATE ` + tb.name + ` SET ` + first + ` = ` + first + ` WHERE 1 = 0`,
			`DELETE FROM ` + tb.name + ` WHERE 1 = 0`,
		} {
			qctx, cancel := c.Deadline(ctx)
			_, err := c.db.ExecContext(qctx, probe)
			cancel()
			if c.denied(err) {
				denied = append(denied, tb.name)
				break
			}
		}
	}
	return denied
}

// findCluster turns the registry on when its tables are there, quietly:
// for a store opened read-only, which reads tags with their mode.
func (c *Core) findCluster(ctx context.Context) error {
	if c.d.ClusterDDL == nil {
		return nil
	}
	missing, err := c.missingClusterTables(ctx)
	c.cluster = err == nil && len(missing) == 0
	return nil
}

// missingClusterTables names the registry's tables that do not exist; a
// table without leaf's columns is an error.
func (c *Core) missingClusterTables(ctx context.Context) ([]string, error) {
	var missing []string
	for _, tb := range clusterTables {
		// Each check has a deadline of its own: a short query timeout
		// bounds a call, not the whole set-up.
		qctx, cancel := c.Deadline(ctx)
		err := c.checkTable(qctx, `SELECT `+tb.columns+` FROM `+tb.name+` WHERE 1 = 0`)
		cancel()
		switch {
		case err == nil:
		case c.d.NoTable(err), c.denied(err):
			// A table the user may not read is as good as missing.
			missing = append(missing, tb.name)
		default:
			return nil, fmt.Errorf("table %s (want %s): %w", tb.name, tb.columns, err)
		}
	}
	return missing, nil
}

// ClusterEnabled reports whether the registry's tables are there.
func (c *Core) ClusterEnabled() bool { return c.cluster }

// dbNow reads the database's clock, in Unix milliseconds.
func (c *Core) dbNow(ctx context.Context, q Querier) (int64, error) {
	var now int64
	err := q.QueryRowContext(ctx, c.d.Now).Scan(&now)
	return now, err
}

// clusterOp checks that the registry is on, then runs fn as write does: a
// heartbeat waits its turn with the Takes, it is not starved by them.
func (c *Core) clusterOp(ctx context.Context, op string, fn func(context.Context) error) error {
	if !c.cluster {
		return fmt.Errorf("%s: %w", op, persist.ErrNoCluster)
	}
	return c.write(ctx, op, "", fn)
}

// Join implements persist.Registry.
func (c *Core) Join(ctx context.Context, n persist.NodeInfo, ttl time.Duration) (int64, error) {
	if err := persist.CheckNode(n); err != nil {
		return 0, fmt.Errorf("join: %w", err)
	}
	var head int64
	err := c.clusterOp(ctx, "join", func(ctx context.Context) error {
		return c.inTx(ctx, func(tx *sql.Tx) error {
			now, err := c.dbNow(ctx, tx)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, c.rq.gcNodes, now-nodeGC.Milliseconds()); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, c.rq.deleteNode, n.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, c.rq.insertNode, n.ID, n.Addr, n.Version, n.Started.UnixMilli(),
				now, now+ttl.Milliseconds(), int64(0)); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, c.rq.head).Scan(&head)
		})
	})
	return head, err
}

// Renew implements persist.Registry.
func (c *Core) Renew(ctx context.Context, r persist.Renewal) error {
	workerLost := false
	err := c.clusterOp(ctx, "renew", func(ctx context.Context) error {
		workerLost = false
		return c.inTx(ctx, func(tx *sql.Tx) error {
			now, err := c.dbNow(ctx, tx)
			if err != nil {
				return err
			}
			expires := now + r.TTL.Milliseconds()
			n, err := affected(ctx, tx, c.rq.renewNode, now, expires, r.Seen, r.Node)
			if err != nil {
				return err
			}
			if n == 0 {
				// MySQL counts changed rows: 0 also for a renewal within
				// the same millisecond as the last.
				var one int
				err := tx.QueryRowContext(ctx, c.rq.nodeExists, r.Node).Scan(&one)
				if errors.Is(err, sql.ErrNoRows) {
					return persist.ErrLeaseLost
				}
				if err != nil {
					return err
				}
			}
			if r.Worker < 0 {
				return nil
			}
			n, err = affected(ctx, tx, c.rq.renewWorker, expires, r.Bound, r.Bound, r.Worker, r.Node)
			if err != nil || n == 1 {
				return err
			}
			var holder sql.NullString
			err = tx.QueryRowContext(ctx, c.rq.workerHolder, r.Worker).Scan(&holder)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			workerLost = holder.String != r.Node
			return nil
		})
	})
	if err == nil && workerLost {
		err = fmt.Errorf("renew: worker id %d: %w", r.Worker, persist.ErrWorkerLost)
	}
	return err
}

// Leave implements persist.Registry.
func (c *Core) Leave(ctx context.Context, node string, worker int, bound int64) error {
	return c.clusterOp(ctx, "leave", func(ctx context.Context) error {
		return c.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, c.rq.deleteNode, node); err != nil {
				return err
			}
			if worker < 0 {
				return nil
			}
			_, err := tx.ExecContext(ctx, c.rq.freeWorker, bound, worker, node)
			return err
		})
	})
}

// Nodes implements persist.Registry.
func (c *Core) Nodes(ctx context.Context) ([]persist.Node, error) {
	var nodes []persist.Node
	err := c.clusterOp(ctx, "nodes", func(ctx context.Context) error {
		nodes = nodes[:0]
		now, err := c.dbNow(ctx, c.db)
		if err != nil {
			return err
		}
		rows, err := c.db.QueryContext(ctx, c.rq.nodes, now, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n persist.Node
			var started, renewed, expires int64
			var worker sql.NullInt64
			if err := rows.Scan(&n.ID, &n.Addr, &n.Version, &started, &renewed, &expires, &n.Seen, &worker); err != nil {
				return err
			}
			if len(nodes) > 0 && nodes[len(nodes)-1].ID == n.ID {
				continue // a second worker row: the lowest id is shown
			}
			n.Started = time.UnixMilli(started)
			n.Age = time.Duration(now-renewed) * time.Millisecond
			n.Expires = time.Duration(expires-now) * time.Millisecond
			n.Worker = -1
			if worker.Valid {
				n.Worker = int(worker.Int64)
			}
			nodes = append(nodes, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// LeaseWorker implements persist.Registry. Each attempt is a transaction of its
// own: pick an id, lock its row and check it is still free, take it; an
// attempt that lost a race runs again.
func (c *Core) LeaseWorker(ctx context.Context, r persist.WorkerRequest) (persist.Worker, error) {
	if r.Limit <= 0 {
		return persist.Worker{}, fmt.Errorf("lease worker: %w: limit %d", persist.ErrInvalid, r.Limit)
	}
	for range leaseAttempts {
		var w persist.Worker
		var got bool
		err := c.clusterOp(ctx, "lease worker", func(ctx context.Context) error {
			got = false
			return c.inTx(ctx, func(tx *sql.Tx) error {
				var err error
				w, got, err = c.leaseWorkerTx(ctx, tx, r)
				return err
			})
		})
		if err != nil || got {
			return w, err
		}
	}
	return persist.Worker{}, fmt.Errorf("lease worker: %w: other servers kept taking the free ids first", persist.ErrUnavailable)
}

// leaseWorkerTx is one attempt of LeaseWorker; got is false when another
// node took the id first.
func (c *Core) leaseWorkerTx(ctx context.Context, tx *sql.Tx, r persist.WorkerRequest) (w persist.Worker, got bool, err error) {
	now, err := c.dbNow(ctx, tx)
	if err != nil {
		return persist.Worker{}, false, err
	}
	expires := now + r.TTL.Milliseconds()
	var id int
	// A free id whose bound has passed on the node's clock: it may issue
	// at once.
	err = tx.QueryRowContext(ctx, c.rq.freeCandidate, r.Limit, now, r.Now).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		var top int
		if err := tx.QueryRowContext(ctx, c.rq.maxWorker, r.Limit).Scan(&top); err != nil {
			return persist.Worker{}, false, err
		}
		if top+1 < r.Limit {
			n, err := affected(ctx, tx, c.rq.insertWorker, top+1, r.Node, expires, r.Bound)
			return persist.Worker{ID: top + 1}, n == 1, err
		}
		// None: the free one with the oldest bound, if any.
		err = tx.QueryRowContext(ctx, c.rq.freeCandidate, r.Limit, now, int64(math.MaxInt64)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return persist.Worker{}, false, fmt.Errorf("%w: all %d worker ids are leased to live servers", persist.ErrNoWorker, r.Limit)
		}
	}
	if err != nil {
		return persist.Worker{}, false, err
	}
	var holder sql.NullString
	var held, prev int64
	if err := tx.QueryRowContext(ctx, c.rq.lockWorker, id).Scan(&holder, &held, &prev); err != nil {
		return persist.Worker{}, false, err
	}
	if holder.Valid && held > now {
		return persist.Worker{}, false, nil // taken meanwhile
	}
	if _, err := tx.ExecContext(ctx, c.rq.takeWorker, r.Node, expires, r.Bound, r.Bound, id); err != nil {
		return persist.Worker{}, false, err
	}
	return persist.Worker{ID: id, Prev: prev}, true, nil
}

// Publish implements persist.Registry. The log's head row (seq 0) holds the last
// number: raising it locks the row until the change is committed, so the
// publishers take their turns and a number is visible only after the ones
// below it.
func (c *Core) Publish(ctx context.Context, ch persist.Change) (int64, error) {
	if err := persist.CheckTag(ch.Tag); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	var seq int64
	err := c.clusterOp(ctx, "publish", func(ctx context.Context) error {
		return c.inTx(ctx, func(tx *sql.Tx) error {
			now, err := c.dbNow(ctx, tx)
			if err != nil {
				return err
			}
			n, err := affected(ctx, tx, c.rq.bumpHead)
			if err != nil {
				return err
			}
			if n == 0 {
				// The first change, or the head row was deleted: it starts
				// at the last change still there.
				var last int64
				if err := tx.QueryRowContext(ctx, c.rq.head).Scan(&last); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, c.rq.insertHead, last, now); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, c.rq.bumpHead); err != nil {
					return err
				}
			}
			if err := tx.QueryRowContext(ctx, c.rq.readHead).Scan(&seq); err != nil {
				return err
			}
			n, err = affected(ctx, tx, c.rq.insertChange, seq, ch.Kind, ch.Tag, ch.Value, ch.Node, now)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("change %d exists already: the head row of leaf_change is behind its rows", seq)
			}
			if ch.Kind == persist.ChangeFloor && ch.Value >= 0 && ch.Value < math.MaxInt64 {
				// In effect in the store as it becomes visible (see
				// Registry.Publish); after the head's lock, as GiveBackAfter.
				if _, err := tx.ExecContext(ctx, c.q.raiseFloor, ch.Value+1, ch.Tag, ch.Value+1); err != nil {
					return err
				}
			}
			_, err = tx.ExecContext(ctx, c.rq.trimChanges, seq-persist.KeepChanges)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// GiveBackAfter implements persist.Registry: one transaction that first
// locks the log's head row (Publish bumps it), then looks for a floor
// published after seen, then gives back as GiveBack does.
func (c *Core) GiveBackAfter(ctx context.Context, tag string, from, to, seen int64) (bool, error) {
	if err := checkGiveBack(tag, from, to); err != nil {
		return false, err
	}
	if !c.cluster {
		return false, fmt.Errorf("give back %q: %w", tag, persist.ErrNoCluster)
	}
	var matched bool
	err := c.write(ctx, "give back", tag, func(ctx context.Context) error {
		matched = false
		return c.inTx(ctx, func(tx *sql.Tx) error {
			head, err := c.lockHead(ctx, tx)
			if err != nil {
				return err
			}
			if head != seen {
				ok, err := c.noFloorAfter(ctx, tx, tag, to, seen, head)
				if err != nil || !ok {
					return err
				}
			}
			matched, err = c.giveBackIn(ctx, tx, tag, from, to)
			return err
		})
	})
	return matched, err
}

// lockHead locks the log's head row in tx, creating it when missing as
// Publish does, and returns the last sequence number given.
func (c *Core) lockHead(ctx context.Context, tx *sql.Tx) (int64, error) {
	n, err := affected(ctx, tx, c.rq.touchHead)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		now, err := c.dbNow(ctx, tx)
		if err != nil {
			return 0, err
		}
		var last int64
		if err := tx.QueryRowContext(ctx, c.rq.head).Scan(&last); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, c.rq.insertHead, last, now); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, c.rq.touchHead); err != nil {
			return 0, err
		}
	}
	var head int64
	err = tx.QueryRowContext(ctx, c.rq.readHead).Scan(&head)
	return head, err
}

// noFloorAfter reports whether the changes after seen, up to head, are all
// still in the log and none is a floor of tag at or above to.
func (c *Core) noFloorAfter(ctx context.Context, tx *sql.Tx, tag string, to, seen, head int64) (bool, error) {
	if head < seen {
		return false, nil // the log went back (emptied by hand): nothing is known
	}
	var oldest int64
	if err := tx.QueryRowContext(ctx, c.rq.oldestChange).Scan(&oldest); err != nil {
		return false, err
	}
	if oldest == 0 || oldest > seen+1 {
		return false, nil // changes after seen were trimmed: one may be a floor
	}
	var floors int
	if err := tx.QueryRowContext(ctx, c.rq.floorsAfter, seen, persist.ChangeFloor, tag, to).Scan(&floors); err != nil {
		return false, err
	}
	return floors == 0, nil
}

// Changes implements persist.Registry.
func (c *Core) Changes(ctx context.Context, after int64) ([]persist.Change, int64, error) {
	var out []persist.Change
	var head int64
	err := c.clusterOp(ctx, "changes", func(ctx context.Context) error {
		out = out[:0]
		rows, err := c.db.QueryContext(ctx, c.rq.changes, after)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ch persist.Change
			if err := rows.Scan(&ch.Seq, &ch.Kind, &ch.Tag, &ch.Value, &ch.Node); err != nil {
				return err
			}
			out = append(out, ch)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Read after the changes: the head may have moved on since, never
		// back (unless the table was emptied by hand, which the node notices).
		return c.db.QueryRowContext(ctx, c.rq.head).Scan(&head)
	})
	if err != nil {
		return nil, 0, err
	}
	if len(out) > 0 {
		head = max(head, out[len(out)-1].Seq)
	}
	return out, head, nil
}

// CreateTag implements persist.Registry.
func (c *Core) CreateTag(ctx context.Context, t persist.Tag) (bool, error) {
	if t.Mode == "" {
		return c.Create(ctx, t.Name, t.Step, t.Description)
	}
	if err := persist.CheckTag(t.Name); err != nil {
		return false, fmt.Errorf("create %q: %w", t.Name, err)
	}
	if err := persist.CheckStep(t.Step); err != nil {
		return false, fmt.Errorf("create %q: %w", t.Name, err)
	}
	if err := persist.CheckDescription(t.Description); err != nil {
		return false, fmt.Errorf("create %q: %w", t.Name, err)
	}
	if len(t.Mode) > 16 || len(t.Layout) > persist.MaxLayoutLen {
		return false, fmt.Errorf("create %q: %w: mode or layout too long", t.Name, persist.ErrInvalid)
	}
	var created bool
	err := c.clusterOp(ctx, "create", func(ctx context.Context) error {
		return c.inTx(ctx, func(tx *sql.Tx) error {
			n, err := affected(ctx, tx, c.q.insertIfAbsent, t.Name, t.Step, t.Description)
			created = n == 1
			if err != nil || !created {
				return err
			}
			// A mode row left by a row deleted by hand is replaced.
			if _, err := tx.ExecContext(ctx, c.rq.deleteMode, t.Name); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, c.rq.insertMode, t.Name, t.Mode, t.Layout)
			return err
		})
	})
	return created, err
}

// ClusterDDL is the registry's CREATE TABLE IF NOT EXISTS statements, for a
// Dialect's ClusterDDL: bizTag is the type of biz_tag (leaf_mode is joined
// with leaf_alloc on it, so it must compare as leaf_alloc.biz_tag does) and
// options ends each statement (MySQL's ENGINE and character set).
func ClusterDDL(bizTag, options string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS leaf_node (
  node_id VARCHAR(64)  NOT NULL,
  addr    VARCHAR(255) NOT NULL,
  version VARCHAR(64)  NOT NULL,
  started BIGINT       NOT NULL, -- Unix ms, the node's clock
  renewed BIGINT       NOT NULL, -- Unix ms, the database's clock
  expires BIGINT       NOT NULL, -- Unix ms, the database's clock: live until then
  seen    BIGINT       NOT NULL, -- the last change (leaf_change.seq) it applied
  PRIMARY KEY (node_id)
)` + options,
		`CREATE TABLE IF NOT EXISTS leaf_worker (
  worker_id INT         NOT NULL,
  node_id   VARCHAR(64) NULL,     -- its holder; NULL: free
  expires   BIGINT      NOT NULL, -- Unix ms, the database's clock
  bound     BIGINT      NOT NULL, -- Unix ms: no ID with this worker id has a later time
  PRIMARY KEY (worker_id)
)` + options,
		`CREATE TABLE IF NOT EXISTS leaf_change (
  seq     BIGINT       NOT NULL,
  kind    VARCHAR(16)  NOT NULL, -- floor or step
  biz_tag ` + bizTag + ` NOT NULL,
  arg     BIGINT       NOT NULL,
  node_id VARCHAR(64)  NOT NULL, -- who published it
  created BIGINT       NOT NULL, -- Unix ms, the database's clock
  PRIMARY KEY (seq)
)` + options,
		`CREATE TABLE IF NOT EXISTS leaf_mode (
  biz_tag ` + bizTag + ` NOT NULL,
  mode    VARCHAR(16)  NOT NULL, -- snowflake
  layout  VARCHAR(128) NOT NULL,
  PRIMARY KEY (biz_tag)
)` + options,
	}
}

// oneLine is a SQL statement on one line: its "--" comments dropped (they
// would run to the end of the one line) and its runs of white space made
// one space. The statements it is given have no "--" inside a string.
func oneLine(stmt string) string {
	var b strings.Builder
	for line := range strings.Lines(stmt) {
		code, _, _ := strings.Cut(line, "--")
		b.WriteString(code)
		b.WriteByte(' ')
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
