package storetest

// The cluster registry (persist.Registry): nodes with leases, worker ids
// leased with a bound, the change log, and tags created in a mode. Leases
// are measured on the store's clock; a lease of 0 has expired as soon as
// it is written, which is how these tests expire one without waiting. A
// backend may keep an expired registration (a renewal revives it) or drop
// it (the renewal answers ErrLeaseLost and the node joins again): the
// tests accept both.

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
)

// lease is the TTL of the suite's live leases: far longer than any test.
const lease = time.Hour

// RunRegistry runs the registry's conformance suite. newStore is called
// once per subtest and must return an Opener of a fresh, empty store, so
// the subtests run in parallel; every handle must implement
// persist.Registry.
func RunRegistry(t *testing.T, newStore func(t *testing.T) Opener) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"JoinListLeave", testJoinListLeave},
		{"RenewAndExpire", testRenewAndExpire},
		{"JoinInvalid", testJoinInvalid},
		{"WorkerIDs", testWorkerIDs},
		{"WorkerBound", testWorkerBound},
		{"WorkerPreference", testWorkerPreference},
		{"WorkerLost", testWorkerLost},
		{"LeaveFreesKnownOnly", testLeaveFreesKnownOnly},
		{"ConcurrentWorkers", testConcurrentWorkers},
		{"Changes", testChanges},
		{"ConcurrentPublish", testConcurrentPublish},
		{"PublishFloorRaises", testPublishFloorRaises},
		{"GiveBackAfter", testGiveBackAfter},
		{"GiveBackBatchAfter", testGiveBackBatchAfter},
		{"CreateSnowflake", testCreateSnowflake},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// registry returns s as a persist.Registry.
func registry(t *testing.T, s persist.Store) persist.Registry {
	t.Helper()
	return as[persist.Registry](t, s)
}

func nodeInfo(id string) persist.NodeInfo {
	return persist.NodeInfo{ID: id, Addr: "127.0.0.1:" + id, Version: "v-" + id, Started: time.UnixMilli(1_700_000_000_123)}
}

func mustJoin(t *testing.T, r persist.Registry, id string, ttl time.Duration) int64 {
	t.Helper()
	head, err := r.Join(t.Context(), nodeInfo(id), ttl)
	if err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	return head
}

func mustRenew(t *testing.T, r persist.Registry, rn persist.Renewal) {
	t.Helper()
	if err := r.Renew(t.Context(), rn); err != nil {
		t.Fatalf("Renew(%+v): %v", rn, err)
	}
}

// renewOrJoin renews a node whose lease expired: a backend that dropped the
// registration answers ErrLeaseLost, and the node joins again first.
func renewOrJoin(t *testing.T, r persist.Registry, rn persist.Renewal) {
	t.Helper()
	err := r.Renew(t.Context(), rn)
	if errors.Is(err, persist.ErrLeaseLost) {
		mustJoin(t, r, rn.Node, rn.TTL)
		err = r.Renew(t.Context(), rn)
	}
	if err != nil {
		t.Fatalf("Renew(%+v) after the lease expired: %v", rn, err)
	}
}

// liveNodes lists the live nodes as "id/worker/seen".
func liveNodes(t *testing.T, r persist.Registry) []string {
	t.Helper()
	nodes, err := r.Nodes(t.Context())
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = fmt.Sprintf("%s/%d/%d", n.ID, n.Worker, n.Seen)
	}
	return out
}

func wantNodes(t *testing.T, r persist.Registry, want ...string) {
	t.Helper()
	if got := liveNodes(t, r); !slices.Equal(got, want) {
		t.Fatalf("live nodes (id/worker/seen) = %v, want %v", got, want)
	}
}

func mustLease(t *testing.T, r persist.Registry, req persist.WorkerRequest) persist.Worker {
	t.Helper()
	w, err := r.LeaseWorker(t.Context(), req)
	if err != nil {
		t.Fatalf("LeaseWorker(%+v): %v", req, err)
	}
	return w
}

// request asks for one of limit ids for node, its clock at now.
func request(node string, limit int, now int64) persist.WorkerRequest {
	return persist.WorkerRequest{Node: node, Limit: limit, TTL: lease, Now: now, Bound: now + lease.Milliseconds()}
}

func testJoinListLeave(t *testing.T, open Opener) {
	r := registry(t, open(t))
	other := registry(t, open(t))
	wantNodes(t, r)
	if head := mustJoin(t, r, "b", lease); head != 0 {
		t.Fatalf("Join on an empty log: head %d, want 0", head)
	}
	mustJoin(t, other, "a", lease)
	wantNodes(t, r, "a/-1/0", "b/-1/0")

	nodes, err := r.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	want := nodeInfo("a")
	if n.ID != want.ID || n.Addr != want.Addr || n.Version != want.Version || !n.Started.Equal(want.Started) {
		t.Fatalf("Nodes()[0] = %+v, want %+v", n.NodeInfo, want)
	}
	if n.Age < 0 || n.Age > time.Minute || n.Expires <= lease-time.Minute || n.Expires > lease {
		t.Fatalf("age %s, expires in %s; want a fresh lease of %s", n.Age, n.Expires, lease)
	}

	// Joining again under the same id replaces the registration.
	mustJoin(t, r, "a", lease)
	wantNodes(t, other, "a/-1/0", "b/-1/0")

	if err := other.Leave(t.Context(), "a", -1, 0); err != nil {
		t.Fatal(err)
	}
	wantNodes(t, r, "b/-1/0")
	wantErr(t, "Renew after Leave", r.Renew(t.Context(), persist.Renewal{Node: "a", TTL: lease, Worker: -1}), persist.ErrLeaseLost)
	wantErr(t, "Renew never joined", r.Renew(t.Context(), persist.Renewal{Node: "zz", TTL: lease, Worker: -1}), persist.ErrLeaseLost)
}

func testRenewAndExpire(t *testing.T, open Opener) {
	r := registry(t, open(t))
	mustJoin(t, r, "a", lease)
	mustJoin(t, r, "b", lease)
	mustRenew(t, r, persist.Renewal{Node: "a", TTL: lease, Seen: 7, Worker: -1})
	wantNodes(t, r, "a/-1/7", "b/-1/0")
	// A lease renewed for 0 has expired: the node is not live, yet still
	// registered, so it can renew.
	mustRenew(t, r, persist.Renewal{Node: "b", TTL: 0, Seen: 3, Worker: -1})
	wantNodes(t, r, "a/-1/7")
	renewOrJoin(t, r, persist.Renewal{Node: "b", TTL: lease, Seen: 4, Worker: -1})
	wantNodes(t, r, "a/-1/7", "b/-1/4")
	// Two renewals in the same millisecond are no lost lease.
	for range 3 {
		mustRenew(t, r, persist.Renewal{Node: "b", TTL: lease, Seen: 4, Worker: -1})
	}
	// A node joined with an expired lease is not live either.
	mustJoin(t, r, "c", 0)
	wantNodes(t, r, "a/-1/7", "b/-1/4")
}

func testJoinInvalid(t *testing.T, open Opener) {
	r := registry(t, open(t))
	for _, n := range []persist.NodeInfo{
		{ID: ""},
		{ID: strings.Repeat("n", persist.MaxNodeIDLen+1)},
		{ID: "ok", Addr: strings.Repeat("a", persist.MaxAddrLen+1)},
		{ID: "ok", Version: strings.Repeat("v", persist.MaxVersionLen+1)},
		{ID: "bad\xff"},
	} {
		_, err := r.Join(t.Context(), n, lease)
		wantErr(t, fmt.Sprintf("Join(%.20q)", n.ID), err, persist.ErrInvalid)
	}
	wantNodes(t, r)
}

// testWorkerIDs: ids are unique among live holders, run out with a clear
// error, and come back when a lease expires or its node leaves.
func testWorkerIDs(t *testing.T, open Opener) {
	r := registry(t, open(t))
	const limit = 3
	for _, id := range []string{"a", "b", "c", "d"} {
		mustJoin(t, r, id, lease)
	}
	got := map[int]string{}
	for _, id := range []string{"a", "b", "c"} {
		w := mustLease(t, r, request(id, limit, 1000))
		if w.ID < 0 || w.ID >= limit || got[w.ID] != "" {
			t.Fatalf("%s leased worker id %d; leased so far %v", id, w.ID, got)
		}
		if w.Prev != 0 {
			t.Fatalf("a new worker id has Prev %d, want 0", w.Prev)
		}
		got[w.ID] = id
	}
	_, err := r.LeaseWorker(t.Context(), request("d", limit, 1000))
	wantErr(t, "LeaseWorker with every id held", err, persist.ErrNoWorker)
	if err == nil || !strings.Contains(err.Error(), "all 3 worker ids") {
		t.Fatalf("error %q does not say how many ids there are", err)
	}
	wantNodes(t, r, fmt.Sprintf("a/%d/0", idOf(got, "a")), fmt.Sprintf("b/%d/0", idOf(got, "b")),
		fmt.Sprintf("c/%d/0", idOf(got, "c")), "d/-1/0")

	// b's lease expires (renewed for 0): d gets its id.
	mustRenew(t, r, persist.Renewal{Node: "b", TTL: 0, Worker: idOf(got, "b"), Bound: 1000 + lease.Milliseconds()})
	w := mustLease(t, r, request("d", limit, 1000+lease.Milliseconds()+1))
	if w.ID != idOf(got, "b") {
		t.Fatalf("d leased %d, want b's expired %d", w.ID, idOf(got, "b"))
	}
	// c leaves: its id is free for b (joined again: its lease expired).
	if err := r.Leave(t.Context(), "c", idOf(got, "c"), 1500); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, r, "b", lease)
	w = mustLease(t, r, request("b", limit, 2000))
	if w.ID != idOf(got, "c") || w.Prev != 1500 {
		t.Fatalf("b leased %+v, want c's id %d with the bound c left, 1500", w, idOf(got, "c"))
	}
	// A limit below the ids in the table: those above it are never given.
	mustJoin(t, r, "e", lease)
	_, err = r.LeaseWorker(t.Context(), request("e", 1, 5000))
	if idOf(got, "a") == 0 {
		wantErr(t, "LeaseWorker limit 1 with id 0 held", err, persist.ErrNoWorker)
	} else if err != nil {
		t.Fatalf("LeaseWorker limit 1: %v", err)
	}
}

func idOf(m map[int]string, node string) int {
	for id, n := range m {
		if n == node {
			return id
		}
	}
	return -1
}

// testWorkerBound: the bound only grows while held; the next holder is
// told the last one, also after its holder left with a lower one.
func testWorkerBound(t *testing.T, open Opener) {
	r := registry(t, open(t))
	mustJoin(t, r, "a", lease)
	mustJoin(t, r, "b", lease)
	w := mustLease(t, r, persist.WorkerRequest{Node: "a", Limit: 1, TTL: lease, Now: 100, Bound: 5000})
	for _, bound := range []int64{9000, 7000} { // 7000: lower, kept at 9000
		mustRenew(t, r, persist.Renewal{Node: "a", TTL: lease, Worker: w.ID, Bound: bound})
	}
	mustRenew(t, r, persist.Renewal{Node: "a", TTL: 0, Worker: w.ID, Bound: 8000})
	got := mustLease(t, r, persist.WorkerRequest{Node: "b", Limit: 1, TTL: lease, Now: 100, Bound: 200})
	if got.ID != w.ID || got.Prev != 9000 {
		t.Fatalf("after a's lease expired, b leased %+v, want id %d with Prev 9000 (the highest bound a recorded)", got, w.ID)
	}
	// b's lower bound did not lower the recorded one.
	if err := r.Leave(t.Context(), "b", got.ID, 9100); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, r, "a", lease)
	got = mustLease(t, r, persist.WorkerRequest{Node: "a", Limit: 1, TTL: lease, Now: 100, Bound: 200})
	if got.Prev != 9100 {
		t.Fatalf("after b left with bound 9100, Prev = %d", got.Prev)
	}
}

// testWorkerPreference: a free id whose bound has passed on the asking
// node's clock comes first, then a new id, then the free one whose bound
// is the oldest.
func testWorkerPreference(t *testing.T, open Opener) {
	r := registry(t, open(t))
	for _, id := range []string{"a", "b", "c", "d"} {
		mustJoin(t, r, id, lease)
	}
	const limit = 3
	wa := mustLease(t, r, request("a", limit, 1000))
	wb := mustLease(t, r, request("b", limit, 1000))
	// a leaves with a bound at 50,000, b at 20,000.
	if err := r.Leave(t.Context(), "a", wa.ID, 50_000); err != nil {
		t.Fatal(err)
	}
	if err := r.Leave(t.Context(), "b", wb.ID, 20_000); err != nil {
		t.Fatal(err)
	}
	// At 30,000 on c's clock, b's id has passed, a's has not.
	if w := mustLease(t, r, request("c", limit, 30_000)); w.ID != wb.ID || w.Prev != 20_000 {
		t.Fatalf("c leased %+v, want b's id %d (its bound 20000 passed)", w, wb.ID)
	}
	// At 10,000 on d's clock no free id has passed: a new one.
	w := mustLease(t, r, request("d", limit, 10_000))
	if w.ID == wa.ID || w.ID == wb.ID || w.Prev != 0 {
		t.Fatalf("d leased %+v, want a new id", w)
	}
	// Now only a's is free: taken although its bound is ahead.
	mustJoin(t, r, "e", lease)
	if w := mustLease(t, r, request("e", limit, 10_000)); w.ID != wa.ID || w.Prev != 50_000 {
		t.Fatalf("e leased %+v, want a's id %d with Prev 50000", w, wa.ID)
	}
}

// testWorkerLost: a node whose id went to another after its lease expired
// is told so on renewal (or that its registration is gone), and the other
// keeps the id.
func testWorkerLost(t *testing.T, open Opener) {
	r := registry(t, open(t))
	mustJoin(t, r, "a", lease)
	mustJoin(t, r, "b", lease)
	w := mustLease(t, r, request("a", 1, 1000))
	mustRenew(t, r, persist.Renewal{Node: "a", TTL: 0, Worker: w.ID, Bound: 2000})
	// Expired, not yet taken: a backend that keeps the registration lets
	// its renewal keep the id, so b gets none.
	if err := r.Renew(t.Context(), persist.Renewal{Node: "a", TTL: lease, Worker: w.ID, Bound: 2000}); err == nil {
		if _, err := r.LeaseWorker(t.Context(), request("b", 1, 5000)); !errors.Is(err, persist.ErrNoWorker) {
			t.Fatalf("b leased a renewed id: %v", err)
		}
		mustRenew(t, r, persist.Renewal{Node: "a", TTL: 0, Worker: w.ID, Bound: 2000})
	} else if !errors.Is(err, persist.ErrLeaseLost) {
		t.Fatalf("Renew after the lease expired: %v", err)
	}
	if got, want := mustLease(t, r, request("b", 1, 5000)), request("a", 1, 1000).Bound; got.ID != w.ID || got.Prev != want {
		t.Fatalf("b leased %+v, want a's expired id %d with the bound a leased it with, %d", got, w.ID, want)
	}
	err := r.Renew(t.Context(), persist.Renewal{Node: "a", TTL: lease, Seen: 9, Worker: w.ID, Bound: 3000})
	if errors.Is(err, persist.ErrLeaseLost) {
		mustJoin(t, r, "a", lease)
		err = r.Renew(t.Context(), persist.Renewal{Node: "a", TTL: lease, Seen: 9, Worker: w.ID, Bound: 3000})
	}
	wantErr(t, "Renew of a worker id taken by b", err, persist.ErrWorkerLost)
	wantNodes(t, r, "a/-1/9", fmt.Sprintf("b/%d/0", w.ID))
	// a leaving (it holds w, it thinks) does not free b's id, nor change
	// its bound.
	if err := r.Leave(t.Context(), "a", w.ID, 0); err != nil {
		t.Fatal(err)
	}
	wantNodes(t, r, fmt.Sprintf("b/%d/0", w.ID))
	if err := r.Leave(t.Context(), "b", w.ID, 4000); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, r, "c", lease)
	if got := mustLease(t, r, request("c", 1, 5000)); got.Prev != 4000 {
		t.Fatalf("after b left with 4000, Prev = %d", got.Prev)
	}
}

// testLeaveFreesKnownOnly: a node that holds a second worker id without
// knowing it (its lease's answer was lost, and it leased again) frees
// only the id it knows; the other keeps the bound recorded with it, never
// lowered to the leaving node's, and is free once its lease ends (with
// the node's on etcd).
func testLeaveFreesKnownOnly(t *testing.T, open Opener) {
	r := registry(t, open(t))
	// x held an id up to 80,000 on its clock, and left.
	mustJoin(t, r, "x", lease)
	wx := mustLease(t, r, request("x", 2, 1000))
	if err := r.Leave(t.Context(), "x", wx.ID, 80_000); err != nil {
		t.Fatal(err)
	}
	// a's clock is at 100,000: it leases x's id (bound passed), for no
	// time at all (expired at once where leases are per id), and the
	// answer is lost; it leases again at 1,000 and gets a new id.
	mustJoin(t, r, "a", lease)
	unknown := mustLease(t, r, persist.WorkerRequest{Node: "a", Limit: 2, TTL: 0, Now: 100_000, Bound: 100_000})
	if unknown.ID != wx.ID || unknown.Prev != 80_000 {
		t.Fatalf("a leased %+v, want x's id %d with Prev 80000", unknown, wx.ID)
	}
	known := mustLease(t, r, persist.WorkerRequest{Node: "a", Limit: 2, TTL: lease, Now: 1000, Bound: 1000})
	if known.ID == unknown.ID {
		t.Fatalf("a leased %d twice", known.ID)
	}
	// a leaves with its last time, 5,000, and the id it knows.
	if err := r.Leave(t.Context(), "a", known.ID, 5000); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, r, "b", lease)
	got := map[int]int64{}
	for range 2 {
		w := mustLease(t, r, persist.WorkerRequest{Node: "b", Limit: 2, TTL: lease, Now: 1_000_000, Bound: 1_000_000})
		got[w.ID] = w.Prev
	}
	if got[known.ID] != 5000 {
		t.Fatalf("the id a left: Prev %d, want the bound it left with, 5000 (b leased %v)", got[known.ID], got)
	}
	if prev, ok := got[unknown.ID]; !ok || prev < 100_000 {
		t.Fatalf("the id a held without knowing: Prev %d (leased: %v), want the bound recorded when a leased it, 100000: "+
			"Leave lowered it", prev, ok)
	}
}

// testPublishFloorRaises: a floor's Publish raises max_id in the same
// transaction, never lowering it; a step's leaves it alone.
func testPublishFloorRaises(t *testing.T, open Opener) {
	s := open(t)
	r := registry(t, s)
	ctx := t.Context()
	mustCreate(t, s, "t", 10, "")
	mustTake(t, s, "t", 10) // max_id 11
	if _, err := r.Publish(ctx, persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: 500}); err != nil {
		t.Fatal(err)
	}
	if got := mustTag(t, s, "t").MaxID; got != 501 {
		t.Fatalf("max_id after publishing the floor 500: %d, want 501", got)
	}
	if _, err := r.Publish(ctx, persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Publish(ctx, persist.Change{Kind: persist.ChangeStep, Tag: "t", Value: 100_000}); err != nil {
		t.Fatal(err)
	}
	if got := mustTag(t, s, "t").MaxID; got != 501 {
		t.Fatalf("max_id after a lower floor and a step: %d, want 501", got)
	}
	// A floor of a tag without a row is published all the same.
	if _, err := r.Publish(ctx, persist.Change{Kind: persist.ChangeFloor, Tag: "none", Value: 7}); err != nil {
		t.Fatal(err)
	}
}

// testGiveBackAfter: a give-back is refused when a floor of the tag at or
// above where it would lower max_id was published after what the node
// applied; other changes do not refuse it.
func testGiveBackAfter(t *testing.T, open Opener) {
	s := open(t)
	r := registry(t, s)
	ctx := t.Context()
	mustCreate(t, s, "t", 100, "")
	mustTake(t, s, "t", 100) // [1, 101)
	_, seen, err := r.Changes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := r.GiveBackAfter(ctx, "t", 101, 50, seen)
	if err != nil || !ok {
		t.Fatalf("GiveBackAfter with nothing published since: %v, %v", ok, err)
	}
	if got := mustTag(t, s, "t").MaxID; got != 50 {
		t.Fatalf("max_id after the give-back: %d, want 50", got)
	}
	mustTake(t, s, "t", 100) // [50, 150)
	// Published since seen: a step, another tag's floor, then t's floor
	// of 120, below max_id.
	for _, ch := range []persist.Change{
		{Kind: persist.ChangeStep, Tag: "t", Value: 7},
		{Kind: persist.ChangeFloor, Tag: "other", Value: 1_000_000},
		{Kind: persist.ChangeFloor, Tag: "t", Value: 120},
	} {
		if _, err := r.Publish(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := r.GiveBackAfter(ctx, "t", 150, 100, seen); err != nil || ok {
		t.Fatalf("GiveBackAfter to 100 past a floor of 120 published since: %v, %v; want refused", ok, err)
	}
	if got := mustTag(t, s, "t").MaxID; got != 150 {
		t.Fatalf("max_id after the refused give-back: %d, want 150", got)
	}
	if ok, err := r.GiveBackAfter(ctx, "t", 150, 121, seen); err != nil || !ok {
		t.Fatalf("GiveBackAfter to 121, above the floor 120: %v, %v", ok, err)
	}
	if got := mustTag(t, s, "t").MaxID; got != 121 {
		t.Fatalf("max_id after the give-back above the floor: %d, want 121", got)
	}
	// Not at from: not matched, nothing written.
	if ok, err := r.GiveBackAfter(ctx, "t", 999, 121, seen); err != nil || ok {
		t.Fatalf("GiveBackAfter from a max_id it is not at: %v, %v", ok, err)
	}
	// A node that has applied the floor gives back down to it.
	_, head, err := r.Changes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, s, "t", 100) // [121, 221)
	if ok, err := r.GiveBackAfter(ctx, "t", 221, 121, head); err != nil || !ok {
		t.Fatalf("GiveBackAfter having applied every change: %v, %v", ok, err)
	}
	// A log behind what the node applied (emptied by hand): refused.
	if ok, err := r.GiveBackAfter(ctx, "t", 121, 100, head+5); err != nil || ok {
		t.Fatalf("GiveBackAfter past the log's head: %v, %v; want refused", ok, err)
	}
	_, err = r.GiveBackAfter(ctx, "missing", 10, 5, head)
	wantErr(t, "GiveBackAfter of a tag without a row", err, persist.ErrNotFound)
	_, err = r.GiveBackAfter(ctx, "t", 10, 10, head)
	wantErr(t, "GiveBackAfter to == from", err, persist.ErrInvalid)
}

// testConcurrentWorkers: nodes on handles of their own lease at once; each
// gets an id no other holds.
func testConcurrentWorkers(t *testing.T, open Opener) {
	const nodes = 8
	handles := make([]persist.Registry, nodes)
	for i := range handles {
		handles[i] = registry(t, open(t))
	}
	ids := make([]int, nodes)
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for i := range nodes {
		wg.Go(func() {
			node := fmt.Sprintf("n%d", i)
			if _, err := handles[i].Join(t.Context(), nodeInfo(node), lease); err != nil {
				errs <- err
				return
			}
			w, err := handles[i].LeaseWorker(t.Context(), request(node, nodes, 1000))
			if err != nil {
				errs <- err
				return
			}
			ids[i] = w.ID
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != i {
			t.Fatalf("worker ids leased at once = %v, want 0..%d each once", ids, nodes-1)
		}
	}
}

func testChanges(t *testing.T, open Opener) {
	s := open(t)
	r := registry(t, s)
	ctx := t.Context()
	got, head, err := r.Changes(ctx, 0)
	if err != nil || len(got) != 0 || head != 0 {
		t.Fatalf("Changes on an empty log = %v, head %d, %v", got, head, err)
	}
	in := []persist.Change{
		{Kind: persist.ChangeFloor, Tag: "order", Value: 1_000_000, Node: "a"},
		{Kind: persist.ChangeStep, Tag: "order", Value: 50, Node: "a"},
		{Kind: persist.ChangeFloor, Tag: "用户", Value: math.MaxInt64 - 1, Node: ""},
	}
	for i, ch := range in {
		seq, err := r.Publish(ctx, ch)
		if err != nil || seq != int64(i+1) {
			t.Fatalf("Publish(%+v) = %d, %v; want %d", ch, seq, err, i+1)
		}
		in[i].Seq = seq
	}
	for after := int64(0); after <= 3; after++ {
		got, head, err := r.Changes(ctx, after)
		if err != nil || head != 3 || !slices.Equal(got, in[after:]) {
			t.Fatalf("Changes(%d) = %+v, head %d, %v; want %+v, head 3", after, got, head, err, in[after:])
		}
	}
	if mustJoin(t, r, "late", lease) != 3 {
		t.Fatal("Join does not answer the log's head")
	}
	_, err = r.Publish(ctx, persist.Change{Kind: persist.ChangeFloor, Tag: "", Value: 1})
	wantErr(t, "Publish of an empty tag", err, persist.ErrInvalid)
}

// testConcurrentPublish: publishers on several handles get every number
// once, and a reader that polls meanwhile only ever sees a contiguous log:
// no number becomes visible before the ones below it.
func testConcurrentPublish(t *testing.T, open Opener) {
	const handles, each = 4, 15
	reader := registry(t, open(t))
	pubs := make([]persist.Registry, handles)
	for i := range pubs {
		pubs[i] = registry(t, open(t))
	}
	// The reader reads after each publish it is told of (and once at the
	// end), while the other publishers are at work.
	published := make(chan struct{}, 1)
	done := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		var seen int64
		for last := false; ; {
			select {
			case <-published:
			case <-done:
				last = true
			}
			got, _, err := reader.Changes(t.Context(), seen)
			if err != nil {
				readErr <- err
				return
			}
			for _, ch := range got {
				if ch.Seq != seen+1 {
					readErr <- fmt.Errorf("after %d the reader saw %d first", seen, ch.Seq)
					return
				}
				seen = ch.Seq
			}
			if last {
				if seen != handles*each {
					readErr <- fmt.Errorf("the reader saw %d changes at the end, want %d", seen, handles*each)
				}
				readErr <- nil
				return
			}
		}
	}()
	var wg sync.WaitGroup
	seqs := make(chan int64, handles*each)
	errs := make(chan error, handles*each)
	for i, p := range pubs {
		wg.Go(func() {
			for j := range each {
				seq, err := p.Publish(t.Context(), persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: int64(i*1000 + j)})
				if err != nil {
					errs <- err
					return
				}
				seqs <- seq
				select {
				case published <- struct{}{}:
				default:
				}
			}
		})
	}
	wg.Wait()
	close(done)
	close(seqs)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []int64
	for s := range seqs {
		all = append(all, s)
	}
	slices.Sort(all)
	for i, s := range all {
		if s != int64(i+1) {
			t.Fatalf("sequence numbers published at once: %v, want 1..%d", all, handles*each)
		}
	}
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
}

func testCreateSnowflake(t *testing.T, open Opener) {
	s := open(t)
	r := registry(t, s)
	ctx := t.Context()
	const layout = "epoch=1288834974657,unit=1ms,bits=41/10/12"
	sf := persist.Tag{Name: "sf", Step: 1000, Description: "snow", Mode: persist.ModeSnowflake, Layout: layout}
	if created, err := r.CreateTag(ctx, sf); err != nil || !created {
		t.Fatalf("CreateTag(snowflake) = %v, %v; want true", created, err)
	}
	if created, err := r.CreateTag(ctx, sf); err != nil || created {
		t.Fatalf("CreateTag of an existing tag = %v, %v; want false", created, err)
	}
	mustCreate(t, s, "seg", 10, "")
	if created, err := r.CreateTag(ctx, persist.Tag{Name: "seg", Step: 10, Mode: persist.ModeSnowflake, Layout: layout}); err != nil || created {
		t.Fatalf("CreateTag(snowflake) over a segment tag = %v, %v; want false", created, err)
	}
	if created, err := r.CreateTag(ctx, persist.Tag{Name: "plain", Step: 7}); err != nil || !created {
		t.Fatalf("CreateTag without a mode = %v, %v", created, err)
	}
	got := mustTag(t, s, "sf")
	if got.Mode != persist.ModeSnowflake || got.Layout != layout || got.MaxID != 1 || got.Step != 1000 || got.Description != "snow" {
		t.Fatalf("Tag(sf) = %+v", got)
	}
	tags, err := s.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, tg := range tags {
		modes = append(modes, tg.Name+"="+tg.Mode)
	}
	if want := []string{"plain=", "seg=", "sf=snowflake"}; !slices.Equal(modes, want) {
		t.Fatalf("Tags() modes = %v, want %v", modes, want)
	}
	for _, bad := range []persist.Tag{
		{Name: "", Step: 1, Mode: persist.ModeSnowflake},
		{Name: "x", Step: 0, Mode: persist.ModeSnowflake},
		{Name: "x", Step: 1, Mode: persist.ModeSnowflake, Layout: strings.Repeat("l", persist.MaxLayoutLen+1)},
	} {
		_, err := r.CreateTag(ctx, bad)
		wantErr(t, fmt.Sprintf("CreateTag(%+v)", bad), err, persist.ErrInvalid)
	}
}

// testRegistryTablesMissing: without the registry's tables (schema
// creation off) the store works, tags have no mode, every registry call
// says ErrNoCluster, and one warning tells how to create the tables. A
// backend whose registry is not SQL tables (it cannot be missing) has it
// even when opened without schema creation.
func testRegistryTablesMissing(t *testing.T, db *DB) {
	if _, ok := db.raw.(SQL); !ok {
		r := registry(t, db.OpenWith(t, func(o *persist.Options) { o.CreateSchema = false }))
		mustJoin(t, r, "a", lease)
		wantNodes(t, r, "a/-1/0")
		return
	}
	first := db.Open(t)
	mustCreate(t, first, "t", 10, "")
	if _, err := registry(t, first).CreateTag(t.Context(), persist.Tag{Name: "sf", Step: 1, Mode: persist.ModeSnowflake, Layout: "l"}); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []string{"leaf_node", "leaf_worker", "leaf_change", "leaf_mode"} {
		db.SQL(t).Exec(t, `DROP TABLE `+tb)
	}
	var logs logbuf.Buffer
	s := db.OpenWith(t, func(o *persist.Options) {
		o.CreateSchema = false
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if n := strings.Count(logs.String(), "cluster features are off"); n != 1 || !strings.Contains(logs.String(), "CREATE TABLE IF NOT EXISTS leaf_node") {
		t.Fatalf("%d warnings about the missing cluster tables, want 1 with their CREATE TABLE; logs:\n%s", n, logs.String())
	}
	// Each statement on a line of its own, with no \n escapes to undo
	// before it can be run.
	if got := strings.Count(logs.String(), "to turn cluster features on, run"); got < 4 || strings.Contains(logs.String(), `\n`) {
		t.Fatalf("%d lines of statements (want one per table), or escaped newlines; logs:\n%s", got, logs.String())
	}
	r := registry(t, s)
	ctx := t.Context()
	_, err := r.Join(ctx, nodeInfo("a"), lease)
	wantErr(t, "Join", err, persist.ErrNoCluster)
	_, err = r.Nodes(ctx)
	wantErr(t, "Nodes", err, persist.ErrNoCluster)
	_, err = r.Publish(ctx, persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: 5})
	wantErr(t, "Publish", err, persist.ErrNoCluster)
	_, err = r.CreateTag(ctx, persist.Tag{Name: "sf2", Step: 1, Mode: persist.ModeSnowflake})
	wantErr(t, "CreateTag", err, persist.ErrNoCluster)
	if got := mustTag(t, s, "sf"); got.Mode != "" {
		t.Fatalf("Tag(sf) without leaf_mode = %+v, want no mode", got)
	}
	wantTake(t, s, "t", 0, persist.Range{Start: 1, End: 11, Step: 10})
}
