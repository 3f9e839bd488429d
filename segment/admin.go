package segment

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// ErrNotSupported: the store does not implement persist.Admin.
var ErrNotSupported = errors.New("the store does not support administration")

// ErrExists: Create of a tag that already has a row.
var ErrExists = errors.New("tag already exists")

// ErrWouldLower: a floor below an ID this server already handed out. leaf
// never goes back, since that would hand out IDs again.
var ErrWouldLower = errors.New("floor is below IDs already handed out")

func (a *Allocator) admin() (persist.Admin, error) {
	ad, ok := a.store.(persist.Admin)
	if !ok {
		return nil, ErrNotSupported
	}
	return ad, nil
}

// Create adds a tag with the given step (DefaultStep when step <= 0) and
// description. ErrExists when the row is already there.
func (a *Allocator) Create(ctx context.Context, name string, step int64, desc string) error {
	if err := validTag(name); err != nil {
		return err
	}
	if step <= 0 {
		step = a.opts.DefaultStep
	}
	release, err := a.reserveTag(name)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	created, err := a.store.Create(ctx, name, step, desc)
	if err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	if !created {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	a.forgetUnknown(name)
	a.tags.add(a.newTag(name))
	a.noteCreated("tag", name, "step", step)
	return nil
}

// SetStep changes the table's step of a tag: the floor of its adaptive
// step, effective from the next load.
func (a *Allocator) SetStep(ctx context.Context, name string, step int64) error {
	if err := validTag(name); err != nil {
		return err
	}
	ad, err := a.admin()
	if err != nil {
		return err
	}
	if t := a.tags.get(name); t != nil && t.gen != nil {
		return t.modeError("a step")
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	if err := ad.SetStep(ctx, name, step); err != nil {
		if errors.Is(err, persist.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrUnknownTag, name)
		}
		return fmt.Errorf("set step %q: %w", name, err)
	}
	if t := a.tags.get(name); t != nil {
		t.mu.Lock()
		t.setStepLocked(step)
		t.mu.Unlock()
	}
	a.log.Info("tag step changed", "tag", name, "step", step)
	return nil
}

// Floor makes every later ID of the tag greater than n: it raises max_id to
// at least n+1 in the database (creating the tag with the default step when
// it has no row: the caller asked for it explicitly) and skips this
// server's cached IDs at or below n. It never goes back: when this server
// has already handed out an ID above n it returns ErrWouldLower and changes
// nothing. It returns the highest ID reserved in the database before the
// next range (max_id - 1), which is at least n.
//
// Other servers sharing the database keep serving their cached segments
// until those run out; raise floors before traffic moves, or restart them.
func (a *Allocator) Floor(ctx context.Context, name string, n int64) (int64, error) {
	if err := validTag(name); err != nil {
		return 0, err
	}
	if n < 0 || n > MaxFloor {
		return 0, fmt.Errorf("%w: floor %d out of range", ErrOverflow, n)
	}
	ad, err := a.admin()
	if err != nil {
		return 0, err
	}
	if t := a.tags.get(name); t != nil && t.gen != nil {
		return 0, t.modeError("a floor")
	}
	if last, ok := a.LastIssued(name); ok && last > n {
		return 0, fmt.Errorf("%w: tag %q: this server already handed out %d; a floor of %d would go back",
			ErrWouldLower, name, last, n)
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	row, moved, err := ad.RaiseFloor(ctx, name, n)
	if errors.Is(err, persist.ErrNotFound) {
		release, refused := a.reserveTag(name)
		if refused != nil {
			return 0, refused
		}
		defer release()
		if _, err = a.store.Create(ctx, name, a.opts.DefaultStep, ""); err == nil {
			a.forgetUnknown(name)
			a.noteCreated("tag", name, "step", a.opts.DefaultStep)
			row, moved, err = ad.RaiseFloor(ctx, name, n)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("floor %q: %w", name, err)
	}
	t := a.tags.get(name)
	if t == nil {
		t = a.tags.add(a.newTagOf(row))[0]
	}
	if t.gen != nil {
		return 0, t.modeError("a floor")
	}
	t.skipTo(n)
	a.log.Info("tag floor raised", "tag", name, "floor", n, "max_id", row.MaxID, "moved", moved)
	return row.MaxID - 1, nil
}

// skipTo makes this server's cached segments hand out only IDs above n, and
// refuses database ranges at or below it from now on.
func (t *Tag) skipTo(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range []*segment{t.cur.Load(), t.next} {
		if s == nil || s == t.a.empty {
			continue
		}
		t.skipped += s.skip(n)
	}
	if t.next != nil && t.next.last <= n {
		t.next = nil
	}
	t.floor = max(t.floor, n)
	t.high = max(t.high, n+1)
	if t.init && t.next == nil && t.inflight == nil {
		// The jump may have passed the prefetch point.
		t.startLoadLocked()
	}
}

// LastIssued is the highest ID this server handed out for the tag, and
// false when it has handed out none. IDs skipped by a floor were not handed
// out: after IDs up to 501 and a floor of 5000, it is 501.
func (t *Tag) LastIssued() (int64, bool) {
	if t.gen != nil {
		last := t.genLast.Load()
		return last, last > 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	last := t.lastIssued
	if cur := t.cur.Load(); cur.size > 0 {
		if v, ok := cur.lastIssued(); ok {
			last = max(last, v)
		}
	}
	return last, last > 0
}

// LastIssued is Tag.LastIssued by name; false for a tag this server does
// not know.
func (a *Allocator) LastIssued(name string) (int64, bool) {
	t := a.tags.get(name)
	if t == nil {
		return 0, false
	}
	return t.LastIssued()
}
