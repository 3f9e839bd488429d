package segment

import "errors"

// Sentinel errors of the allocator, matched with errors.Is. Returned errors
// wrap them with the tag and the cause.
var (
	// ErrBadTag: the tag is empty, longer than MaxTagLen bytes, not UTF-8,
	// or holds a control character.
	ErrBadTag = errors.New("invalid tag name")
	// ErrBadCount: the count of an INCRBY is zero or negative.
	ErrBadCount = errors.New("count must be positive")
	// ErrTooMany: the count of an INCRBY exceeds max_batch.
	ErrTooMany = errors.New("count exceeds max_batch")
	// ErrUnknownTag: the tag has no row, and auto-create is off or the
	// store may not create it (with persist.ErrDenied).
	ErrUnknownTag = errors.New("unknown tag")
	// ErrTagGone: the tag's row was deleted and its cached IDs are spent.
	ErrTagGone = errors.New("tag row was deleted")
	// ErrUnavailable: no cached IDs and the database did not deliver a
	// segment in time.
	ErrUnavailable = errors.New("no cached IDs and the database is unavailable")
	// ErrStoreAway: a request that needed the database while it is away
	// (a call to it failed and no probe has reached it since) was refused
	// at once. Errors that wrap it wrap ErrUnavailable too.
	ErrStoreAway = errors.New("database away")
	// ErrGuard: the database answered a range below IDs already reserved
	// (max_id was lowered by hand); the range was refused.
	ErrGuard = errors.New("database max_id is below IDs already reserved")
	// ErrOverflow: the tag's IDs would pass the int64 range.
	ErrOverflow = errors.New("tag has exhausted the 64-bit ID space")
	// ErrClosed: the allocator was closed.
	ErrClosed = errors.New("allocator is closed")
)
