package etcd

import (
	"context"
	"fmt"
	"math"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
)

// tagsPage is how many tags one read of Tags returns at most.
const tagsPage = 1000

// onTag runs a change of tag under the tag's lock and the store's
// deadline.
func (s *Store) onTag(ctx context.Context, op, tag string, decide func(snapshot) (write, error)) error {
	if s.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
	}
	st, unlock, err := s.lockTag(ctx, tag)
	if err != nil {
		return s.opErr(op, tag, unavailableErr(err, nil))
	}
	defer unlock()
	return s.do(ctx, op, tag, func(ctx context.Context, kv clientv3.KV) error {
		return s.change(ctx, kv, st, tag, decide)
	})
}

// Take reserves the next range of tag: max_id += size (the record's step
// when size <= 0), in one transaction that also raises the guard to the
// range's end. A range that would start below the guard (the tag's key
// was deleted and re-created, or max_id lowered by hand) starts at the
// guard instead (Range.Repaired). ErrNotFound when the tag has no key;
// ErrOverflow, nothing written, when max_id would pass math.MaxInt64;
// ErrInvalid for a bad tag, or when size <= 0 and the step is not
// positive.
//
// Takes of one tag on one handle run one at a time; those that queued
// meanwhile are served together, consecutive ranges in one transaction.
// A Take whose context ends while it waits returns at once; a range
// taken for it meanwhile is a gap.
func (s *Store) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	if err := persist.CheckTag(tag); err != nil {
		return persist.Range{}, fmt.Errorf("take %q: %w", tag, err)
	}
	if s.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
	}
	st := s.state(tag)
	req := &takeReq{size: size, done: make(chan takeResult, 1)}
	st.enqueue(req)
	select {
	case res := <-req.done:
		return res.r, res.err
	case <-ctx.Done():
		st.withdraw(req)
		return persist.Range{}, s.opErr("take", tag, unavailableErr(ctx.Err(), nil))
	case st.sem <- struct{}{}:
	}
	s.serve(ctx, st, tag, st.drain())
	<-st.sem
	select {
	case res := <-req.done:
		return res.r, res.err
	default:
		// Impossible: req was served before this call took the lock, or
		// by it.
		return persist.Range{}, fmt.Errorf("take %q: lost in a batch", tag)
	}
}

// serve takes the ranges of a batch of Takes in one transaction, in their
// order, and answers each. A Take that cannot be served (a size that
// overflows, no tag) gets its own error and takes nothing; an error of
// the transaction goes to all.
func (s *Store) serve(ctx context.Context, st *tagState, tag string, batch []*takeReq) {
	if len(batch) == 0 {
		return
	}
	err := s.do(ctx, "take", tag, func(ctx context.Context, kv clientv3.KV) error {
		return s.change(ctx, kv, st, tag, func(snap snapshot) (write, error) {
			next, served := snap, false
			for _, req := range batch {
				req.r, req.err = plan(next, req.size)
				if req.err != nil {
					continue
				}
				served = true
				next.rec.MaxID, next.high = req.r.End, req.r.End
			}
			if !served {
				return write{none: true}, nil
			}
			rec := next.rec
			rec.UpdateTime = s.now().UTC()
			return write{rec: rec, setGuard: true, high: rec.MaxID}, nil
		})
	})
	for _, req := range batch {
		switch {
		case err != nil:
			req.done <- takeResult{err: err}
		case req.err != nil:
			req.done <- takeResult{err: fmt.Errorf("take %q: %w", tag, req.err)}
		default:
			req.done <- takeResult{r: req.r}
		}
	}
}

// plan is the range a Take of size gives on snap.
func plan(snap snapshot, size int64) (persist.Range, error) {
	if snap.tagRev == 0 {
		return persist.Range{}, persist.ErrNotFound
	}
	n := size
	if n <= 0 {
		if snap.rec.Step <= 0 {
			return persist.Range{}, fmt.Errorf("%w: the record's step is %d", persist.ErrInvalid, snap.rec.Step)
		}
		n = snap.rec.Step
	}
	if overflows(snap.rec.MaxID, n) {
		return persist.Range{}, fmt.Errorf("%w: max_id is %d", persist.ErrOverflow, snap.rec.MaxID)
	}
	r := persist.Range{Start: snap.rec.MaxID, End: snap.rec.MaxID + n, Step: snap.rec.Step}
	if snap.guardRev != 0 && snap.high > r.Start {
		if overflows(snap.high, n) {
			return persist.Range{}, fmt.Errorf("%w: the guard is at %d, max_id at %d", persist.ErrOverflow, snap.high, snap.rec.MaxID)
		}
		r = persist.Range{Start: snap.high, End: snap.high + n, Step: snap.rec.Step, Repaired: true, Answered: r.Start}
	}
	return r, nil
}

// GiveBack sets max_id to `to` only if it is still `from` (compare-and-set)
// and reports whether it matched. The guard is lowered with it only if it
// is exactly at `from`, so that the next Take continues at `to`; a guard
// above `from` stays. ErrInvalid unless 1 <= to < from; ErrNotFound when
// the tag has no key.
func (s *Store) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	if err := persist.CheckTag(tag); err != nil {
		return false, fmt.Errorf("give back %q: %w", tag, err)
	}
	if to < 1 || to >= from {
		return false, fmt.Errorf("give back %q: %w: from %d to %d (want 1 <= to < from)", tag, persist.ErrInvalid, from, to)
	}
	var matched bool
	err := s.onTag(ctx, "give back", tag, func(snap snapshot) (write, error) {
		matched = false
		if snap.tagRev == 0 {
			return write{}, persist.ErrNotFound
		}
		if snap.rec.MaxID != from {
			return write{none: true}, nil
		}
		matched = true
		rec := snap.rec
		rec.MaxID, rec.UpdateTime = to, s.now().UTC()
		lower := snap.guardRev != 0 && snap.high == from
		return write{rec: rec, setGuard: lower, high: to}, nil
	})
	if err != nil {
		return false, err
	}
	return matched, nil
}

// SetStep changes the record's step. ErrNotFound when missing; ErrInvalid
// for a step outside [1, persist.MaxStep].
func (s *Store) SetStep(ctx context.Context, tag string, step int64) error {
	if err := persist.CheckTag(tag); err != nil {
		return fmt.Errorf("set step %q: %w", tag, err)
	}
	if err := persist.CheckStep(step); err != nil {
		return fmt.Errorf("set step %q: %w", tag, err)
	}
	return s.onTag(ctx, "set step", tag, func(snap snapshot) (write, error) {
		if snap.tagRev == 0 {
			return write{}, persist.ErrNotFound
		}
		rec := snap.rec
		rec.Step, rec.UpdateTime = step, s.now().UTC()
		return write{rec: rec}, nil
	})
}

// RaiseFloor sets max_id = floor+1 when max_id is lower, never lowering
// it, and returns the tag after the change and whether max_id moved.
// ErrNotFound when missing; ErrOverflow when floor is math.MaxInt64.
func (s *Store) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	if err := persist.CheckTag(tag); err != nil {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w", tag, err)
	}
	if floor == math.MaxInt64 {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w: floor %d", tag, persist.ErrOverflow, floor)
	}
	var after record
	var moved bool
	err := s.onTag(ctx, "raise floor", tag, func(snap snapshot) (write, error) {
		after, moved = snap.rec, false
		if snap.tagRev == 0 {
			return write{}, persist.ErrNotFound
		}
		if snap.rec.MaxID >= floor+1 {
			return write{none: true}, nil
		}
		after.MaxID, after.UpdateTime, moved = floor+1, s.now().UTC(), true
		return write{rec: after}, nil
	})
	if err != nil {
		return persist.Tag{}, false, err
	}
	return after.tag(tag), moved, nil
}

// Create writes a tag's key with max_id = 1, only if there is none (a
// create-revision-of-0 compare). It reports false, and no error, when the
// tag exists; its key is left untouched. A guard left by an earlier key of
// the same tag stays: the first Take starts above it. ErrInvalid for a bad
// tag, a step outside [1, persist.MaxStep] or a description that is too
// long.
func (s *Store) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	if err := persist.CheckTag(name); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	if err := persist.CheckStep(step); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	if err := persist.CheckDescription(description); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	key := s.tagKey(name)
	value := record{MaxID: 1, Step: step, Description: description, UpdateTime: s.now().UTC()}.encode()
	var created bool
	err := s.do(ctx, "create", name, func(ctx context.Context, kv clientv3.KV) error {
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, value)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		created = resp.Succeeded
		if !created {
			// An earlier attempt whose answer was lost may have written
			// it: the value, down to the nanosecond of update_time, is
			// ours.
			kvs := resp.Responses[0].GetResponseRange().Kvs
			created = len(kvs) == 1 && string(kvs[0].Value) == value
		}
		return nil
	})
	return created, err
}

// Tag reads one tag; ErrNotFound when it has no key.
func (s *Store) Tag(ctx context.Context, name string) (persist.Tag, error) {
	if err := persist.CheckTag(name); err != nil {
		return persist.Tag{}, fmt.Errorf("tag %q: %w", name, err)
	}
	var t persist.Tag
	err := s.do(ctx, "tag", name, func(ctx context.Context, kv clientv3.KV) error {
		// With its mode (registry.go), at one revision.
		resp, err := kv.Txn(ctx).Then(clientv3.OpGet(s.tagKey(name)), clientv3.OpGet(s.modeKey(name))).Commit()
		if err != nil {
			return err
		}
		kvs := first(resp, 0)
		if len(kvs) == 0 {
			return persist.ErrNotFound
		}
		rec, err := decodeRecord(kvs[0])
		t = withMode(rec.tag(name), first(resp, 1))
		return err
	})
	if err != nil {
		return persist.Tag{}, err
	}
	return t, nil
}

// Tags lists every tag, ordered by name (byte order), a page of keys at a
// time.
func (s *Store) Tags(ctx context.Context) ([]persist.Tag, error) {
	dir := s.prefix + tagsDir
	end := clientv3.GetPrefixRangeEnd(dir)
	var tags []persist.Tag
	from := dir
	for {
		var page []persist.Tag
		var more bool
		err := s.do(ctx, "tags", "", func(ctx context.Context, kv clientv3.KV) error {
			resp, err := kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(tagsPage))
			if err != nil {
				return err
			}
			page = page[:0]
			for _, kv := range resp.Kvs {
				rec, err := decodeRecord(kv)
				if err != nil {
					return err
				}
				page = append(page, rec.tag(string(kv.Key[len(dir):])))
			}
			more = resp.More
			if more {
				from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		tags = append(tags, page...)
		if !more {
			return s.withModes(ctx, tags)
		}
	}
}

// withModes sets the modes of tags (registry.go). Modes are read after the
// tags: a tag's mode is written with its key, so every tag listed has its
// mode by then.
func (s *Store) withModes(ctx context.Context, tags []persist.Tag) ([]persist.Tag, error) {
	dir := s.prefix + modesDir
	modes := map[string][]*mvccpb.KeyValue{}
	err := s.do(ctx, "tags", "", func(ctx context.Context, kv clientv3.KV) error {
		resp, err := kv.Get(ctx, dir, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		clear(modes)
		for _, kv := range resp.Kvs {
			modes[string(kv.Key[len(dir):])] = []*mvccpb.KeyValue{kv}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, t := range tags {
		tags[i] = withMode(t, modes[t.Name])
	}
	return tags, nil
}
