package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/persist"
)

// Group commit: TakeBatch takes the ranges of many tags in one transaction,
// so that one commit (one fsync, one round of locks) serves them all. The
// statements are set-based, a fixed number whatever the number of tags:
//
//  1. the rows that requests ask to create and that are missing: a plain
//     read finds them, one INSERT creates them;
//  2. a plain read of the tags' leaf_alloc rows, then a locking read of
//     those that exist, in the order of biz_tag;
//  3. with the persistent guard, the guard rows likewise: a plain read,
//     one INSERT of the missing ones, a locking read;
//  4. the ranges are computed in Go, exactly as Take's statements would
//     give them one request after the other, repairs included;
//  5. the writes: max_id of every row, a compare-and-set on the value
//     read, and the guard.
//
// Batches never deadlock each other: every batch locks the rows it takes
// from in one pass, in the order of biz_tag; it never locks a missing key
// (InnoDB would take a gap lock, and two batches inserting into one gap
// would deadlock): a tag without a row when it is read is ErrNotFound; and
// its creates (1) commit on their own before, since rows that one batch
// inserts while another, which saw them already, locks them in its pass
// would be locked out of that order. Where the transaction holds the
// write lock from its start (SQLite: Dialect.ForUpdate ""), nothing can
// deadlock, the creates share the transaction and the plain reads are the
// locked ones.
//
// Numbers go into the statements made at run time as literals (Go's
// decimal int64s, never text from outside), tags always as placeholders:
// a placeholder in a CASE has no type the database could infer
// (PostgreSQL). Where the table's collation folds names (case- or
// accent-insensitive: "Order" and "order" are one row, Dialect.Folds), a
// batch is taken with Take's own statements, a tag at a time, in one
// transaction still; so is one whose reads answer a name not asked.

// errBatchRaced: a batch's compare-and-set missed a row it had locked: the
// database lost the transaction without a word (Galera, see
// Core.verifiedTx) and the statement ran alone. The batch is rolled back
// and run again.
var errBatchRaced = errors.New("persist: a row changed under a batch's lock")

// TakeBatch implements persist.Store.TakeBatch: at most MaxTakeBatch
// requests per transaction. Invalid requests (a bad tag, a Create step
// outside [1, MaxStep]) fail alone with ErrInvalid. When a transaction fails
// for the database's sake (ErrUnavailable), each of its requests fails with
// that error; when it fails otherwise, each request is taken again alone, so
// a failure that one tag causes stays that tag's.
func (c *Core) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	res := make([]persist.TakeResult, len(reqs))
	todo := make([]int, 0, len(reqs))
	for i, q := range reqs {
		if err := checkRequest(q); err != nil {
			res[i].Err = fmt.Errorf("take %q: %w", q.Tag, err)
			continue
		}
		todo = append(todo, i)
	}
	for len(todo) > 0 {
		n := min(len(todo), persist.MaxTakeBatch)
		c.takeChunk(ctx, reqs, todo[:n], res)
		todo = todo[n:]
	}
	return res
}

func checkRequest(q persist.TakeRequest) error {
	if err := persist.CheckTag(q.Tag); err != nil {
		return err
	}
	if q.Create != 0 {
		return persist.CheckStep(q.Create)
	}
	return nil
}

// batchTag is one tag of a batch: its requests, and its rows as read by
// the current attempt.
type batchTag struct {
	name    string
	reqs    []int // positions in the batch's out, in the order asked
	creator int   // position of the first request that asks to create the row; -1: none
	created bool  // this batch inserted the row

	// Set by each attempt:
	present bool  // the row was there, locked, under this very name
	found   bool  // and it goes through the set-based statements
	maxID   int64 // as read
	step    int64
	high    int64 // leaf_guard.high; noGuard when there is none or no guard
	taken   bool  // at least one request got a range
	end     int64 // max_id (and guard) after the batch, when taken
}

// takeChunk takes the requests reqs[i], i in idx, in one transaction and
// puts their results in res.
func (c *Core) takeChunk(ctx context.Context, reqs []persist.TakeRequest, idx []int, res []persist.TakeResult) {
	tags, creates := groupTags(reqs, idx)
	out := make([]persist.TakeResult, len(idx))
	op, tag := "take", reqs[idx[0]].Tag
	if len(idx) > 1 {
		op, tag = fmt.Sprintf("take of %d tags", len(idx)), ""
	}
	// Where transactions may deadlock, the creates commit first, on their
	// own (see above). Where names fold, eachIn creates.
	creates = creates && !c.folds
	apart := creates && c.d.ForUpdate != ""
	attempts := 0
	err := c.write(ctx, op, tag, func(ctx context.Context) error {
		attempts++
		clear(out)
		if apart {
			if err := c.inTx(ctx, func(tx *sql.Tx) error { return c.createIn(ctx, tx, reqs, idx, tags) }); err != nil {
				return err
			}
		}
		return c.inTxWrote(ctx, func(tx *sql.Tx) error {
			if creates && !apart {
				if err := c.createIn(ctx, tx, reqs, idx, tags); err != nil {
					return err
				}
			}
			return c.batchIn(ctx, tx, reqs, idx, tags, out)
		}, func() bool {
			// A request that got a range changed its row.
			for _, r := range out {
				if r.Err == nil {
					return true
				}
			}
			return false
		})
	})
	switch {
	case err == nil:
		for _, bt := range tags {
			if bt.created {
				out[bt.creator].Created = true
			}
		}
		for k, i := range idx {
			res[i] = out[k]
			if out[k].Err != nil {
				res[i].Err = fmt.Errorf("take %q: %w", reqs[i].Tag, out[k].Err)
				continue
			}
			res[i].Range.Retries = attempts - 1
		}
	case len(idx) == 1:
		res[idx[0]].Err = err // named by do
	case errors.Is(err, persist.ErrUnavailable), errors.Is(err, persist.ErrAmbiguous), errors.Is(err, persist.ErrClosed):
		// The database failed, not a tag: every request fails. An
		// ambiguous commit serves none of its ranges; the next Take reads
		// max_id anew and starts above them if they were taken.
		for _, i := range idx {
			res[i].Err = fmt.Errorf("tag %q: %w", reqs[i].Tag, err)
		}
	default:
		c.log.Debug("persist: a batch failed; taking its tags one by one", "backend", c.d.Name, "tags", len(idx), "err", err)
		for _, i := range idx {
			c.takeChunk(ctx, reqs, []int{i}, res)
		}
	}
}

// groupTags groups the requests by tag, sorted by name, and reports
// whether any asks to create its row.
func groupTags(reqs []persist.TakeRequest, idx []int) (tags []*batchTag, creates bool) {
	byName := make(map[string]*batchTag, len(idx))
	for k, i := range idx {
		name := reqs[i].Tag
		bt := byName[name]
		if bt == nil {
			bt = &batchTag{name: name, creator: -1}
			byName[name] = bt
			tags = append(tags, bt)
		}
		bt.reqs = append(bt.reqs, k)
		if bt.creator < 0 && reqs[i].Create > 0 {
			bt.creator = k
			creates = true
		}
	}
	slices.SortFunc(tags, func(a, b *batchTag) int { return strings.Compare(a.name, b.name) })
	return tags, creates
}

// createIn inserts, with one INSERT, the rows that requests ask to create
// and that are missing, and marks the tags whose row it created.
func (c *Core) createIn(ctx context.Context, tx *sql.Tx, reqs []persist.TakeRequest, idx []int, tags []*batchTag) error {
	var asked []*batchTag
	for _, bt := range tags {
		if bt.creator >= 0 && !bt.created {
			asked = append(asked, bt)
		}
	}
	if len(asked) == 0 {
		return nil
	}
	rows, err := c.readRows(ctx, tx, "leaf_alloc", "max_id, step", asked, false)
	if err != nil {
		return err
	}
	var missing []*batchTag
	var b strings.Builder
	var args []any
	b.WriteString(insertAlloc)
	for _, bt := range asked {
		if _, ok := rows[bt.name]; ok {
			continue
		}
		if len(missing) > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`(?, 1, ?, ?, CURRENT_TIMESTAMP)`)
		args = append(args, bt.name, reqs[idx[bt.creator]].Create, "")
		missing = append(missing, bt)
	}
	if len(missing) == 0 {
		return nil
	}
	b.WriteString(c.d.IgnoreDuplicate)
	n, err := affected(ctx, tx, c.rebind(b.String()), args...)
	if err != nil && c.denied(err) {
		return c.insertDenied(err)
	}
	if err != nil || n != int64(len(missing)) {
		// Fewer: another transaction created some of these rows at the
		// same moment. Which ones this INSERT created cannot be told, so
		// none is reported created (it only names them in a log).
		return err
	}
	for _, bt := range missing {
		bt.created = true
	}
	return nil
}

// batchIn is one attempt at taking the requests of tags, whose rows
// exist when asked to be created; out[k] answers reqs[idx[k]].
func (c *Core) batchIn(ctx context.Context, tx *sql.Tx, reqs []persist.TakeRequest, idx []int, tags []*batchTag, out []persist.TakeResult) error {
	for _, bt := range tags {
		bt.present, bt.found, bt.taken, bt.high = false, false, false, noGuard
	}
	if c.folds {
		return c.eachIn(ctx, tx, reqs, idx, tags, out)
	}
	ok, err := c.lockRows(ctx, tx, tags)
	if err != nil {
		return err
	}
	if !ok {
		return c.eachIn(ctx, tx, reqs, idx, tags, out)
	}
	var set, rest []*batchTag
	for _, bt := range tags {
		switch {
		case bt.found:
			set = append(set, bt)
		case bt.present:
			rest = append(rest, bt)
		default:
			// No row when it was read: missing then, which is the answer.
			for _, k := range bt.reqs {
				out[k].Err = persist.ErrNotFound
			}
		}
	}
	if c.guard && len(set) > 0 {
		var guarded []*batchTag
		for _, bt := range set {
			if bt.mayTake(reqs, idx) {
				guarded = append(guarded, bt)
			}
		}
		if ok, err = c.lockGuards(ctx, tx, guarded); err != nil {
			return err
		}
		if !ok {
			return c.eachIn(ctx, tx, reqs, idx, tags, out)
		}
	}
	for _, bt := range set {
		bt.compute(reqs, idx, out)
	}
	if err := c.writeRows(ctx, tx, set); err != nil {
		return err
	}
	return c.eachIn(ctx, tx, reqs, idx, rest, out)
}

// eachIn takes the requests of tags with Take's statements, a tag at a
// time; where names fold, it first creates the rows asked for, as Create.
func (c *Core) eachIn(ctx context.Context, tx *sql.Tx, reqs []persist.TakeRequest, idx []int, tags []*batchTag, out []persist.TakeResult) error {
	for _, bt := range tags {
		if c.folds && bt.creator >= 0 && !bt.created {
			n, err := affected(ctx, tx, c.q.insertIfAbsent, bt.name, reqs[idx[bt.creator]].Create, "")
			if err != nil && c.denied(err) {
				return c.insertDenied(err)
			}
			if err != nil {
				return err
			}
			bt.created = n == 1
		}
		for _, k := range bt.reqs {
			r, answer, err := c.takeIn(ctx, tx, bt.name, reqs[idx[k]].Size)
			if err != nil {
				return err
			}
			out[k].Range, out[k].Err = r, answer
		}
	}
	return nil
}

// lockRows reads and locks the leaf_alloc rows of tags that exist, and
// marks them present. ok is false when the database answered a row under
// a name that was not asked (its collation folds names): the tags must
// then go through eachIn.
func (c *Core) lockRows(ctx context.Context, tx *sql.Tx, tags []*batchTag) (ok bool, err error) {
	rows, err := c.readRows(ctx, tx, "leaf_alloc", "max_id, step", tags, false)
	if err != nil || !c.asked(rows, tags) {
		return false, err
	}
	if c.d.ForUpdate != "" && len(rows) > 0 {
		existing := make([]*batchTag, 0, len(rows))
		for _, bt := range tags {
			if _, ok := rows[bt.name]; ok {
				existing = append(existing, bt)
			}
		}
		// A row deleted since the plain read is missing from this one.
		if rows, err = c.readRows(ctx, tx, "leaf_alloc", "max_id, step", existing, true); err != nil || !c.asked(rows, tags) {
			return false, err
		}
	}
	for _, bt := range tags {
		bt.set(rows)
	}
	return true, nil
}

// set takes bt's row from rows, when there.
func (bt *batchTag) set(rows map[string][2]int64) {
	row, ok := rows[bt.name]
	// MinInt64 cannot be written as a literal everywhere (SQLite reads it
	// as a float): such a row, set by hand, goes through Take's statements.
	bt.present, bt.found = ok, ok && row[0] != math.MinInt64
	bt.maxID, bt.step = row[0], row[1]
}

// asked reports whether every name of rows is the name of one of tags.
func (c *Core) asked(rows map[string][2]int64, tags []*batchTag) bool {
	if len(rows) > len(tags) {
		return false
	}
	for name := range rows {
		if _, ok := slices.BinarySearchFunc(tags, name, func(bt *batchTag, name string) int {
			return strings.Compare(bt.name, name)
		}); !ok {
			return false
		}
	}
	return true
}

// readRows reads biz_tag and two integer columns, cols, of the rows of
// tags in table, by biz_tag. With lock, and a dialect whose reads lock
// (ForUpdate), the rows are locked in the order of biz_tag.
func (c *Core) readRows(ctx context.Context, tx *sql.Tx, table, cols string, tags []*batchTag, lock bool) (map[string][2]int64, error) {
	names := make([]any, len(tags))
	for i, bt := range tags {
		names[i] = bt.name
	}
	q := `SELECT biz_tag, ` + cols + ` FROM ` + table + ` WHERE biz_tag IN (` + marks(len(names)) + `)`
	if lock && c.d.ForUpdate != "" {
		q = `SELECT biz_tag, ` + cols + ` FROM ` + table + c.d.ByKey + ` WHERE biz_tag IN (` + marks(len(names)) +
			`) ORDER BY biz_tag` + c.d.ForUpdate
	}
	rows, err := tx.QueryContext(ctx, c.rebind(q), names...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string][2]int64, len(tags))
	for rows.Next() {
		var name string
		var v [2]int64
		if err := rows.Scan(&name, &v[0], &v[1]); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, rows.Err()
}

// mayTake reports whether a request of bt can get a range from its row as
// read, before the guard: the tags that need a guard row.
func (bt *batchTag) mayTake(reqs []persist.TakeRequest, idx []int) bool {
	for _, k := range bt.reqs {
		s := reqs[idx[k]].Size
		if s <= 0 {
			s = bt.step
		}
		if s > 0 && bt.maxID <= math.MaxInt64-s {
			return true
		}
	}
	return false
}

// lockGuards reads and locks the leaf_guard rows of tags, inserting the
// missing ones first (high noGuard, raised before the commit), so that the
// locking read meets existing rows only. ok is false when the rows read
// are not exactly those of tags (a folding collation, a row deleted by
// hand meanwhile).
func (c *Core) lockGuards(ctx context.Context, tx *sql.Tx, tags []*batchTag) (ok bool, err error) {
	if len(tags) == 0 {
		return true, nil
	}
	rows, err := c.readRows(ctx, tx, "leaf_guard", "high, high", tags, false)
	if err != nil || !c.asked(rows, tags) {
		return false, err
	}
	var b strings.Builder
	var args []any
	b.WriteString(insertGuard)
	for _, bt := range tags {
		if _, ok := rows[bt.name]; ok {
			continue
		}
		if len(args) > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`(?, ?)`)
		args = append(args, bt.name, int64(noGuard))
	}
	if len(args) > 0 {
		b.WriteString(c.d.IgnoreDuplicate)
		if _, err := tx.ExecContext(ctx, c.rebind(b.String()), args...); err != nil {
			return false, err
		}
	}
	if c.d.ForUpdate != "" {
		if rows, err = c.readRows(ctx, tx, "leaf_guard", "high, high", tags, true); err != nil || !c.asked(rows, tags) {
			return false, err
		}
	}
	for _, bt := range tags {
		high, ok := rows[bt.name]
		switch {
		case ok:
			bt.high = high[0]
		case c.d.ForUpdate != "":
			return false, nil // deleted by hand meanwhile
		}
	}
	return true, nil
}

// compute gives bt's requests their ranges, in the order asked, from the
// row and guard as read: what Take's statements would give, one request
// after the other.
func (bt *batchTag) compute(reqs []persist.TakeRequest, idx []int, out []persist.TakeResult) {
	cur, high := bt.maxID, bt.high
	for _, k := range bt.reqs {
		s := reqs[idx[k]].Size
		if s <= 0 {
			if bt.step <= 0 {
				out[k].Err = fmt.Errorf("%w: the row's step is %d", persist.ErrInvalid, bt.step)
				continue
			}
			s = bt.step
		}
		if cur > math.MaxInt64-s {
			out[k].Err = fmt.Errorf("%w: max_id is %d", persist.ErrOverflow, cur)
			continue
		}
		r := persist.Range{Start: cur, End: cur + s, Step: bt.step}
		if high > r.Start {
			if high > math.MaxInt64-s {
				out[k].Err = fmt.Errorf("%w: the guard is at %d, max_id at %d", persist.ErrOverflow, high, r.End)
				continue
			}
			r = persist.Range{Start: high, End: high + s, Step: bt.step, Repaired: true, Answered: cur}
		}
		out[k].Range = r
		cur, bt.end, bt.taken = r.End, r.End, true
		if high != noGuard {
			high = r.End
		}
	}
}

// writeRows moves max_id (and the guard) of the tags that took ranges,
// each row only if max_id is still what was read. Over a network that is
// one UPDATE per table, a CASE giving each row its value; in the process
// (Dialect.Local) one prepared statement per table, run per row, since a
// CASE costs a comparison per row and tag, which an embedded SQLite feels
// from a few hundred tags on, where a statement costs no round trip.
func (c *Core) writeRows(ctx context.Context, tx *sql.Tx, tags []*batchTag) error {
	var taken []*batchTag
	for _, bt := range tags {
		if bt.taken {
			taken = append(taken, bt)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	if !c.d.Local {
		return c.writeSet(ctx, tx, taken)
	}
	// giveBack is the compare-and-set of max_id that this needs.
	if err := c.eachRow(ctx, tx, c.q.giveBack, taken, func(bt *batchTag) []any {
		return []any{bt.end, bt.name, bt.maxID}
	}); err != nil || !c.guard {
		return err
	}
	return c.eachRow(ctx, tx, c.q.raiseGuard, taken, func(bt *batchTag) []any {
		return []any{bt.end, bt.name, bt.end, bt.name, bt.end}
	})
}

// writeSet is writeRows in one UPDATE per table.
func (c *Core) writeSet(ctx context.Context, tx *sql.Tx, taken []*batchTag) error {
	if err := c.moveMaxIDs(ctx, tx, taken); err != nil || !c.guard {
		return err
	}
	// As Take's raiseGuard: only ever raised, and never above max_id, so
	// that run alone (Dialect.Verify) it leaves no guard ahead of max_id.
	var b strings.Builder
	args := make([]any, 0, 3*len(taken))
	end := func(bt *batchTag) int64 { return bt.end }
	b.WriteString(`UPDATE leaf_guard` + c.d.ByKey + ` SET high = `)
	args = caseOf(&b, args, taken, end)
	b.WriteString(` WHERE biz_tag IN (` + marks(len(taken)) + `) AND high < `)
	for _, bt := range taken {
		args = append(args, bt.name)
	}
	args = caseOf(&b, args, taken, end)
	b.WriteString(` AND (SELECT a.max_id FROM leaf_alloc a WHERE a.biz_tag = leaf_guard.biz_tag) >= `)
	args = caseOf(&b, args, taken, end)
	return c.changed(ctx, tx, "leaf_guard", b.String(), args, len(taken))
}

// moveMaxIDs sets max_id of each of tags from its maxID to its end in
// one UPDATE, a compare-and-set per row, and fails unless every row
// matched.
func (c *Core) moveMaxIDs(ctx context.Context, tx *sql.Tx, tags []*batchTag) error {
	var b strings.Builder
	args := make([]any, 0, 3*len(tags))
	b.WriteString(`UPDATE leaf_alloc` + c.d.ByKey + ` SET max_id = `)
	args = caseOf(&b, args, tags, func(bt *batchTag) int64 { return bt.end })
	b.WriteString(`, update_time = CURRENT_TIMESTAMP WHERE biz_tag IN (` + marks(len(tags)) + `) AND max_id = `)
	for _, bt := range tags {
		args = append(args, bt.name)
	}
	args = caseOf(&b, args, tags, func(bt *batchTag) int64 { return bt.maxID })
	return c.changed(ctx, tx, "leaf_alloc", b.String(), args, len(tags))
}

// changed runs an UPDATE made at run time and fails unless it changed
// exactly want rows.
func (c *Core) changed(ctx context.Context, tx *sql.Tx, table, query string, args []any, want int) error {
	n, err := affected(ctx, tx, c.rebind(query), args...)
	if err != nil {
		return err
	}
	if n != int64(want) {
		return fmt.Errorf("%w: %d of %d rows of %s matched", errBatchRaced, n, want, table)
	}
	return nil
}

// caseOf writes CASE biz_tag WHEN ? THEN v ... END, v of each tag as a
// literal, and returns args with the tags appended.
func caseOf(b *strings.Builder, args []any, tags []*batchTag, v func(*batchTag) int64) []any {
	b.WriteString(`CASE biz_tag`)
	for _, bt := range tags {
		b.WriteString(` WHEN ? THEN `)
		b.WriteString(strconv.FormatInt(v(bt), 10))
		args = append(args, bt.name)
	}
	b.WriteString(` END`)
	return args
}

// eachRow runs the statement query once per tag, with args(tag), and
// fails unless each run changes exactly one row.
func (c *Core) eachRow(ctx context.Context, tx *sql.Tx, query string, tags []*batchTag, args func(*batchTag) []any) error {
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, bt := range tags {
		res, err := stmt.ExecContext(ctx, args(bt)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return cmp.Or(err, fmt.Errorf("%w: tag %q", errBatchRaced, bt.name))
		}
	}
	return nil
}

// marks is n placeholders, comma-separated.
func marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// rebind puts a statement made at run time in the dialect's placeholder
// form.
func (c *Core) rebind(q string) string {
	if c.d.Rebind == nil {
		return q
	}
	return c.d.Rebind(q)
}
