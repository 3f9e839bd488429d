package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/snowflake"
)

// The interleavings that broke floors and worker id bounds, each driven on
// cue: a pause past the lease, a shutdown that gives back IDs under a
// floor it never applied, and a worker id leased without the node knowing.
// (A floor reaching a dedicated INCRBY or a first load in flight is in
// package segment's tests.)

// expireLease ends node's lease in the store now, as the store does for a
// server that stopped renewing: renewed for no time.
func expireLease(t *testing.T, srv *server, node string) {
	t.Helper()
	st := srv.node.Status()
	if err := srv.store.Renew(t.Context(), persist.Renewal{Node: node, TTL: 0, Seen: st.Applied, Worker: st.Worker}); err != nil {
		t.Fatal(err)
	}
}

// TestPausePastLease: a server stopped (SIGSTOP, a suspended machine) past
// its lease, while its lapse timer has not run: a floor set meanwhile
// through another server is acknowledged at once (the stopped server is
// no longer live), and the first request the stopped server reads when it
// runs again is refused, not served from its cache below the floor. Once
// it has renewed and read the floor, it serves above it.
func TestPausePastLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.lease = 10 * time.Second
	su.now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a := newServer(t, path, "a", su)
	b := newServer(t, path, "b", defaults())
	if id := next(t, a.alloc, "t"); id > 100 {
		t.Fatalf("a's first ID %d: the test needs IDs below the floor cached", id)
	}

	// a stops for longer than its lease: its clock moves on, its timers
	// do not run, the store expires its registration.
	a.clock.Add(su.lease)
	expireLease(t, a, "a")
	const f = 10_000
	if err := floor(t, b, "t", f); err != nil {
		t.Fatalf("the floor with a's lease over: %v", err)
	}

	// a runs again: the request it reads now is refused.
	id, err := a.alloc.Next(t.Context(), "t")
	if err == nil {
		t.Fatalf("a served %d from its cache after its lease ran out and the floor %d was acknowledged", id, f)
	}
	if !errors.Is(err, cluster.ErrLapsed) {
		t.Fatalf("a's request after its lease ran out: %v, want ErrLapsed", err)
	}
	// Through the connection layer's path too: admitted on the clock read
	// after the read, then taken without waiting.
	tag, err := a.alloc.Lookup(t.Context(), []byte("t"))
	if err != nil {
		t.Fatal(err)
	}
	a.alloc.Admit(a.clock.Now())
	if id, ok := tag.TryNextN(1); ok {
		t.Fatalf("TryNextN served %d after the lease ran out", id)
	}
	if st := a.node.Status(); st.Serving {
		t.Fatalf("a's status says serving after its lease ran out: %+v", st)
	}

	// Its heartbeat renews the lease and applies the floor first.
	if err := a.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id := next(t, a.alloc, "t"); id <= f {
		t.Fatalf("a handed out %d after renewing, below the floor %d it read", id, f)
	}
	if st := a.node.Status(); !st.Serving || st.Lapses != 1 {
		t.Fatalf("a's status after renewing: serving %v, %d lapses; want serving, 1 lapse", st.Serving, st.Lapses)
	}
}

// TestAdmitInsideLease: requests read inside the lease are served, and
// the lease's end is checked on both readings of the clock: the
// monotonic one (a process stopped) and the wall one (a machine
// suspended, which the monotonic clock does not count).
func TestAdmitInsideLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.lease = 10 * time.Second
	a := newServer(t, path, "a", su) // real clock
	tag, err := a.alloc.Lookup(t.Context(), []byte("t"))
	if err != nil {
		t.Fatal(err)
	}
	next(t, a.alloc, "t")
	a.alloc.Admit(time.Now())
	if _, ok := tag.TryNextN(1); !ok {
		t.Fatal("a request admitted inside the lease was not served")
	}
	// The wall clock past the lease's end, the monotonic one not: a
	// machine that was suspended.
	woke := time.Now().Add(su.lease).Round(0) // Round(0): the wall reading alone
	a.alloc.Admit(woke)
	if _, ok := tag.TryNextN(1); ok {
		t.Fatal("served after the wall clock passed the lease's end (a suspended machine)")
	}
	if err := a.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.alloc.Admit(time.Now())
	if _, ok := tag.TryNextN(1); !ok {
		t.Fatal("not served once the lease was renewed")
	}
}

// TestShutdownUnderUnappliedFloor: a server caches IDs of a tag, a floor
// inside them is set through another server and waits for its
// confirmation, and the server shuts down without having read it. Its
// give-back must not lower max_id below the floor: the floor is answered
// once the server has left, and a server started afterwards hands out
// IDs above it. A server that did read the floor gives back down to it.
func TestShutdownUnderUnappliedFloor(t *testing.T) {
	for _, applied := range []bool{false, true} {
		name := "NotApplied"
		if applied {
			name = "Applied"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leaf.db")
			published := make(chan int64, 1)
			a := newServer(t, path, "a", defaults()) // beats only when told
			bsu := defaults()
			bsu.prepare = func(reg *pausable) { reg.published = published }
			b := newServer(t, path, "b", bsu)
			for range 20 { // past the prefetch: [1, 101) current, [101, 201) next
				next(t, a.alloc, "t")
			}
			if in, _ := a.alloc.Info("t"); !in.NextReady {
				waitNext(t, a, "t")
			}
			const f = 150 // inside a's next segment; max_id stays 201
			done := make(chan error, 1)
			go func() { done <- floor(t, b, "t", f) }()
			<-published
			if applied {
				if err := a.node.Beat(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			a.shutdown(t)
			if err := <-done; err != nil {
				t.Fatalf("the floor once a left: %v", err)
			}
			row, err := b.store.Tag(t.Context(), "t")
			if err != nil {
				t.Fatal(err)
			}
			if row.MaxID <= f {
				t.Fatalf("max_id %d after a's shutdown: below the acknowledged floor %d", row.MaxID, f)
			}
			if applied && row.MaxID != f+1 {
				t.Fatalf("max_id %d after the shutdown of a server that applied the floor: want %d, given back down to it", row.MaxID, f+1)
			}
			c := newServer(t, path, "c", defaults())
			if id := next(t, c.alloc, "t"); id <= f {
				t.Fatalf("a server started after the floor %d was acknowledged handed out %d", f, id)
			}
		})
	}
}

// TestShutdownRacesFloor: the give-back is weighed before a floor is
// published and reaches the store after it: the store refuses it.
func TestShutdownRacesFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	release := make(chan struct{})
	asked := make(chan struct{}, 4)
	asu := defaults()
	asu.prepare = func(reg *pausable) {
		reg.beforeGive = func() error {
			asked <- struct{}{}
			<-release
			return nil
		}
	}
	a := newServer(t, path, "a", asu)
	b := newServer(t, path, "b", defaults())
	next(t, a.alloc, "t") // [1, 101)
	closed := make(chan error, 1)
	go func() { closed <- a.alloc.Close(context.Background()) }()
	<-asked // a gives back [2, 101): weighed, not yet sent
	const f = 50
	if _, err := b.alloc.Floor(t.Context(), "t", f); err != nil {
		t.Fatal(err)
	}
	if _, err := b.reg.Publish(t.Context(), persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: f, Node: "b"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if row, err := b.store.Tag(t.Context(), "t"); err != nil || row.MaxID <= f {
		t.Fatalf("max_id after a give-back that raced the floor %d: %+v, %v", f, row, err)
	}
}

// TestLeaveKeepsUnknownWorkerBound: a worker id's lease commits but its
// answer is lost, so the node holds it without knowing; the id's previous
// holder had a clock ahead. When the node leaves, that id keeps the bound
// its holder left: the next holder, with a clock behind, issues nothing at
// or below the previous holder's IDs.
func TestLeaveKeepsUnknownWorkerBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	su := defaults()
	su.layout.WorkerBits, su.layout.TimeBits = 1, 50 // two worker ids
	// x, its clock two hours ahead, issues with worker id 0 and leaves.
	xsu := su
	xsu.now = t0.Add(2 * time.Hour)
	x := newServer(t, path, "x", xsu)
	if _, err := x.reg.Registry.CreateTag(t.Context(), persist.Tag{Name: "sf", Step: 1, Mode: persist.ModeSnowflake, Layout: su.layout.String()}); err != nil {
		t.Fatal(err)
	}
	xw := x.node.Status().Worker
	xLast, _ := su.layout.Decode(next(t, x.alloc, "sf"))
	x.shutdown(t)
	// y holds the other id.
	su.now = t0
	y := newServer(t, path, "y", su)
	if w := y.node.Status().Worker; w == xw || w < 0 {
		t.Fatalf("y's worker id %d (x had %d)", w, xw)
	}
	// a leases x's id (the only one free), and the answer is lost; then
	// none is free.
	asu := su
	asu.prepare = func(reg *pausable) { reg.loseLeases = 1 }
	a := newServer(t, path, "a", asu)
	if err := a.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := a.node.Status(); st.Worker != -1 {
		t.Fatalf("a's worker id %d: the test needs a without one it knows", st.Worker)
	}
	a.shutdown(t)
	// The id a held without knowing expires with its lease.
	expireWorker(t, path, xw)

	z := newServer(t, path, "z", su)
	if w := z.node.Status().Worker; w != xw {
		t.Fatalf("z's worker id %d, want x's %d", w, xw)
	}
	id, err := z.alloc.Next(t.Context(), "sf")
	if err != nil {
		if !errors.Is(err, snowflake.ErrClockBack) {
			t.Fatalf("z's Snowflake ID: %v", err)
		}
		return // refused until its clock passes x's IDs: right
	}
	if p, _ := su.layout.Decode(id); p.Worker == xw && !p.Time.After(xLast.Time) {
		t.Fatalf("z issued %d with worker id %d at %s, not after x's last ID on it at %s: the bound was lowered",
			id, xw, p.Time, xLast.Time)
	}
}

// expireWorker ends the lease of worker id w in the SQLite file at path,
// as time does.
func expireWorker(t *testing.T, path string, w int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `UPDATE leaf_worker SET expires = 0 WHERE worker_id = ?`, w); err != nil {
		t.Fatal(err)
	}
}

// waitNext waits until srv has tag's next segment loaded.
func waitNext(t *testing.T, srv *server, tag string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if in, _ := srv.alloc.Info(tag); in.NextReady {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tag %s's next segment not loaded within a minute", tag)
		}
		time.Sleep(time.Millisecond)
	}
}
