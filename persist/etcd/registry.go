package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
)

// The cluster registry (persist.Registry) on etcd, under the same prefix:
//
//	<prefix>nodes/<id>                a live node: {"addr":...,"version":...,"started":<ms>,"seen":<n>},
//	                                  attached to the node's etcd lease
//	<prefix>workers/<n>/holder        the node holding worker id n, attached to that node's lease
//	<prefix>workers/<n>/bound         its bound, Unix ms in decimal: kept when the holder goes
//	<prefix>log/head                  the last change's number, in decimal
//	<prefix>log/seq/<20-digit number> a change: {"kind":...,"tag":...,"value":...,"node":...}
//	<prefix>modes/<tag>               a tag's mode: {"mode":"snowflake","layout":...}
//
// Leases are etcd's: the leader expires a node's lease, deleting its node
// key and its worker's holder key, when it was not kept alive for its TTL
// (whole seconds, rounded up, and at least etcd's minimum; a new leader
// extends every lease, so a lease only ever lasts longer than asked, which
// is the safe side). A node is live while its key exists. A registration
// whose lease expired is gone: its node joins again. A change's number is
// the head's plus one, written with the head in one transaction that
// compares the head's revision, so numbers become visible in order.

const (
	nodesDir   = "nodes/"
	workersDir = "workers/"
	logHead    = "log/head"
	logDir     = "log/seq/"
	modesDir   = "modes/"
)

var _ persist.Registry = (*Store)(nil)

// registryAttempts bounds the retries of a compare that another node
// won; each lost one means another node's write went through.
const registryAttempts = 100

// nodeValue is a node key's value.
type nodeValue struct {
	Addr    string `json:"addr"`
	Version string `json:"version"`
	Started int64  `json:"started"`
	Seen    int64  `json:"seen"`
}

// changeValue is a change key's value.
type changeValue struct {
	Kind  string `json:"kind"`
	Tag   string `json:"tag"`
	Value int64  `json:"value"`
	Node  string `json:"node"`
}

// modeValue is a mode key's value.
type modeValue struct {
	Mode   string `json:"mode"`
	Layout string `json:"layout"`
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // numbers and strings always marshal
	}
	return string(b)
}

func (s *Store) nodeKey(id string) string { return s.prefix + nodesDir + id }
func (s *Store) holderKey(worker int) string {
	return s.prefix + workersDir + strconv.Itoa(worker) + "/holder"
}
func (s *Store) boundKey(worker int) string {
	return s.prefix + workersDir + strconv.Itoa(worker) + "/bound"
}
func (s *Store) changeKey(seq int64) string { return fmt.Sprintf("%s%s%020d", s.prefix, logDir, seq) }
func (s *Store) modeKey(tag string) string  { return s.prefix + modesDir + tag }
func (s *Store) headKey() string            { return s.prefix + logHead }
func ttlSeconds(ttl time.Duration) int64    { return max(int64(math.Ceil(ttl.Seconds())), 1) }
func leaseGone(err error) bool              { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
func (s *Store) lease() clientv3.Lease      { return s.conn.Load().cli }
func first(resp *clientv3.TxnResponse, i int) []*mvccpb.KeyValue {
	return resp.Responses[i].GetResponseRange().Kvs
}

// Join implements persist.Registry: a new etcd lease, and the node's key
// on it (replacing one under the same id).
func (s *Store) Join(ctx context.Context, n persist.NodeInfo, ttl time.Duration) (int64, error) {
	if err := persist.CheckNode(n); err != nil {
		return 0, fmt.Errorf("join: %w", err)
	}
	var head int64
	err := s.do(ctx, "join", "", func(ctx context.Context, kv clientv3.KV) error {
		grant, err := s.lease().Grant(ctx, ttlSeconds(ttl))
		if err != nil {
			return err
		}
		v := nodeValue{Addr: n.Addr, Version: n.Version, Started: n.Started.UnixMilli()}
		resp, err := kv.Txn(ctx).Then(clientv3.OpPut(s.nodeKey(n.ID), encode(v), clientv3.WithLease(grant.ID)),
			clientv3.OpGet(s.headKey())).Commit()
		if err != nil {
			return err
		}
		if head, err = decodeHead(first(resp, 1)); err != nil {
			return err
		}
		if ttl <= 0 {
			_, err = s.lease().Revoke(ctx, grant.ID) // expired as soon as written
		}
		return err
	})
	return head, err
}

// node reads a node's key: its value and lease; ErrLeaseLost when gone.
func (s *Store) node(ctx context.Context, kv clientv3.KV, id string) (nodeValue, clientv3.LeaseID, error) {
	resp, err := kv.Get(ctx, s.nodeKey(id))
	if err != nil {
		return nodeValue{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nodeValue{}, 0, persist.ErrLeaseLost
	}
	var v nodeValue
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		return nodeValue{}, 0, fmt.Errorf("%w: the value of %q is not a node: %.100q", persist.ErrSchema, resp.Kvs[0].Key, resp.Kvs[0].Value)
	}
	return v, clientv3.LeaseID(resp.Kvs[0].Lease), nil
}

// Renew implements persist.Registry: the node's lease kept alive, its key
// rewritten with Seen (only while on that lease), its worker's bound
// raised. A TTL of 0 revokes the lease: the registration is gone.
func (s *Store) Renew(ctx context.Context, r persist.Renewal) error {
	return s.do(ctx, "renew", "", func(ctx context.Context, kv clientv3.KV) error {
		v, lease, err := s.node(ctx, kv, r.Node)
		if err != nil {
			return err
		}
		if r.TTL > 0 {
			if _, err := s.lease().KeepAliveOnce(ctx, lease); leaseGone(err) {
				return persist.ErrLeaseLost
			} else if err != nil {
				return err
			}
			v.Seen = r.Seen
			key := s.nodeKey(r.Node)
			resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
				Then(clientv3.OpPut(key, encode(v), clientv3.WithLease(lease))).Commit()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return persist.ErrLeaseLost
			}
		}
		if r.Worker >= 0 {
			if err := s.raiseBound(ctx, kv, r.Node, r.Worker, r.Bound); err != nil {
				return err
			}
		}
		if r.TTL <= 0 {
			if _, err := s.lease().Revoke(ctx, lease); err != nil && !leaseGone(err) {
				return err
			}
		}
		return nil
	})
}

// raiseBound raises worker's bound to bound while node holds it;
// ErrWorkerLost when it does not.
func (s *Store) raiseBound(ctx context.Context, kv clientv3.KV, node string, worker int, bound int64) error {
	hk, bk := s.holderKey(worker), s.boundKey(worker)
	for range registryAttempts {
		resp, err := kv.Txn(ctx).Then(clientv3.OpGet(hk), clientv3.OpGet(bk)).Commit()
		if err != nil {
			return err
		}
		holder, cur := first(resp, 0), first(resp, 1)
		if len(holder) == 0 || string(holder[0].Value) != node {
			return fmt.Errorf("worker id %d: %w", worker, persist.ErrWorkerLost)
		}
		prev, rev, err := decodeBound(cur)
		if err != nil || prev >= bound {
			return err
		}
		put, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.Value(hk), "=", node), clientv3.Compare(clientv3.ModRevision(bk), "=", rev)).
			Then(clientv3.OpPut(bk, strconv.FormatInt(bound, 10))).Commit()
		if err != nil || put.Succeeded {
			return err
		}
	}
	return fmt.Errorf("%w: worker id %d's bound kept moving", persist.ErrUnavailable, worker)
}

// decodeBound reads a bound key (0 and revision 0 when absent).
func decodeBound(kvs []*mvccpb.KeyValue) (int64, int64, error) {
	if len(kvs) == 0 {
		return 0, 0, nil
	}
	b, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: the value of %q is not a bound (want a decimal integer): %.100q", persist.ErrSchema, kvs[0].Key, kvs[0].Value)
	}
	return b, kvs[0].ModRevision, nil
}

// decodeHead reads the log's head key (0 when absent).
func decodeHead(kvs []*mvccpb.KeyValue) (int64, error) {
	if len(kvs) == 0 {
		return 0, nil
	}
	h, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the value of %q is not a number: %.100q", persist.ErrSchema, kvs[0].Key, kvs[0].Value)
	}
	return h, nil
}

// Leave implements persist.Registry: worker freed with bound if the node
// holds it, the node's key deleted and its lease revoked. Another worker
// id the node holds without knowing loses its holder key with the lease,
// and keeps its bound.
func (s *Store) Leave(ctx context.Context, node string, worker int, bound int64) error {
	return s.do(ctx, "leave", "", func(ctx context.Context, kv clientv3.KV) error {
		if worker >= 0 {
			hk := s.holderKey(worker)
			if _, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.Value(hk), "=", node)).
				Then(clientv3.OpPut(s.boundKey(worker), strconv.FormatInt(bound, 10)), clientv3.OpDelete(hk)).Commit(); err != nil {
				return err
			}
		}
		_, lease, err := s.node(ctx, kv, node)
		if errors.Is(err, persist.ErrLeaseLost) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := kv.Delete(ctx, s.nodeKey(node)); err != nil {
			return err
		}
		if _, err := s.lease().Revoke(ctx, lease); err != nil && !leaseGone(err) {
			return err
		}
		return nil
	})
}

// worker is one worker id's keys.
type worker struct {
	id        int
	holder    string // "" when free
	bound     int64
	boundRev  int64 // 0: no bound key
	holderRev int64
}

// workers reads every worker id's keys, by id.
func (s *Store) workers(ctx context.Context, kv clientv3.KV) ([]worker, error) {
	dir := s.prefix + workersDir
	resp, err := kv.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	byID := map[int]*worker{}
	for _, kv := range resp.Kvs {
		idStr, field, ok := strings.Cut(string(kv.Key[len(dir):]), "/")
		id, err := strconv.Atoi(idStr)
		if !ok || err != nil || id < 0 {
			continue // not leaf's
		}
		w := byID[id]
		if w == nil {
			w = &worker{id: id}
			byID[id] = w
		}
		switch field {
		case "holder":
			w.holder, w.holderRev = string(kv.Value), kv.ModRevision
		case "bound":
			if w.bound, w.boundRev, err = decodeBound([]*mvccpb.KeyValue{kv}); err != nil {
				return nil, err
			}
		}
	}
	out := make([]worker, 0, len(byID))
	for _, w := range byID {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// Nodes implements persist.Registry: the node keys, with their leases'
// time to live (whole seconds, as etcd keeps them).
func (s *Store) Nodes(ctx context.Context) ([]persist.Node, error) {
	var nodes []persist.Node
	err := s.do(ctx, "nodes", "", func(ctx context.Context, kv clientv3.KV) error {
		nodes = nodes[:0]
		dir := s.prefix + nodesDir
		resp, err := kv.Txn(ctx).Then(clientv3.OpGet(dir, clientv3.WithPrefix()), clientv3.OpGet(s.prefix+workersDir, clientv3.WithPrefix())).Commit()
		if err != nil {
			return err
		}
		held := map[string]int{}
		wdir := s.prefix + workersDir
		for _, kv := range first(resp, 1) {
			idStr, field, _ := strings.Cut(string(kv.Key[len(wdir):]), "/")
			if id, err := strconv.Atoi(idStr); err == nil && field == "holder" {
				if cur, ok := held[string(kv.Value)]; !ok || id < cur {
					held[string(kv.Value)] = id
				}
			}
		}
		for _, kv := range first(resp, 0) {
			var v nodeValue
			if err := json.Unmarshal(kv.Value, &v); err != nil {
				continue // not leaf's
			}
			n := persist.Node{NodeInfo: persist.NodeInfo{ID: string(kv.Key[len(dir):]), Addr: v.Addr, Version: v.Version,
				Started: time.UnixMilli(v.Started)}, Seen: v.Seen, Worker: -1}
			if id, ok := held[n.ID]; ok {
				n.Worker = id
			}
			ttl, err := s.lease().TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil && !leaseGone(err) {
				return err
			}
			if err != nil || ttl.TTL < 0 {
				continue // expired since the read
			}
			n.Expires = time.Duration(ttl.TTL) * time.Second
			n.Age = time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second
			nodes = append(nodes, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// LeaseWorker implements persist.Registry: the holder key written on the
// node's lease, only if absent, with the bound raised, in one transaction
// that compares the bound's revision.
func (s *Store) LeaseWorker(ctx context.Context, r persist.WorkerRequest) (persist.Worker, error) {
	if r.Limit <= 0 {
		return persist.Worker{}, fmt.Errorf("lease worker: %w: limit %d", persist.ErrInvalid, r.Limit)
	}
	var got persist.Worker
	err := s.do(ctx, "lease worker", "", func(ctx context.Context, kv clientv3.KV) error {
		_, lease, err := s.node(ctx, kv, r.Node)
		if err != nil {
			return err
		}
		for range registryAttempts {
			all, err := s.workers(ctx, kv)
			if err != nil {
				return err
			}
			w, ok := pickWorker(all, r)
			if !ok {
				return fmt.Errorf("%w: all %d worker ids are leased to live servers", persist.ErrNoWorker, r.Limit)
			}
			hk, bk := s.holderKey(w.id), s.boundKey(w.id)
			resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(hk), "=", 0), clientv3.Compare(clientv3.ModRevision(bk), "=", w.boundRev)).
				Then(clientv3.OpPut(hk, r.Node, clientv3.WithLease(lease)), clientv3.OpPut(bk, strconv.FormatInt(max(w.bound, r.Bound), 10))).Commit()
			if leaseGone(err) {
				return persist.ErrLeaseLost
			}
			if err != nil {
				return err
			}
			if resp.Succeeded {
				got = persist.Worker{ID: w.id, Prev: w.bound}
				return nil
			}
		}
		return fmt.Errorf("%w: other servers kept taking the free ids first", persist.ErrUnavailable)
	})
	return got, err
}

// pickWorker chooses as the SQL backends do: a free id whose bound is
// before r.Now, else a new id, else the free one with the oldest bound.
func pickWorker(all []worker, r persist.WorkerRequest) (worker, bool) {
	var passed, oldest *worker
	used := map[int]bool{}
	for i := range all {
		w := &all[i]
		if w.id >= r.Limit {
			continue
		}
		used[w.id] = true
		if w.holder != "" {
			continue
		}
		if w.bound < r.Now && (passed == nil || w.bound < passed.bound) {
			passed = w
		}
		if oldest == nil || w.bound < oldest.bound {
			oldest = w
		}
	}
	if passed != nil {
		return *passed, true
	}
	for id := range r.Limit {
		if !used[id] {
			return worker{id: id}, true
		}
	}
	if oldest != nil {
		return *oldest, true
	}
	return worker{}, false
}

// Publish implements persist.Registry: the head and the change written in
// one transaction that compares the head's revision; a floor also writes
// the tag's record, raised, comparing its revision too.
func (s *Store) Publish(ctx context.Context, ch persist.Change) (int64, error) {
	if err := persist.CheckTag(ch.Tag); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	floor := ch.Kind == persist.ChangeFloor && ch.Value >= 0 && ch.Value < math.MaxInt64
	var seq int64
	err := s.do(ctx, "publish", "", func(ctx context.Context, kv clientv3.KV) error {
		hk, tk := s.headKey(), s.tagKey(ch.Tag)
		for range registryAttempts {
			resp, err := kv.Txn(ctx).Then(clientv3.OpGet(hk), clientv3.OpGet(tk)).Commit()
			if err != nil {
				return err
			}
			heads := first(resp, 0)
			head, err := decodeHead(heads)
			if err != nil {
				return err
			}
			var rev int64
			if len(heads) > 0 {
				rev = heads[0].ModRevision
			}
			seq = head + 1
			v := changeValue{Kind: ch.Kind, Tag: ch.Tag, Value: ch.Value, Node: ch.Node}
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(hk), "=", rev)}
			ops := []clientv3.Op{clientv3.OpPut(hk, strconv.FormatInt(seq, 10)), clientv3.OpPut(s.changeKey(seq), encode(v))}
			if old := seq - persist.KeepChanges; old > 0 {
				ops = append(ops, clientv3.OpDelete(s.changeKey(0), clientv3.WithRange(s.changeKey(old+1))))
			}
			if tags := first(resp, 1); floor && len(tags) > 0 {
				rec, err := decodeRecord(tags[0])
				if err != nil {
					return err
				}
				if rec.MaxID < ch.Value+1 {
					// In effect in the store as it becomes visible (see
					// persist.Registry.Publish).
					rec.MaxID, rec.UpdateTime = ch.Value+1, s.now().UTC()
					cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(tk), "=", tags[0].ModRevision))
					ops = append(ops, clientv3.OpPut(tk, rec.encode()))
				}
			}
			put, err := kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
			if err != nil || put.Succeeded {
				return err
			}
		}
		return fmt.Errorf("%w: other publishers kept taking the next number first", persist.ErrUnavailable)
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// GiveBackAfter implements persist.Registry: the tag's keys, the head and
// the changes after seen read at one revision; the give-back written only
// if no change after seen forbids it, comparing the head's revision as
// Publish does, so that no floor is published in between.
func (s *Store) GiveBackAfter(ctx context.Context, tag string, from, to, seen int64) (bool, error) {
	if err := persist.CheckTag(tag); err != nil {
		return false, fmt.Errorf("give back %q: %w", tag, err)
	}
	if to < 1 || to >= from {
		return false, fmt.Errorf("give back %q: %w: from %d to %d (want 1 <= to < from)", tag, persist.ErrInvalid, from, to)
	}
	if s.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
	}
	// The handle's own changes of the tag wait; its snapshot of the tag is
	// stale after this write, which its next compare finds out.
	_, unlock, err := s.lockTag(ctx, tag)
	if err != nil {
		return false, s.opErr("give back", tag, unavailableErr(err, nil))
	}
	defer unlock()
	var matched bool
	err = s.do(ctx, "give back", tag, func(ctx context.Context, kv clientv3.KV) error {
		hk, end := s.headKey(), clientv3.GetPrefixRangeEnd(s.prefix+logDir)
		for range registryAttempts {
			matched = false
			resp, err := kv.Txn(ctx).Then(clientv3.OpGet(s.tagKey(tag)), clientv3.OpGet(s.guardKey(tag)), clientv3.OpGet(hk),
				clientv3.OpGet(s.changeKey(seen+1), clientv3.WithRange(end))).Commit()
			if err != nil {
				return err
			}
			snap, err := snapshotOf(first(resp, 0), first(resp, 1))
			if err != nil {
				return err
			}
			if snap.tagRev == 0 {
				return persist.ErrNotFound
			}
			if snap.rec.MaxID != from {
				return nil
			}
			heads := first(resp, 2)
			head, err := decodeHead(heads)
			if err != nil {
				return err
			}
			if ok, err := s.noFloorAfter(first(resp, 3), tag, to, seen, head); err != nil || !ok {
				return err
			}
			rec := snap.rec
			rec.MaxID, rec.UpdateTime = to, s.now().UTC()
			cmps, puts := s.writeOps(tag, snap, write{rec: rec, setGuard: snap.guardRev != 0 && snap.high == from, high: to})
			if len(heads) > 0 {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(hk), "=", heads[0].ModRevision))
			} else {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(hk), "=", 0))
			}
			put, err := kv.Txn(ctx).If(cmps...).Then(puts...).Commit()
			if err != nil {
				return err
			}
			if put.Succeeded {
				matched = true
				return nil
			}
		}
		return fmt.Errorf("%w: the tag or the log kept moving", persist.ErrUnavailable)
	})
	if err != nil {
		return false, err
	}
	return matched, nil
}

// noFloorAfter reports whether changes, those after seen up to head, are
// all there and none is a floor of tag at or above to.
func (s *Store) noFloorAfter(changes []*mvccpb.KeyValue, tag string, to, seen, head int64) (bool, error) {
	switch {
	case head == seen:
		return true, nil
	case head < seen:
		return false, nil // the log went back (emptied by hand): nothing is known
	}
	want := seen + 1
	for _, kv := range changes {
		seq, err := strconv.ParseInt(string(kv.Key[len(s.prefix+logDir):]), 10, 64)
		var v changeValue
		if err != nil || json.Unmarshal(kv.Value, &v) != nil {
			return false, fmt.Errorf("%w: %q is not a change: %.100q", persist.ErrSchema, kv.Key, kv.Value)
		}
		if seq != want {
			return false, nil // trimmed: a missing change may be a floor
		}
		want++
		if v.Kind == persist.ChangeFloor && v.Tag == tag && v.Value >= to {
			return false, nil
		}
	}
	return want > head, nil
}

// Changes implements persist.Registry: the changes after after and the
// head, read at one revision.
func (s *Store) Changes(ctx context.Context, after int64) ([]persist.Change, int64, error) {
	var out []persist.Change
	var head int64
	err := s.do(ctx, "changes", "", func(ctx context.Context, kv clientv3.KV) error {
		out = out[:0]
		end := clientv3.GetPrefixRangeEnd(s.prefix + logDir)
		resp, err := kv.Txn(ctx).Then(clientv3.OpGet(s.changeKey(after+1), clientv3.WithRange(end)), clientv3.OpGet(s.headKey())).Commit()
		if err != nil {
			return err
		}
		for _, kv := range first(resp, 0) {
			seq, err := strconv.ParseInt(string(kv.Key[len(s.prefix+logDir):]), 10, 64)
			var v changeValue
			if err != nil || json.Unmarshal(kv.Value, &v) != nil {
				return fmt.Errorf("%w: %q is not a change: %.100q", persist.ErrSchema, kv.Key, kv.Value)
			}
			out = append(out, persist.Change{Seq: seq, Kind: v.Kind, Tag: v.Tag, Value: v.Value, Node: v.Node})
		}
		head, err = decodeHead(first(resp, 1))
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(out) > 0 {
		head = max(head, out[len(out)-1].Seq)
	}
	return out, head, nil
}

// CreateTag implements persist.Registry: the tag's key and its mode's,
// only if the tag has no key.
func (s *Store) CreateTag(ctx context.Context, t persist.Tag) (bool, error) {
	if t.Mode == "" {
		return s.Create(ctx, t.Name, t.Step, t.Description)
	}
	for _, check := range []error{persist.CheckTag(t.Name), persist.CheckStep(t.Step), persist.CheckDescription(t.Description)} {
		if check != nil {
			return false, fmt.Errorf("create %q: %w", t.Name, check)
		}
	}
	if len(t.Mode) > 16 || len(t.Layout) > persist.MaxLayoutLen {
		return false, fmt.Errorf("create %q: %w: mode or layout too long", t.Name, persist.ErrInvalid)
	}
	key := s.tagKey(t.Name)
	value := record{MaxID: 1, Step: t.Step, Description: t.Description, UpdateTime: s.now().UTC()}.encode()
	var created bool
	err := s.do(ctx, "create", t.Name, func(ctx context.Context, kv clientv3.KV) error {
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, value), clientv3.OpPut(s.modeKey(t.Name), encode(modeValue{Mode: t.Mode, Layout: t.Layout}))).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		created = resp.Succeeded
		if !created {
			// An earlier attempt whose answer was lost may have written it.
			kvs := first(resp, 0)
			created = len(kvs) == 1 && string(kvs[0].Value) == value
		}
		return nil
	})
	return created, err
}

// withMode sets t's mode from a mode key's value, if any.
func withMode(t persist.Tag, kvs []*mvccpb.KeyValue) persist.Tag {
	var m modeValue
	if len(kvs) > 0 && json.Unmarshal(kvs[0].Value, &m) == nil {
		t.Mode, t.Layout = m.Mode, m.Layout
	}
	return t
}
