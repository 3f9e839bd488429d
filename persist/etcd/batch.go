package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
)

// maxTxnTags is the most tags one transaction of TakeBatch changes: etcd
// refuses a transaction with more than --max-txn-ops operations (128 by
// default) in one of its parts, and a batch's has two per tag in each (the
// compares of the tag's key and its guard, their puts, their reads back).
const maxTxnTags = 64

// creating is the revision a batch gives a snapshot of a tag it is about
// to create: not 0, so that plan sees a record.
const creating = -1

// batchTag is one tag of a TakeBatch: its requests, and what the current
// attempt read and decided.
type batchTag struct {
	name    string
	reqs    []int // positions in the batch, in the order asked
	creator int   // position of the first request that asks to create the key; -1: none
	st      *tagState

	snap    snapshot // as read (or remembered)
	fresh   bool     // snap was read by this call
	out     []persist.TakeResult
	w       write
	created bool
}

// TakeBatch implements persist.Store: the requests' tags are changed in
// one transaction per maxTxnTags tags, in name order, with a compare of
// each key it writes, so that a tag moved by another handle meanwhile
// makes the transaction read the moved keys back and run again. Keys a
// request asks to create are created in the same transaction. A
// transaction whose outcome is unknown serves none of its ranges.
func (s *Store) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	res := make([]persist.TakeResult, len(reqs))
	byName := make(map[string]*batchTag, len(reqs))
	var tags []*batchTag
	for i, q := range reqs {
		err := persist.CheckTag(q.Tag)
		if err == nil && q.Create != 0 {
			err = persist.CheckStep(q.Create)
		}
		if err != nil {
			res[i].Err = fmt.Errorf("take %q: %w", q.Tag, err)
			continue
		}
		bt := byName[q.Tag]
		if bt == nil {
			bt = &batchTag{name: q.Tag, creator: -1}
			byName[q.Tag] = bt
			tags = append(tags, bt)
		}
		bt.reqs = append(bt.reqs, i)
		if bt.creator < 0 && q.Create > 0 {
			bt.creator = i
		}
	}
	// One order for every batch of this handle: they never wait on each
	// other's tag locks in a cycle.
	slices.SortFunc(tags, func(a, b *batchTag) int { return strings.Compare(a.name, b.name) })
	if s.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
	}
	for len(tags) > 0 {
		n := min(len(tags), maxTxnTags)
		s.takeChunk(ctx, reqs, tags[:n], res)
		tags = tags[n:]
	}
	return res
}

// takeChunk takes the requests of tags in one transaction, holding the
// tags' locks of this handle, and answers them in res.
func (s *Store) takeChunk(ctx context.Context, reqs []persist.TakeRequest, tags []*batchTag, res []persist.TakeResult) {
	var unlocks []func()
	defer func() {
		for _, unlock := range unlocks {
			unlock()
		}
	}()
	for _, bt := range tags {
		st, unlock, err := s.lockTag(ctx, bt.name)
		if err != nil {
			for _, bt := range tags {
				for _, i := range bt.reqs {
					res[i].Err = s.opErr("take", bt.name, unavailableErr(err, nil))
				}
			}
			return
		}
		bt.st = st
		unlocks = append(unlocks, unlock)
	}
	op, tag := "take", tags[0].name
	if len(tags) > 1 {
		op, tag = fmt.Sprintf("take of %d tags", len(tags)), ""
	}
	err := s.do(ctx, op, tag, func(ctx context.Context, kv clientv3.KV) error {
		return s.changeBatch(ctx, kv, reqs, tags)
	})
	for _, bt := range tags {
		for j, i := range bt.reqs {
			switch {
			case err != nil && tag == "":
				res[i].Err = fmt.Errorf("tag %q: %w", bt.name, err)
			case err != nil:
				res[i].Err = err // named by do
			case bt.out[j].Err != nil:
				res[i].Err = fmt.Errorf("take %q: %w", bt.name, bt.out[j].Err)
			default:
				res[i] = bt.out[j]
				res[i].Created = bt.created && i == bt.creator
			}
		}
	}
}

// changeBatch is change for many tags: decide each on its snapshot, and
// commit every write in one transaction that compares every key it
// writes; a lost compare brings all those keys back, and it runs again.
// A decision not to write, or an error, is only taken on keys read by
// this call.
func (s *Store) changeBatch(ctx context.Context, kv clientv3.KV, reqs []persist.TakeRequest, tags []*batchTag) error {
	var unknown []*batchTag
	for _, bt := range tags {
		bt.snap, bt.fresh = bt.st.snap, false
		if !bt.st.known {
			unknown = append(unknown, bt)
		}
	}
	forget := func(err error) error {
		for _, bt := range tags {
			bt.st.known = false
		}
		return err
	}
	if err := s.readMany(ctx, kv, unknown); err != nil {
		return forget(err)
	}
	for {
		now := s.now().UTC()
		var stale, writes []*batchTag
		for _, bt := range tags {
			bt.decide(reqs, now)
			switch {
			case bt.w.none && !bt.fresh:
				stale = append(stale, bt)
			case !bt.w.none:
				writes = append(writes, bt)
			}
		}
		if len(stale) > 0 {
			if err := s.readMany(ctx, kv, stale); err != nil {
				return forget(err)
			}
			continue
		}
		if len(writes) == 0 {
			for _, bt := range tags {
				bt.st.snap, bt.st.known = bt.snap, true
			}
			return nil
		}
		var cmps []clientv3.Cmp
		var puts, gets []clientv3.Op
		for _, bt := range writes {
			c, p := s.writeOps(bt.name, bt.snap, bt.w)
			cmps, puts = append(cmps, c...), append(puts, p...)
			gets = append(gets, clientv3.OpGet(s.tagKey(bt.name)), clientv3.OpGet(s.guardKey(bt.name)))
		}
		resp, err := kv.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		if err != nil {
			// The outcome is unknown: forget what we saw.
			return forget(err)
		}
		if resp.Succeeded {
			for _, bt := range tags {
				bt.st.snap, bt.st.known = bt.snap, true
				if bt.w.none {
					continue
				}
				next := bt.snap
				next.tagRev, next.rec = resp.Header.Revision, bt.w.rec
				if bt.w.setGuard {
					next.guardRev, next.high = resp.Header.Revision, bt.w.high
				}
				bt.st.snap = next
			}
			return nil
		}
		// Another handle (or an operator) moved a key: the current values
		// of every written tag came back with the answer.
		for i, bt := range writes {
			snap, err := snapshotOf(resp.Responses[2*i].GetResponseRange().Kvs, resp.Responses[2*i+1].GetResponseRange().Kvs)
			if err != nil {
				return forget(err)
			}
			bt.snap, bt.fresh = snap, true
		}
	}
}

// decide plans bt's requests, in order, on its snapshot: their results,
// and what to write. A key that requests ask to create and that is
// missing is created, every request of the tag then served from it.
func (bt *batchTag) decide(reqs []persist.TakeRequest, now time.Time) {
	next := bt.snap
	bt.created = false
	if next.tagRev == 0 && bt.creator >= 0 {
		next.tagRev, next.rec = creating, record{MaxID: 1, Step: reqs[bt.creator].Create}
		bt.created = true
	}
	bt.out = make([]persist.TakeResult, len(bt.reqs))
	served := false
	for j, i := range bt.reqs {
		r, err := plan(next, reqs[i].Size)
		bt.out[j] = persist.TakeResult{Range: r, Err: err}
		if err != nil {
			continue
		}
		served = true
		next.rec.MaxID, next.high = r.End, r.End
	}
	if !served && !bt.created {
		bt.w = write{none: true}
		return
	}
	rec := next.rec
	rec.UpdateTime = now
	bt.w = write{rec: rec, setGuard: served, high: rec.MaxID}
}

// readMany reads the two keys of each of tags at one revision and marks
// their snapshots fresh.
func (s *Store) readMany(ctx context.Context, kv clientv3.KV, tags []*batchTag) error {
	if len(tags) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, 0, 2*len(tags))
	for _, bt := range tags {
		ops = append(ops, clientv3.OpGet(s.tagKey(bt.name)), clientv3.OpGet(s.guardKey(bt.name)))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return err
	}
	for i, bt := range tags {
		snap, err := snapshotOf(resp.Responses[2*i].GetResponseRange().Kvs, resp.Responses[2*i+1].GetResponseRange().Kvs)
		if err != nil {
			return err
		}
		bt.snap, bt.fresh = snap, true
	}
	return nil
}
