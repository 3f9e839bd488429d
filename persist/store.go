package persist

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap them with %w; callers match with errors.Is.
var (
	// ErrNotFound: no row for the tag.
	ErrNotFound = errors.New("persist: tag not found")
	// ErrInvalid: an argument the store refuses (empty tag, size <= 0, ...).
	ErrInvalid = errors.New("persist: invalid argument")
	// ErrOverflow: taking the range would push max_id past the int64 range.
	ErrOverflow = errors.New("persist: max_id would overflow")
	// ErrUnavailable: the database could not be reached or did not answer
	// in time. Other driver errors are wrapped as they come.
	ErrUnavailable = errors.New("persist: database unavailable")
	// ErrClosed: the store was closed (a store that opens its database
	// lazily answers it after Close).
	ErrClosed = errors.New("persist: store is closed")
	// ErrAmbiguous: the connection was lost after the statement that
	// commits was sent, so the database may or may not have taken the
	// range (CockroachDB says so itself: 40003). It comes with
	// ErrUnavailable. The range is never served: the next Take reads
	// max_id again and starts above it if it was taken.
	ErrAmbiguous = errors.New("persist: outcome unknown: the database may have committed")
	// ErrDenied: the database refused a statement for lack of a privilege
	// of the user; the error names the GRANT that gives it.
	ErrDenied = errors.New("persist: permission denied")
	// ErrReadOnly: the database refuses writes: a replica, a server in
	// read-only mode, or sessions whose transactions are read-only.
	ErrReadOnly = errors.New("persist: the database is read-only")
	// ErrSchema: the leaf_alloc table is missing (and
	// Options.CreateSchema is off) or lacks Leaf's columns, or a
	// leaf_guard table exists without leaf's columns.
	ErrSchema = errors.New("persist: table missing or without the columns leaf needs")
)

// Tag is one row of leaf_alloc.
type Tag struct {
	Name        string
	MaxID       int64 // end (exclusive) of the highest range handed out
	Step        int64 // the table's step: the floor of the adaptive step
	Description string
	UpdateTime  time.Time
	// Mode is "" for Leaf's segment mode, or ModeSnowflake; Layout is the
	// Snowflake layout the tag was created with. Both come from leaf's own
	// leaf_mode table, read with the row ("" without the registry).
	Mode   string
	Layout string
}

// Range is a reserved block of IDs [Start, End) and the row's step at the
// time it was taken.
type Range struct {
	Start int64 // first ID, inclusive
	End   int64 // the row's new max_id: last ID + 1
	Step  int64 // the table's step (the adaptive step's floor)
	// Repaired: the database answered a range starting at Answered, below
	// IDs leaf had already handed out (the persistent guard, leaf_guard):
	// the row was deleted and re-created, restored from a backup, or
	// max_id lowered by hand. The range was moved up to start at the
	// guard, and max_id with it, in the same transaction.
	Repaired bool
	Answered int64 // the start the database answered; 0 unless Repaired
	// Retries is how many times the transaction was rolled back by the
	// database (a serialization failure, a deadlock, a lock wait timeout)
	// and run again before it took this range.
	Retries int
}

// Size is the number of IDs in the range.
func (r Range) Size() int64 { return r.End - r.Start }

// MaxTakeBatch is the most requests one transaction of TakeBatch holds: a
// larger batch is taken in several (etcd's hold fewer tags: a transaction
// there has at most 128 operations by default, two per tag). It bounds how long a batch holds its
// rows locked, and the statements' size; the allocator's loaders hand the
// store at most this many loads at once.
const MaxTakeBatch = 256

// TakeRequest is one tag's part of a TakeBatch.
type TakeRequest struct {
	Tag  string
	Size int64 // as Take's size: <= 0 means the table's step
	// Create, when positive, first creates the tag with this step (max_id
	// 1, no description) when it has no row, as Create would, in the same
	// round trip: the first touch of a tag with auto-create. 0: a missing
	// row is ErrNotFound, as for Take.
	Create int64
}

// TakeResult is the answer to one TakeRequest: its range, or the error
// Take would have given for it.
type TakeResult struct {
	Range   Range
	Created bool // the request's Create inserted the row
	Err     error
}

// Store is the database behind the allocator. Every method takes a context
// and honours its deadline. Implementations are safe for concurrent use,
// also by several processes sharing one database.
type Store interface {
	// Take reserves the next range of the tag: max_id += size, read back,
	// in one transaction. size <= 0 means the table's step. A store with
	// the persistent guard (Guarded) never answers below the ranges it
	// handed out before: it repairs max_id instead (Range.Repaired).
	// ErrNotFound when the tag has no row.
	Take(ctx context.Context, tag string, size int64) (Range, error)
	// TakeBatch is Take for many tags in one round: result i answers
	// reqs[i], exactly as Take (after Create, when asked) would have, and
	// one request's failure (no row, an overflow, an invalid tag) is its
	// own. The store takes them in as few transactions as it can, at most
	// MaxTakeBatch requests each, so that one commit (one fsync) serves
	// them all. A tag named twice gets two disjoint ranges, in order.
	// The rows that requests ask to create are created first, so every
	// request of such a tag is served. When the database fails, every
	// request of that transaction fails.
	TakeBatch(ctx context.Context, reqs []TakeRequest) []TakeResult
	// Tags lists every row.
	Tags(ctx context.Context) ([]Tag, error)
	// Tag reads one row; ErrNotFound when missing.
	Tag(ctx context.Context, name string) (Tag, error)
	// Create inserts a tag with max_id = 1 and the given step. It reports
	// false, and no error, when the tag already exists.
	Create(ctx context.Context, name string, step int64, description string) (bool, error)
	// GiveBack lowers max_id from `from` to `to` only if max_id is still
	// `from` (compare-and-set), so it never lowers a range another server
	// took, and the persistent guard with it when that is at `from`. It
	// reports whether the row matched.
	GiveBack(ctx context.Context, tag string, from, to int64) (bool, error)
	// Close releases the database handle.
	Close() error
}

// Backend is what every backend implements: the allocator's Store, the
// operator's Admin, and Guarded; the SQL backends through sqlstore.Core.
type Backend interface {
	Store
	Admin
	Guarded
}

// Guarded is implemented by the stores that keep the persistent guard: a
// second table, leaf_guard, holding per tag the end of the highest range
// leaf handed out, so that Take never answers below it, even to a server
// that never held the tag (see Range.Repaired). Leaf's own table stays
// unchanged; servers that do not know leaf_guard simply ignore it.
type Guarded interface {
	// GuardEnabled reports whether the guard is on: leaf_guard existed or
	// was created when the store was opened.
	GuardEnabled() bool
}

// Admin holds the operator's changes to a row. It is kept apart from Store
// so the allocator's contract stays small; every backend implements both.
type Admin interface {
	// SetStep changes the table's step. ErrNotFound when missing;
	// ErrInvalid when step <= 0.
	SetStep(ctx context.Context, tag string, step int64) error
	// RaiseFloor makes every later ID greater than floor: it sets
	// max_id = floor+1 when max_id is lower, and never lowers it. It
	// returns the row after the change and whether max_id moved.
	RaiseFloor(ctx context.Context, tag string, floor int64) (Tag, bool, error)
}
