package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"

	"github.com/leaf-id/leaf/persist"
)

// A Take costs the round trips its database allows, with the same
// guarantees on every path:
//
//   - without the guard, where the database has UPDATE ... RETURNING: one
//     statement (takeReturning);
//   - with the guard on PostgreSQL: one statement too, the guard raised
//     in it (Dialect.OneStatementTake, takeReturning);
//   - with the guard on MySQL and MariaDB: the transaction's statements
//     sent together, then COMMIT (Dialect.Batched, takeBatched);
//   - elsewhere (SQLite, where a statement costs no round trip; Galera,
//     whose commits are checked; a guard that must repair a range): a
//     transaction of one statement per round trip (takeIn).

// Take reserves the next range of tag: max_id += size (the row's step when
// size <= 0) and reads max_id back, in one transaction. With the persistent
// guard on, a range below leaf_guard.high is repaired in the same
// transaction (see guardTake; Range.Repaired). ErrNotFound when the tag has
// no row; ErrOverflow, with the row unchanged, when max_id would pass
// math.MaxInt64; ErrInvalid for a bad tag, or when size <= 0 and the row's
// step is not positive.
func (c *Core) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	if err := persist.CheckTag(tag); err != nil {
		return persist.Range{}, fmt.Errorf("take %q: %w", tag, err)
	}
	var r persist.Range
	attempts := 0
	err := c.write(ctx, "take", tag, func(ctx context.Context) error {
		attempts++
		// answered is the start of a range the one-statement take
		// reserved below the guard: the transaction below repairs it.
		answered, below := int64(0), false
		switch {
		case c.d.Returning && (!c.guard || c.d.OneStatementTake):
			ok, err := c.takeReturning(ctx, tag, size, &r)
			if err != nil || (ok && !r.Repaired) {
				return err
			}
			answered, below = r.Answered, ok
			// No row matched (the transaction below tells why), or the
			// range is below the guard.
		case c.guard && c.d.Batched && c.d.Verify == "":
			return c.takeBatched(ctx, tag, size, &r)
		}
		// A take that returns a range changed rows; one that returns an
		// answer was rolled back.
		err := c.inTxWrote(ctx, func(tx *sql.Tx) error {
			var answer, err error
			r, answer, err = c.takeIn(ctx, tx, tag, size)
			if err != nil {
				return err
			}
			return answer
		}, func() bool { return true })
		if err == nil && below && !r.Repaired {
			// The range the statement reserved stays unused, below
			// the guard; the one taken now is above it.
			r.Repaired, r.Answered = true, answered
		}
		return err
	})
	if err != nil {
		return persist.Range{}, err
	}
	r.Retries = attempts - 1
	return r, nil
}

// takeIn is Take's work in tx. answer is the tag's own failure (no row,
// an overflow, a step that is not positive), found before anything was
// written, so tx may go on with other tags; err is any other failure
// (errRowRaced included), after which tx must be rolled back.
func (c *Core) takeIn(ctx context.Context, tx *sql.Tx, tag string, size int64) (r persist.Range, answer, err error) {
	var n int64
	if size > 0 {
		n, err = affected(ctx, tx, c.q.takeSize, size, tag, math.MaxInt64-size)
	} else {
		n, err = affected(ctx, tx, c.q.takeStep, tag)
	}
	if err != nil {
		return persist.Range{}, nil, err
	}
	guarded := c.guard && n == 1
	var maxID, step int64
	high := int64(noGuard)
	if guarded {
		maxID, step, high, err = c.readGuarded(ctx, tx, tag)
	} else {
		err = tx.QueryRowContext(ctx, c.q.readTake, tag).Scan(&maxID, &step)
	}
	r, answer, err = taken(n, size, maxID, step, err)
	if err == nil && answer == nil && guarded {
		err = c.guardTake(ctx, tx, tag, high, &r)
	}
	return r, answer, err
}

// taken is the outcome of a Take's UPDATE, which changed n rows, given
// what the read after it found (readErr from that read): the range, or
// the tag's answer, or an error after which the transaction is rolled
// back.
func taken(n, size, maxID, step int64, readErr error) (r persist.Range, answer, err error) {
	switch {
	case errors.Is(readErr, sql.ErrNoRows) && n == 0:
		return persist.Range{}, persist.ErrNotFound, nil
	case errors.Is(readErr, sql.ErrNoRows):
		return persist.Range{}, nil, persist.ErrNotFound // the row vanished under its lock: roll back
	case readErr != nil:
		return persist.Range{}, nil, readErr
	case n != 1:
		if size <= 0 && step <= 0 {
			return persist.Range{}, fmt.Errorf("%w: the row's step is %d", persist.ErrInvalid, step), nil
		}
		if s := cmp.Or(max(size, 0), step); maxID <= math.MaxInt64-s {
			// The UPDATE met no row, the read found one that fits:
			// created between the two (a re-created row, read at READ
			// COMMITTED). Run it again.
			return persist.Range{}, nil, errRowRaced
		}
		return persist.Range{}, fmt.Errorf("%w: max_id is %d", persist.ErrOverflow, maxID), nil
	}
	s := size
	if s <= 0 {
		s = step
	}
	return persist.Range{Start: maxID - s, End: maxID, Step: step}, nil, nil
}

// takeReturning is Take as one statement, UPDATE ... RETURNING, in no
// transaction of its own (Dialect.Returning): without the guard, or with
// it where the same statement raises it (Dialect.OneStatementTake). ok is
// false when no row matched: the tag is missing, or max_id would
// overflow, or the guard is above max_id (the row went below IDs handed
// out), for the transaction to repair. A range found below the guard once
// its row was locked (a row lowered during the statement) comes back with
// Repaired set and Answered its start: the statement left the guard
// alone, that range is never handed out, and the transaction takes
// another.
func (c *Core) takeReturning(ctx context.Context, tag string, size int64, r *persist.Range) (ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err // not sent: certainly not taken
	}
	guarded := c.guard
	var row *sql.Row
	switch {
	case guarded && size > 0:
		row = c.db.QueryRowContext(ctx, c.q.takeSizeGuarded, size, tag, math.MaxInt64-size, tag, size)
	case guarded:
		row = c.db.QueryRowContext(ctx, c.q.takeStepGuarded, tag, tag)
	case size > 0:
		row = c.db.QueryRowContext(ctx, c.q.takeSizeRet, size, tag, math.MaxInt64-size)
	default:
		row = c.db.QueryRowContext(ctx, c.q.takeStepRet, tag)
	}
	var maxID, step int64
	raised := sql.NullBool{Bool: true, Valid: true} // NULL: below the guard
	dest := []any{&maxID, &step}
	if guarded {
		dest = append(dest, &raised)
	}
	switch err := row.Scan(dest...); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, c.ambiguous(err)
	}
	s := size
	if s <= 0 {
		s = step
	}
	*r = persist.Range{Start: maxID - s, End: maxID, Step: step}
	if !raised.Valid {
		*r = persist.Range{Repaired: true, Answered: maxID - s}
	}
	return true, nil
}

// takeBatched is Take with the guard on a database that takes a
// transaction's statements together (Dialect.Batched), in two round
// trips: the UPDATE, the guard row made to exist and the reads back; then
// the guard raised (and the range moved up first, when it starts below
// the guard) with COMMIT. The counts of the second round trip are read
// once it committed: a compare-and-set that changed nothing leaves a
// range committed but never handed out, and the take runs again. The
// transaction is begun and ended by statements on a connection of its
// own, which is closed, not pooled, unless it ended.
func (c *Core) takeBatched(ctx context.Context, tag string, size int64, r *persist.Range) (err error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	open := true // a transaction may be open on conn
	defer func() {
		if open {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	var rows *sql.Rows
	if size > 0 {
		rows, err = conn.QueryContext(ctx, c.q.takeSizeBatch, size, tag, math.MaxInt64-size, tag, int64(noGuard), tag, tag)
	} else {
		rows, err = conn.QueryContext(ctx, c.q.takeStepBatch, tag, tag, int64(noGuard), tag, tag)
	}
	if err != nil {
		return err
	}
	var n, maxID, step, high int64
	found, err := scanSets(rows, []any{&n}, []any{&maxID, &step}, []any{&high})
	if err := cmp.Or(err, rows.Close()); err != nil {
		return err
	}
	if !found[0] || !found[2] {
		return errors.New("persist: the batched take read no count or no guard")
	}
	var readErr error
	if !found[1] {
		readErr = sql.ErrNoRows
	}
	var answer error
	*r, answer, err = taken(n, size, maxID, step, readErr)
	if err != nil || answer != nil {
		// A failed ROLLBACK leaves the connection to be closed, which
		// rolls back too.
		_, rerr := conn.ExecContext(ctx, "ROLLBACK")
		open = rerr != nil
		return cmp.Or(err, answer)
	}
	if err := ctx.Err(); err != nil {
		return err // COMMIT not sent: rolled back as the connection closes
	}
	// The second round trip: its counts, then COMMIT's answer. An error
	// before the counts is a statement's (the batch stopped there,
	// nothing committed) unless the connection was lost; after them,
	// COMMIT's.
	sets := [][]any{{&n}}
	if high > r.Start {
		var moved persist.Range
		if moved, err = movedAbove(*r, high); err != nil {
			_, rerr := conn.ExecContext(ctx, "ROLLBACK")
			open = rerr != nil
			return err
		}
		rows, err = conn.QueryContext(ctx, c.q.moveRangeBatch, moved.End, tag, r.End, moved.End, tag, moved.End, tag, moved.End)
		sets = append(sets, []any{new(int64)})
		*r = moved
	} else {
		rows, err = conn.QueryContext(ctx, c.q.raiseGuardBatch, r.End, tag, r.End, tag, r.End)
	}
	if err != nil {
		return c.ambiguous(err)
	}
	found, err = scanSets(rows, sets...)
	if err != nil {
		_ = rows.Close()
		return c.ambiguous(err)
	}
	if rows.NextResultSet() { // COMMIT returns no rows
		_ = rows.Close()
		return fmt.Errorf("%w: the batched take's COMMIT returned rows", persist.ErrAmbiguous)
	}
	if err := cmp.Or(rows.Err(), rows.Close()); err != nil {
		return c.ambiguous(err)
	}
	open = false
	for i, ok := range found {
		if !ok || *sets[i][0].(*int64) != 1 {
			return fmt.Errorf("%w: a compare-and-set of the batched take changed no row", errRowRaced)
		}
	}
	return nil
}

// scanSets reads the first row of each of rows' result sets in turn into
// sets[i], the first from where rows stands; found[i] is false where a
// result set had no row.
func scanSets(rows *sql.Rows, sets ...[]any) (found []bool, err error) {
	found = make([]bool, len(sets))
	for i, dest := range sets {
		if i > 0 && !rows.NextResultSet() {
			return nil, cmp.Or(rows.Err(), errors.New("persist: a result set of a batch is missing"))
		}
		if rows.Next() {
			found[i] = true
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
		} else if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// errRowRaced: the row appeared between a Take's UPDATE and its read, or
// a row the transaction holds did not take a compare-and-set.
var errRowRaced = errors.New("persist: the row was created during the take")

// noGuard is the high of a guard row that Take has just inserted: no range
// was handed out before. Take always raises it before it commits.
const noGuard = math.MinInt64

// readGuarded reads the tag's max_id and step back after Take's UPDATE,
// with leaf_guard.high, in tx. It runs after that UPDATE, so the row lock of
// leaf_alloc (or SQLite's write lock) is always taken first, as in
// GiveBack: the two never deadlock.
//
// The guard row is made to exist first (high = noGuard when it did not)
// and then read with a locking read (FOR UPDATE, but for SQLite, whose
// write lock was taken at BEGIN): a locking read sees the latest committed
// high on every backend, where a plain read may see an older snapshot
// (TiDB reads at the transaction's start); and as the row exists, InnoDB
// locks that row only, where a locking read of a missing key takes a gap
// lock that would make the first Takes of different tags deadlock.
func (c *Core) readGuarded(ctx context.Context, tx *sql.Tx, tag string) (maxID, step, high int64, err error) {
	if _, err = tx.ExecContext(ctx, c.q.ensureGuard, tag, int64(noGuard)); err != nil {
		return 0, 0, 0, err
	}
	err = tx.QueryRowContext(ctx, c.q.readGuarded, tag, tag).Scan(&maxID, &step, &high)
	return maxID, step, high, err
}

// guardTake applies the persistent guard to r, the range Take has just
// reserved in a transaction on e, given high, the guard it read. When r
// starts below high, the row went below IDs leaf already handed out
// (deleted and re-created, restored from a backup, lowered by hand): the
// range is moved up to [high, high+size) and max_id set to its end, in the
// same transaction (ErrOverflow, all rolled back, when that passes
// math.MaxInt64). Then the guard is raised to the range's end, which is
// above high either way.
func (c *Core) guardTake(ctx context.Context, e execer, tag string, high int64, r *persist.Range) error {
	if high > r.Start {
		moved, err := movedAbove(*r, high)
		if err != nil {
			return err
		}
		// Compare-and-set on the max_id this transaction wrote, so that
		// it never lowers a max_id when it runs alone (Dialect.Verify).
		if err := c.one(ctx, e, c.q.moveRange, moved.End, tag, r.End); err != nil {
			return err
		}
		*r = moved
	}
	// Only ever raised, and never above max_id: alone it leaves no
	// guard ahead of a max_id that was not moved.
	return c.one(ctx, e, c.q.raiseGuard, r.End, tag, r.End, tag, r.End)
}

// movedAbove is r, a range below the guard at high, moved up to start
// there, as the guard repairs it; ErrOverflow when its end would pass
// math.MaxInt64.
func movedAbove(r persist.Range, high int64) (persist.Range, error) {
	size := r.Size()
	if high > math.MaxInt64-size {
		return persist.Range{}, fmt.Errorf("%w: the guard is at %d, max_id at %d", persist.ErrOverflow, high, r.End)
	}
	return persist.Range{Start: high, End: high + size, Step: r.Step, Repaired: true, Answered: r.Start}, nil
}

// one runs a statement that, in a transaction holding the row's lock,
// changes exactly one row; errRowRaced (run again) when it changes none.
func (c *Core) one(ctx context.Context, e execer, query string, args ...any) error {
	n, err := affected(ctx, e, query, args...)
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: %d rows changed", errRowRaced, n)
	}
	return err
}
