package etcd

import (
	"context"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
)

// A change of a tag is a compare-and-set: decide looks at the tag's two
// keys as last seen and says what to write; the transaction writes it only
// if neither key it depends on moved since, and otherwise reads both keys
// back in the same round trip (its Else branch), for decide to run again.
// A transaction that reports success is the only thing ever acted on: one
// whose outcome is unknown (deadline, lost connection, leader lost) leaves
// nothing behind but a forgotten snapshot, and whatever it may have
// committed moves the keys' revisions, so no later compare against the
// old revisions can succeed.

// write is what decide wants written.
type write struct {
	none     bool   // nothing to write: the decision stands as it is
	rec      record // the tag's new record
	setGuard bool   // also set the guard to high
	high     int64
}

// tagState is what one handle keeps per tag: a lock, so that the
// handle's own changes of a tag queue instead of defeating each other's
// compares; the snapshot its last transaction left, so that a change
// usually costs one transaction, with no read before it; and the Takes
// waiting for the lock, which the next holder serves in one transaction.
type tagState struct {
	sem   chan struct{} // held by the change in progress
	known bool          // snap is what the keys held after this handle's last change
	snap  snapshot

	mu      sync.Mutex
	waiting []*takeReq
}

// takeReq is one Take waiting for its range.
type takeReq struct {
	size int64
	done chan takeResult // buffered: whoever serves it never blocks
	r    persist.Range   // planned, valid while the batch is decided
	err  error
}

type takeResult struct {
	r   persist.Range
	err error
}

// state is tag's state in this handle, made on first use.
func (s *Store) state(tag string) *tagState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tags[tag]
	if st == nil {
		st = &tagState{sem: make(chan struct{}, 1)}
		s.tags[tag] = st
	}
	return st
}

// lockTag takes tag's lock, waiting no longer than ctx allows.
func (s *Store) lockTag(ctx context.Context, tag string) (*tagState, func(), error) {
	st := s.state(tag)
	select {
	case st.sem <- struct{}{}:
		return st, func() { <-st.sem }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// enqueue adds a Take to those waiting.
func (st *tagState) enqueue(req *takeReq) {
	st.mu.Lock()
	st.waiting = append(st.waiting, req)
	st.mu.Unlock()
}

// withdraw removes req from those waiting and reports whether it was
// still there (false: a batch took it).
func (st *tagState) withdraw(req *takeReq) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, w := range st.waiting {
		if w == req {
			st.waiting = append(st.waiting[:i], st.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// drain takes every waiting Take, for one batch.
func (st *tagState) drain() []*takeReq {
	st.mu.Lock()
	defer st.mu.Unlock()
	batch := st.waiting
	st.waiting = nil
	return batch
}

// change runs decide until its write commits or it decides there is
// nothing to write. A decision not to write, or an error, is only taken
// on keys read by this call: a remembered snapshot may be stale.
func (s *Store) change(ctx context.Context, kv clientv3.KV, st *tagState, tag string, decide func(snapshot) (write, error)) error {
	snap, fresh := st.snap, false
	if !st.known {
		var err error
		if snap, err = s.read(ctx, kv, tag); err != nil {
			return err
		}
		fresh = true
	}
	for {
		w, err := decide(snap)
		if (err != nil || w.none) && !fresh {
			if snap, err = s.read(ctx, kv, tag); err != nil {
				st.known = false
				return err
			}
			fresh = true
			continue
		}
		if err != nil || w.none {
			st.snap, st.known = snap, true
			return err
		}
		resp, err := s.commit(ctx, kv, tag, snap, w)
		if err != nil {
			// The outcome is unknown: forget what we saw.
			st.known = false
			return err
		}
		if resp.Succeeded {
			next := snap
			next.tagRev, next.rec = resp.Header.Revision, w.rec
			if w.setGuard {
				next.guardRev, next.high = resp.Header.Revision, w.high
			}
			st.snap, st.known = next, true
			return nil
		}
		// Another handle (or an operator) moved a key: its current values
		// came back with the answer.
		if snap, err = snapshotOf(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs); err != nil {
			st.known = false
			return err
		}
		fresh = true
	}
}

// read reads the tag's two keys at one revision (linearizable).
func (s *Store) read(ctx context.Context, kv clientv3.KV, tag string) (snapshot, error) {
	resp, err := kv.Txn(ctx).Then(clientv3.OpGet(s.tagKey(tag)), clientv3.OpGet(s.guardKey(tag))).Commit()
	if err != nil {
		return snapshot{}, err
	}
	return snapshotOf(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
}

// commit writes w if the tag's key is still at snap's revision, and the
// guard's too when w sets it (absent: created since never); otherwise it
// reads both keys back.
func (s *Store) commit(ctx context.Context, kv clientv3.KV, tag string, snap snapshot, w write) (*clientv3.TxnResponse, error) {
	cmps, puts := s.writeOps(tag, snap, w)
	return kv.Txn(ctx).If(cmps...).Then(puts...).Else(clientv3.OpGet(s.tagKey(tag)), clientv3.OpGet(s.guardKey(tag))).Commit()
}

// writeOps are the compares and puts of w on tag's keys as snap saw them:
// a key absent there (revision 0) must still be absent.
func (s *Store) writeOps(tag string, snap snapshot, w write) ([]clientv3.Cmp, []clientv3.Op) {
	tk, gk := s.tagKey(tag), s.guardKey(tag)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(tk), "=", snap.tagRev)}
	puts := []clientv3.Op{clientv3.OpPut(tk, w.rec.encode())}
	if w.setGuard {
		if snap.guardRev == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(gk), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(gk), "=", snap.guardRev))
		}
		puts = append(puts, clientv3.OpPut(gk, strconv.FormatInt(w.high, 10)))
	}
	return cmps, puts
}
