package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/snowflake"
)

// server is one leaf server's parts: its own store handle on the shared
// file, its allocator, its Snowflake generator and its node.
type server struct {
	store *sqlite.Store
	reg   *pausable
	alloc *segment.Allocator
	gen   *snowflake.Generator
	node  *cluster.Node
	clock *clock
	lapse *lapses
}

type setup struct {
	layout    snowflake.Layout
	heartbeat time.Duration // 0: an hour, the test beats by hand
	lease     time.Duration
	ack       time.Duration
	nodeTime  time.Duration       // cluster.node_timeout; 0: the default
	now       time.Time           // the node's and generator's clock starts here; zero: real time
	prepare   func(reg *pausable) // when set, runs before the node starts (faults on cue)
	log       *slog.Logger        // the node's log; nil discards it
}

func defaults() setup {
	return setup{layout: snowflake.DefaultLayout(), lease: time.Hour, ack: 30 * time.Second}
}

func openStore(t *testing.T, path string, create bool) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, persist.Options{CreateSchema: create, BusyTimeout: 30 * time.Second, QueryTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newServer starts a server on the SQLite file at path.
func newServer(t *testing.T, path string, name string, su setup) *server {
	t.Helper()
	srv := &server{store: openStore(t, path, true), lapse: &lapses{}}
	srv.clock = newClock(su.now)
	srv.reg = &pausable{Registry: srv.store, clock: srv.clock}
	srv.gen = snowflake.New(snowflake.Options{Layout: su.layout, MaxClockBack: 5 * time.Millisecond, Now: srv.clock.Now, Sleep: srv.clock.Sleep})
	ao := segment.DefaultOptions()
	ao.DefaultStep = 100
	ao.LoadTimeout = 30 * time.Second
	ao.Modes = cluster.Modes(srv.gen)
	// The node's clock: the allocator checks the lease on it.
	ao.Now = srv.clock.Now
	srv.alloc = segment.New(srv.store, ao)
	if err := srv.alloc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	hb := su.heartbeat
	if hb == 0 {
		hb = time.Hour
	}
	srv.node = cluster.New(srv.reg, srv.alloc, srv.gen, cluster.Options{
		Heartbeat: hb, Lease: su.lease, AckTimeout: su.ack, NodeTimeout: su.nodeTime,
		Node: persist.NodeInfo{ID: name, Addr: "127.0.0.1:" + name, Version: "test"},
		Now:  srv.clock.Now, AfterFunc: srv.lapse.AfterFunc, Logger: su.log,
	})
	if su.prepare != nil {
		su.prepare(srv.reg)
	}
	srv.node.Start(t.Context())
	t.Cleanup(func() { srv.shutdown(t) })
	return srv
}

// shutdown stops srv as main does on SIGTERM: the allocator gives back its
// unused IDs while the node is registered, then the node leaves.
func (srv *server) shutdown(t *testing.T) {
	t.Helper()
	if err := srv.alloc.Close(context.Background()); err != nil {
		t.Errorf("giving back unused IDs: %v", err)
	}
	if err := srv.node.Leave(context.Background()); err != nil {
		t.Errorf("leave: %v", err)
	}
}

// clock is the nodes' and generators' clock: real time when started at
// zero, else a clock that moves only when told (or slept on).
type clock struct {
	mu   sync.Mutex
	fake bool
	now  time.Time
}

func newClock(start time.Time) *clock { return &clock{fake: !start.IsZero(), now: start} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fake {
		return time.Now()
	}
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	fake := c.fake
	if fake {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	if !fake {
		time.Sleep(d)
	}
	return ctx.Err()
}

// lapses records the lapse the node arms, to fire it on cue.
type lapses struct {
	mu    sync.Mutex
	after []time.Duration
	fire  func()
}

func (l *lapses) AfterFunc(d time.Duration, f func()) func() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.after = append(l.after, d)
	l.fire = f
	return func() bool { return true }
}

// Fire runs the last lapse armed; it returns after how long it was armed.
func (l *lapses) Fire() time.Duration {
	l.mu.Lock()
	f, d := l.fire, l.after[len(l.after)-1]
	l.mu.Unlock()
	f()
	return d
}

// pausable is a registry that can be made unreachable (a paused store),
// and records when renewals were sent, on the node's clock. It injects
// faults on cue: LeaseWorker answers lost after their commit (loseLeases),
// and publishes reported (published).
type pausable struct {
	persist.Registry
	clock *clock

	mu         sync.Mutex
	paused     bool
	renewed    []time.Time
	loseLeases int          // LeaseWorker answers to lose, after the commit
	published  chan int64   // told each change published, when set
	beforeGive func() error // runs before each GiveBackAfter, when set
}

var errLost = fmt.Errorf("%w: the connection broke after the commit was sent", persist.ErrUnavailable)

func (p *pausable) LeaseWorker(ctx context.Context, r persist.WorkerRequest) (persist.Worker, error) {
	w, err := p.Registry.LeaseWorker(ctx, r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.loseLeases > 0 {
		p.loseLeases--
		return persist.Worker{}, errLost
	}
	return w, err
}

func (p *pausable) Publish(ctx context.Context, c persist.Change) (int64, error) {
	seq, err := p.Registry.Publish(ctx, c)
	p.mu.Lock()
	ch := p.published
	p.mu.Unlock()
	if err == nil && ch != nil {
		ch <- seq
	}
	return seq, err
}

func (p *pausable) GiveBackAfter(ctx context.Context, tag string, from, to, seen int64) (bool, error) {
	p.mu.Lock()
	hook := p.beforeGive
	p.mu.Unlock()
	if hook != nil {
		if err := hook(); err != nil {
			return false, err
		}
	}
	return p.Registry.GiveBackAfter(ctx, tag, from, to, seen)
}

var errPaused = fmt.Errorf("%w: paused", persist.ErrUnavailable)

func (p *pausable) Pause(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
}

func (p *pausable) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *pausable) Renew(ctx context.Context, r persist.Renewal) error {
	p.mu.Lock()
	p.renewed = append(p.renewed, p.clock.Now())
	paused := p.paused
	p.mu.Unlock()
	if paused {
		return errPaused
	}
	return p.Registry.Renew(ctx, r)
}

func (p *pausable) Changes(ctx context.Context, after int64) ([]persist.Change, int64, error) {
	if p.isPaused() {
		return nil, 0, errPaused
	}
	return p.Registry.Changes(ctx, after)
}

func (p *pausable) lastRenewal() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.renewed[len(p.renewed)-1]
}

func next(t *testing.T, a *segment.Allocator, tag string) int64 {
	t.Helper()
	id, err := a.Next(t.Context(), tag)
	if err != nil {
		t.Fatalf("next %s: %v", tag, err)
	}
	return id
}

// floor raises the floor through srv, as LEAF.FLOOR does: in the store and
// on srv, then announced.
func floor(t *testing.T, srv *server, tag string, n int64) error {
	t.Helper()
	if _, err := srv.alloc.Floor(t.Context(), tag, n); err != nil {
		t.Fatal(err)
	}
	return srv.node.Announce(t.Context(), persist.ChangeFloor, tag, n)
}

// TestFloorHoldsEverywhere: two and three servers share a store, each
// with IDs of the tag cached below the floor; once the floor set through
// one is confirmed, none hands out an ID at or below it.
func TestFloorHoldsEverywhere(t *testing.T) {
	for _, count := range []int{2, 3} {
		t.Run(fmt.Sprintf("%dServers", count), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leaf.db")
			su := defaults()
			su.heartbeat = 20 * time.Millisecond
			var servers []*server
			for i := range count {
				servers = append(servers, newServer(t, path, fmt.Sprintf("s%d", i), su))
			}
			for _, s := range servers {
				next(t, s.alloc, "t") // each caches a segment
			}
			const f = 10_000
			for i, s := range servers[1:] {
				if in, _ := s.alloc.Info("t"); in.Segments[in.Pos].Max > f {
					t.Fatalf("server %d caches up to %d: the test needs IDs below the floor cached", i+1, in.Segments[in.Pos].Max)
				}
			}
			if err := floor(t, servers[0], "t", f); err != nil {
				t.Fatalf("floor not confirmed: %v", err)
			}
			for i, s := range servers {
				for range 150 { // across segments
					if id := next(t, s.alloc, "t"); id <= f {
						t.Fatalf("server %d handed out %d after the floor %d was confirmed", i, id, f)
					}
				}
			}
		})
	}
}

// TestUnconfirmedNamed: a live server that does not read the log (its
// heartbeat stalled) is named in the error, and only it; the floor is in
// the store, and the server applies it before anything else once it beats
// again.
func TestUnconfirmedNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.ack = 5 * time.Second // c confirms within a heartbeat of 20ms
	a := newServer(t, path, "a", su)
	b := newServer(t, path, "b", su) // beats only by hand
	su.heartbeat = 20 * time.Millisecond
	c := newServer(t, path, "c", su)
	next(t, b.alloc, "t")
	next(t, c.alloc, "t")

	err := floor(t, a, "t", 5000)
	if !errors.Is(err, cluster.ErrUnconfirmed) || !strings.Contains(err.Error(), "b (127.0.0.1:b)") || strings.Contains(err.Error(), "c (") {
		t.Fatalf("Announce with b stalled: %v; want ErrUnconfirmed naming b, not c", err)
	}
	if row, err := a.store.Tag(t.Context(), "t"); err != nil || row.MaxID <= 5000 {
		t.Fatalf("row after the unconfirmed floor: %+v, %v", row, err)
	}
	if id := next(t, c.alloc, "t"); id <= 5000 {
		t.Fatalf("c handed out %d after confirming the floor 5000", id)
	}
	if err := b.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id := next(t, b.alloc, "t"); id <= 5000 {
		t.Fatalf("b handed out %d after reading the floor 5000", id)
	}
	if st := a.node.Status(); st.Unconfirmed != 1 {
		t.Fatalf("a's unconfirmed count %d", st.Unconfirmed)
	}
}

// TestLapse: a server whose store stops answering stops serving cached
// segment IDs and Snowflake IDs when its lease ends less the margin,
// counted from before its last renewal was sent, so before the store could
// give its lease (and worker id) to another; once the store answers, it
// reads the floor set meanwhile before serving again.
func TestLapse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.lease = 10 * time.Second
	su.now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	s := newServer(t, path, "s", su)
	if _, err := s.reg.Registry.CreateTag(t.Context(), persist.Tag{Name: "sf", Step: 1, Mode: persist.ModeSnowflake, Layout: su.layout.String()}); err != nil {
		t.Fatal(err)
	}
	before := next(t, s.alloc, "t")
	next(t, s.alloc, "sf")

	s.clock.Add(time.Second)
	if err := s.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	sent := s.reg.lastRenewal()
	s.reg.Pause(true)
	s.clock.Add(time.Second)
	if err := s.node.Beat(t.Context()); !errors.Is(err, errPaused) {
		t.Fatalf("Beat on a paused store: %v", err)
	}
	next(t, s.alloc, "t") // within the lease: served from the cache
	next(t, s.alloc, "sf")

	// The lapse was armed by the last successful beat, to end the lease
	// less the margin after its renewal was sent.
	armed := s.lapse.Fire()
	if end := sent.Add(armed); !end.Before(sent.Add(su.lease)) || armed != su.lease-su.lease/10 {
		t.Fatalf("lapse armed for %s after the renewal: want %s, before the store's lease of %s", armed, su.lease-su.lease/10, su.lease)
	}
	_, err := s.alloc.Next(t.Context(), "t")
	if !errors.Is(err, cluster.ErrLapsed) {
		t.Fatalf("segment ID after the lapse: %v, want ErrLapsed", err)
	}
	if _, err := s.alloc.Next(t.Context(), "sf"); !errors.Is(err, snowflake.ErrLease) {
		t.Fatalf("Snowflake ID after the lapse: %v, want ErrLease", err)
	}
	if st := s.node.Status(); st.Serving || st.Lapses != 1 || st.LeaseLeft != 0 {
		t.Fatalf("status after the lapse: %+v", st)
	}

	// Meanwhile another server raised the floor; this one reads it before
	// it serves again.
	other := openStore(t, path, true)
	if _, _, err := other.RaiseFloor(t.Context(), "t", 50_000); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Publish(t.Context(), persist.Change{Kind: persist.ChangeFloor, Tag: "t", Value: 50_000}); err != nil {
		t.Fatal(err)
	}
	s.reg.Pause(false)
	if err := s.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id := next(t, s.alloc, "t"); id <= 50_000 || before >= 50_000 {
		t.Fatalf("first segment ID after the lapse: %d, want above the floor 50000 set meanwhile", id)
	}
	next(t, s.alloc, "sf")
}

// TestWorkerIDs: worker ids are unique among live servers; with all taken
// a Snowflake request says so; one freed goes to the next server, which
// starts after the bound its holder left.
func TestWorkerIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.layout.WorkerBits, su.layout.TimeBits = 1, 50 // two worker ids
	a := newServer(t, path, "a", su)
	b := newServer(t, path, "b", su)
	c := newServer(t, path, "c", su)
	if _, err := a.reg.Registry.CreateTag(t.Context(), persist.Tag{Name: "sf", Step: 1, Mode: persist.ModeSnowflake, Layout: su.layout.String()}); err != nil {
		t.Fatal(err)
	}
	wa, wb := a.node.Status().Worker, b.node.Status().Worker
	if wa < 0 || wb < 0 || wa == wb {
		t.Fatalf("worker ids a=%d b=%d, want two different", wa, wb)
	}
	_, err := c.alloc.Next(t.Context(), "sf")
	if !errors.Is(err, snowflake.ErrNoWorker) || !strings.Contains(err.Error(), "all 2 worker ids are leased to live servers") {
		t.Fatalf("Snowflake ID with every worker id taken: %v", err)
	}
	if st := c.node.Status(); st.Worker != -1 || !strings.Contains(st.NoWorker, "all 2") {
		t.Fatalf("c's status: %+v", st)
	}
	last := next(t, a.alloc, "sf")
	if err := a.node.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.node.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.node.Status().Worker; got != wa {
		t.Fatalf("c's worker id after a left: %d, want %d", got, wa)
	}
	id := next(t, c.alloc, "sf")
	p, _ := su.layout.Decode(id)
	lp, _ := su.layout.Decode(last)
	if p.Worker != wa || !p.Time.After(lp.Time) {
		t.Fatalf("c's first ID %+v, want worker %d after a's last %+v", p, wa, lp)
	}
}

// TestRestartClockBack: a server killed (no Leave) and restarted with its
// clock 10s back, on the same worker id, repeats no ID: it refuses until
// its clock passes the bound the id's lease recorded.
func TestRestartClockBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	su := defaults()
	su.layout.WorkerBits, su.layout.TimeBits = 1, 50
	su.lease = 3 * time.Second
	su.now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	hold := newServer(t, path, "hold", defaults()) // holds the other id (real clock, long lease)
	if _, err := hold.store.CreateTag(t.Context(), persist.Tag{Name: "sf", Step: 1, Mode: persist.ModeSnowflake, Layout: su.layout.String()}); err != nil {
		t.Fatal(err)
	}

	first := newServer(t, path, "first", su)
	seen := map[int64]bool{}
	for range 3 {
		for range 100 {
			seen[next(t, first.alloc, "sf")] = true
		}
		first.clock.Add(time.Second)
	}
	worker := first.node.Status().Worker
	// Killed: no Leave. Its lease expires (renewed for 0 here, rather than
	// waiting for the store's clock), its bound stays.
	if err := first.store.Renew(t.Context(), persist.Renewal{Node: "first", Worker: worker}); err != nil {
		t.Fatal(err)
	}
	restart := su
	restart.now = first.clock.Now().Add(-10 * time.Second)
	second := newServer(t, path, "second", restart)
	if got := second.node.Status().Worker; got != worker {
		t.Fatalf("restarted server leased %d, want the killed one's %d", got, worker)
	}
	if _, err := second.alloc.Next(t.Context(), "sf"); !errors.Is(err, snowflake.ErrClockBack) {
		t.Fatalf("Snowflake ID 10s behind the id's bound: %v, want ErrClockBack", err)
	}
	refused := 0
	for range 40 { // 20 s in steps of 500 ms, a heartbeat each
		second.clock.Add(500 * time.Millisecond)
		if err := second.node.Beat(t.Context()); err != nil {
			t.Fatal(err)
		}
		id, err := second.alloc.Next(t.Context(), "sf")
		if err != nil {
			refused++
			continue
		}
		if seen[id] {
			t.Fatalf("ID %d repeated after the restart", id)
		}
	}
	if refused == 0 || refused == 40 {
		t.Fatalf("%d of 40 requests refused: want the first ones, until the clock passed the bound", refused)
	}
}

// TestOff: without the registry's tables the server runs alone: nothing
// held, no worker id, changes not announced.
func TestOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaf.db")
	openStore(t, path, true)
	for _, tb := range []string{"leaf_node", "leaf_worker", "leaf_change", "leaf_mode"} {
		dropTable(t, path, tb)
	}
	srv := &server{store: openStore(t, path, false)}
	srv.gen = snowflake.New(snowflake.Options{Layout: snowflake.DefaultLayout()})
	srv.alloc = segment.New(srv.store, segment.DefaultOptions())
	t.Cleanup(func() { _ = srv.alloc.Close(context.Background()) })
	srv.node = cluster.New(srv.store, srv.alloc, srv.gen, cluster.Options{Node: persist.NodeInfo{ID: "alone"}})
	srv.node.Start(t.Context())
	t.Cleanup(func() { _ = srv.node.Leave(context.Background()) })
	next(t, srv.alloc, "t")
	st := srv.node.Status()
	if st.Enabled || st.Serving || !strings.Contains(st.Off, "no cluster registry") {
		t.Fatalf("status without the tables: %+v", st)
	}
	if err := srv.node.Announce(t.Context(), persist.ChangeFloor, "t", 5); err != nil {
		t.Fatalf("Announce with the features off: %v", err)
	}
	if _, err := srv.node.Nodes(t.Context()); !errors.Is(err, cluster.ErrOff) {
		t.Fatalf("Nodes with the features off: %v", err)
	}
	if m := srv.node.SlotMap(t.Context()); len(m.Shards) != 1 || m.Self != 0 || m.Shards[0].ID != "alone" || m.Shards[0].Last != cluster.Slots-1 {
		t.Fatalf("slot map with the features off: %+v; want the server alone", m)
	}
	if _, err := srv.gen.NextN(t.Context(), 1); !errors.Is(err, snowflake.ErrNoWorker) || !strings.Contains(err.Error(), "cluster features are off") {
		t.Fatalf("Snowflake ID with the features off: %v", err)
	}
}

func dropTable(t *testing.T, path, table string) {
	t.Helper()
	db, err := sql.Open("sqlite", path) // the driver persist/sqlite registers
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `DROP TABLE IF EXISTS `+table); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatFailuresSummarised: a store down for many heartbeats
// writes one warning and then one line with the count and the last
// error, not a line a heartbeat.
func TestHeartbeatFailuresSummarised(t *testing.T) {
	var buf logbuf.Buffer
	su := defaults()
	su.now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	su.log = slog.New(slog.NewTextHandler(&buf, nil))
	s := newServer(t, filepath.Join(t.TempDir(), "leaf.db"), "s", su)
	s.reg.Pause(true)
	for range 57 {
		s.clock.Add(time.Second)
		s.node.Tick(t.Context())
	}
	if n := strings.Count(buf.String(), "cluster: heartbeat failed"); n != 1 {
		t.Fatalf("%d heartbeat warnings for 57 failures, want 1:\n%s", n, buf.String())
	}
	s.reg.Pause(false)
	if err := s.node.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		`msg="cluster: heartbeat failed 56 more times in the last minute"`,
		"not_logged=56", "since=2026-03-02T10:00:01Z", `last.err="` + errPaused.Error(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
