package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/leaf-id/leaf/persist"
)

var _ persist.BatchGiver = (*Core)(nil)

// GiveBackBatch implements persist.BatchGiver.
func (c *Core) GiveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest) ([]bool, error) {
	return c.giveBackBatch(ctx, reqs, false, 0)
}

// GiveBackBatchAfter implements persist.BatchGiver: as GiveBackAfter, the log's
// head row locked first (Publish bumps it), then the floors published
// after seen read, then the compare-and-sets of the tags they allow.
func (c *Core) GiveBackBatchAfter(ctx context.Context, reqs []persist.GiveBackRequest, seen int64) ([]bool, error) {
	if !c.cluster {
		return nil, fmt.Errorf("give back %d tags: %w", len(reqs), persist.ErrNoCluster)
	}
	return c.giveBackBatch(ctx, reqs, true, seen)
}

func (c *Core) giveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest, fenced bool, seen int64) ([]bool, error) {
	what := fmt.Sprintf("%d tags", len(reqs))
	seenTag := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if err := persist.CheckTag(r.Tag); err != nil {
			return nil, fmt.Errorf("give back %q: %w", r.Tag, err)
		}
		if r.To < 1 || r.To >= r.From {
			return nil, fmt.Errorf("give back %q: %w: from %d to %d (want 1 <= to < from)", r.Tag, persist.ErrInvalid, r.From, r.To)
		}
		if seenTag[r.Tag] {
			return nil, fmt.Errorf("give back %q: %w: named twice in one batch", r.Tag, persist.ErrInvalid)
		}
		seenTag[r.Tag] = true
	}
	matched := make([]bool, len(reqs))
	if len(reqs) == 0 {
		return matched, nil
	}
	wrote := func() bool {
		for _, m := range matched {
			if m {
				return true
			}
		}
		return false
	}
	err := c.write(ctx, "give back", what, func(ctx context.Context) error {
		clear(matched)
		return c.inTxWrote(ctx, func(tx *sql.Tx) error {
			try := make([]bool, len(reqs))
			for i := range try {
				try[i] = true
			}
			if fenced {
				if err := c.floorsAllow(ctx, tx, reqs, seen, try); err != nil {
					return err
				}
			}
			if c.d.Local {
				return c.giveBackRows(ctx, tx, reqs, try, matched)
			}
			return c.giveBackSet(ctx, tx, reqs, try, matched)
		}, wrote)
	})
	if err != nil {
		clear(matched)
		return matched, err
	}
	return matched, nil
}

// floorsAllow clears try[i] for each request that a floor published after
// seen forbids, or all of them when the log cannot tell (see
// noFloorAfter). One query for the whole batch.
func (c *Core) floorsAllow(ctx context.Context, tx *sql.Tx, reqs []persist.GiveBackRequest, seen int64, try []bool) error {
	head, err := c.lockHead(ctx, tx)
	if err != nil || head == seen {
		return err
	}
	none := func() error {
		clear(try)
		return nil
	}
	if head < seen {
		return none() // the log went back (emptied by hand): nothing is known
	}
	var oldest int64
	if err := tx.QueryRowContext(ctx, c.rq.oldestChange).Scan(&oldest); err != nil {
		return err
	}
	if oldest == 0 || oldest > seen+1 {
		return none() // changes after seen were trimmed: one may be a floor
	}
	rows, err := tx.QueryContext(ctx, c.rq.floorsAfterAll, seen, persist.ChangeFloor)
	if err != nil {
		return err
	}
	defer rows.Close()
	floors := make(map[string]int64)
	for rows.Next() {
		var tag string
		var floor int64
		if err := rows.Scan(&tag, &floor); err != nil {
			return err
		}
		floors[tag] = floor
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, r := range reqs {
		if f, ok := floors[r.Tag]; ok && f >= r.To {
			try[i] = false
		}
	}
	return nil
}

// giveBackRows is the batch as GiveBack's statements, prepared once and
// run per tag: in the process (Dialect.Local) a statement costs no round
// trip.
func (c *Core) giveBackRows(ctx context.Context, tx *sql.Tx, reqs []persist.GiveBackRequest, try, matched []bool) error {
	give, err := tx.PrepareContext(ctx, c.q.giveBack)
	if err != nil {
		return err
	}
	defer give.Close()
	var lower *sql.Stmt
	if c.guard {
		if lower, err = tx.PrepareContext(ctx, c.q.lowerGuard); err != nil {
			return err
		}
		defer lower.Close()
	}
	for i, r := range reqs {
		if !try[i] {
			continue
		}
		res, err := give.ExecContext(ctx, r.To, r.Tag, r.From)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		// To != From, so "changed" and "matched" are the same count on
		// MySQL, which reports changed rows.
		if matched[i] = n == 1; matched[i] && lower != nil {
			if _, err := lower.ExecContext(ctx, r.To, r.Tag, r.From); err != nil {
				return err
			}
		}
	}
	return nil
}

// giveBackSet is the batch over a network: the rows read and locked in
// one statement, then one UPDATE of leaf_alloc (and one of leaf_guard)
// for the rows still at From, a CASE giving each its value.
func (c *Core) giveBackSet(ctx context.Context, tx *sql.Tx, reqs []persist.GiveBackRequest, try, matched []bool) error {
	var tags []*batchTag
	pos := make(map[string]int, len(reqs))
	for i, r := range reqs {
		if try[i] {
			tags = append(tags, &batchTag{name: r.Tag, maxID: r.From, end: r.To})
			pos[r.Tag] = i
		}
	}
	// A CASE costs a comparison per row and tag: statements of at most
	// setChunk tags, all in the one transaction.
	for len(tags) > 0 {
		n := min(len(tags), setChunk)
		if err := c.giveBackChunk(ctx, tx, tags[:n], pos, matched); err != nil {
			return err
		}
		tags = tags[n:]
	}
	return nil
}

// setChunk is how many tags one statement of giveBackSet names.
const setChunk = 500

// giveBackChunk is giveBackSet for the tags of one statement.
func (c *Core) giveBackChunk(ctx context.Context, tx *sql.Tx, tags []*batchTag, pos map[string]int, matched []bool) error {
	rows, err := c.readRows(ctx, tx, "leaf_alloc", "max_id, max_id", tags, true)
	if err != nil {
		return err
	}
	var at []*batchTag // the rows still at From: this server's ranges are the last
	for _, bt := range tags {
		if v, ok := rows[bt.name]; ok && v[0] == bt.maxID {
			at = append(at, bt)
		}
	}
	if len(at) == 0 {
		return nil
	}
	// The rows are locked: each one read at From must still be there.
	if err := c.moveMaxIDs(ctx, tx, at); err != nil {
		return err
	}
	for _, bt := range at {
		matched[pos[bt.name]] = true
	}
	if !c.guard {
		return nil
	}
	// Lowered only where it is at From, as GiveBack's lowerGuard: a guard
	// above it belongs to ranges handed out elsewhere.
	var b strings.Builder
	args := make([]any, 0, 3*len(at))
	b.WriteString(`UPDATE leaf_guard` + c.d.ByKey + ` SET high = `)
	args = caseOf(&b, args, at, func(bt *batchTag) int64 { return bt.end })
	b.WriteString(` WHERE biz_tag IN (` + marks(len(at)) + `) AND high = `)
	for _, bt := range at {
		args = append(args, bt.name)
	}
	args = caseOf(&b, args, at, func(bt *batchTag) int64 { return bt.maxID })
	_, err = tx.ExecContext(ctx, c.rebind(b.String()), args...)
	return err
}

// giveBackUnsupported answers a batch give-back of a backend without
// BatchGiver: the caller gives back tag by tag.
func giveBackUnsupported(name string) error {
	return fmt.Errorf("%s: batched give-back: %w", name, errors.ErrUnsupported)
}
