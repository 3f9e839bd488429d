package segment

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/leaf-id/leaf/persist"
)

// Tag names, and databases (Redis's SELECT n). A tag's name is what
// ValidTag accepts. Database 0 is Leaf's table as it is: a
// tag's row is named as the tag. The tag "order" of database n > 0 is
// stored as "\x1f" + n + "\x1f" + "order": a tag name holds no control
// character (ValidTag), so no stored name of one database can be the name
// of a tag of another, nor of any tag an existing Leaf database holds. The
// prefix takes its bytes from the MaxTagLen of the column, so names in
// database n may be len(prefix) bytes shorter.

// MaxTagLen is the longest tag name, in bytes (leaf_alloc.biz_tag).
const MaxTagLen = 128

// ValidTag reports whether name can be a tag: 1..MaxTagLen bytes of UTF-8
// without control characters, not ending in a space. The error wraps
// ErrBadTag.
func ValidTag(name []byte) error { return validName(string(name), MaxTagLen) }

// validTag is ValidTag for a stored name, which may also be the name of a
// tag of another database (DBName).
func validTag(name string) error {
	if _, rest, ok := cutDB(name); ok {
		return validName(rest, MaxTagLen-(len(name)-len(rest)))
	}
	return validName(name, MaxTagLen)
}

// validName checks a tag's name as its user gave it; limit is the longest
// it may be, in bytes.
func validName(name string, limit int) error {
	if len(name) == 0 {
		return fmt.Errorf("%w: empty", ErrBadTag)
	}
	if len(name) > limit {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrBadTag, len(name), limit)
	}
	if name[len(name)-1] == ' ' {
		// MySQL compares "a" and "a " as equal: two tags would share a row.
		return fmt.Errorf("%w: ends with a space", ErrBadTag)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: not UTF-8", ErrBadTag)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: control character %U", ErrBadTag, r)
		}
	}
	return nil
}

// dbSep opens and closes a database's prefix: the ASCII unit separator.
const dbSep = '\x1f'

// AppendDBName appends to dst the stored name of the tag name of database
// db: name itself for db 0. A name of database 0 that opens with the
// separator (no valid tag does) is given the prefix of "database 0", which
// no stored name has: otherwise "\x1f1\x1fa" typed in database 0 would
// reach the tag "a" of database 1.
func AppendDBName(dst []byte, db int, name []byte) []byte {
	if StoredAsIs(db, name) {
		return append(dst, name...)
	}
	dst = append(dst, dbSep)
	dst = strconv.AppendInt(dst, int64(db), 10)
	dst = append(dst, dbSep)
	return append(dst, name...)
}

// StoredAsIs reports whether the tag name of database db is stored as it
// is (AppendDBName would copy it unchanged): a name of database 0 that
// does not open with the separator.
func StoredAsIs(db int, name []byte) bool {
	return db == 0 && (len(name) == 0 || name[0] != dbSep)
}

// DBName is AppendDBName for a name given as a string.
func DBName(db int, name string) string {
	if db == 0 && (len(name) == 0 || name[0] != dbSep) { // StoredAsIs, without a copy
		return name
	}
	return string(AppendDBName(nil, db, []byte(name)))
}

// SplitDBName is the database and the tag name of a stored name.
func SplitDBName(stored string) (db int, name string) {
	if n, rest, ok := cutDB(stored); ok {
		return n, rest
	}
	return 0, stored
}

// cutDB splits a stored name of a database n > 0 into n and the tag's
// name; ok is false for a name of database 0 (or no valid name at all).
// Only the canonical prefix counts: a decimal n >= 1 without leading zeros.
func cutDB(stored string) (db int, name string, ok bool) {
	if len(stored) < 3 || stored[0] != dbSep {
		return 0, "", false
	}
	i := 1
	for i < len(stored) && i <= 10 && '0' <= stored[i] && stored[i] <= '9' {
		db = db*10 + int(stored[i]-'0')
		i++
	}
	if i == 1 || i > 10 || stored[1] == '0' || i >= len(stored) || stored[i] != dbSep {
		return 0, "", false
	}
	return db, stored[i+1:], true
}

// Exists reports whether the tag has a row, from this server's knowledge
// or else the store's, and never creates it (EXISTS). A name that cannot be
// a tag does not exist. The error wraps ErrUnavailable when the store
// cannot say.
func (a *Allocator) Exists(ctx context.Context, name string) (bool, error) {
	if a.tags.get(name) != nil {
		return true, nil
	}
	if validTag(name) != nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	mark := a.mark()
	_, err := a.store.Tag(ctx, name)
	if errors.Is(err, persist.ErrNotFound) {
		a.noteStore(ctx, nil, mark) // an answer: the store is there
		return false, nil
	}
	a.noteStore(ctx, err, mark)
	if err != nil {
		return false, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, name, err)
	}
	return true, nil
}

// CreateFloor creates the tag so that its first ID is above n, and
// reports false, changing nothing, when it has a row already (SET tag n
// NX). The row is created, then its floor raised; lookups of the name on
// this server wait for both, so none of its requests takes an ID at or
// below n. Another server that reads the new row between the two
// statements may (the same window as Floor's on a new tag).
func (a *Allocator) CreateFloor(ctx context.Context, name string, n int64) (bool, error) {
	if err := validTag(name); err != nil {
		return false, err
	}
	if n < 0 || n > MaxFloor {
		return false, fmt.Errorf("%w: floor %d out of range", ErrOverflow, n)
	}
	ad, err := a.admin()
	if err != nil {
		return false, err
	}
	if a.closed.Load() {
		return false, ErrClosed
	}
	a.mu.Lock()
	if a.tags.get(name) != nil {
		a.mu.Unlock()
		return false, nil
	}
	if c, ok := a.pending[name]; ok {
		// A lookup or another create of the name is in flight: once it
		// ends, the name is known or free again.
		a.mu.Unlock()
		select {
		case <-c.done:
			return a.CreateFloor(ctx, name, n)
		case <-ctx.Done():
			return false, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, name, ctx.Err())
		}
	}
	c := &lookupCall{done: make(chan struct{})}
	a.pending[name] = c
	a.mu.Unlock()

	created, t, err := a.createFloor(ctx, ad, name, n)

	a.mu.Lock()
	delete(a.pending, name)
	delete(a.negative, name)
	c.tag, c.err = t, nil
	if t == nil {
		c.err = errLookupAgain // the waiters look the name up themselves
	}
	a.mu.Unlock()
	close(c.done)
	return created, err
}

// createFloor is CreateFloor's part in the store; t is the tag, in the
// map, when it is known now.
func (a *Allocator) createFloor(ctx context.Context, ad persist.Admin, name string, n int64) (bool, *Tag, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	mark := a.mark()
	created, err := a.store.Create(ctx, name, a.opts.DefaultStep, "")
	if err != nil || !created {
		a.noteStore(ctx, err, mark)
		if err != nil {
			return false, nil, fmt.Errorf("create %q: %w", name, err)
		}
		return false, nil, nil
	}
	row, _, err := ad.RaiseFloor(ctx, name, n)
	a.noteStore(ctx, err, mark)
	if err != nil {
		// The row is there at max_id 1: the tag exists, and no ID of it
		// may be served before its floor is raised, which the caller may
		// retry with LEAF.FLOOR or SET. Until then this server refuses
		// ranges at or below n.
		t := a.tags.add(a.newTag(name))[0]
		t.skipTo(n)
		return true, t, fmt.Errorf("floor %q: %w", name, err)
	}
	t := a.tags.add(a.newTagOf(row))[0]
	t.skipTo(n)
	a.log.Info("tag created", "tag", name, "step", a.opts.DefaultStep, "floor", n)
	return true, t, nil
}

// Names is the stored name of every tag this server knows, in no order.
// Tags are never dropped, so a longer list holds every name of a shorter.
func (a *Allocator) Names() []string {
	tags := a.tags.all()
	out := make([]string, len(tags))
	for i, t := range tags {
		out[i] = t.name
	}
	return out
}

// NumTags is how many tags this server knows: len(Names()), cheaply.
func (a *Allocator) NumTags() int { return a.tags.len() }
