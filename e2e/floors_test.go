package e2e

// Floors against the two faults a timer cannot see: a server stopped
// (SIGSTOP) past its lease, which wakes with a request already read, and a
// server shut down (SIGTERM) while a floor it has not read waits for it.
// Real processes on PostgreSQL and on etcd.

import (
	"bufio"
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
)

// floorStores are the stores these tests run on: a SQL database and a
// replicated key-value store (SQLite is left out: a process stopped inside
// a write holds its file's lock, and every other server waits for it).
var floorStores = []namedStore{
	{"PostgreSQL", func(t *testing.T, _ string) store { return postgresStore(t) }},
	{"Etcd", func(t *testing.T, _ string) store {
		eps := etcdtest.Endpoints(t)
		return etcdStoreAt(t, eps, etcdtest.Prefix(t, eps))
	}},
}

// rawConn is one RESP connection to p for INCR, whose replies are read
// one at a time, with a hang guard (not a timing assertion).
type rawConn struct {
	nc net.Conn
	rc respConn
}

func dialRaw(t *testing.T, p *proc) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(2 * time.Minute))
	return &rawConn{nc: nc, rc: respConn{r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}}
}

func (c *rawConn) send(t *testing.T, tag string) {
	t.Helper()
	if err := c.rc.send([]chaosOp{{tag: tag}}); err != nil {
		t.Fatal(err)
	}
}

// reply reads one reply: an ID, or an error reply's text.
func (c *rawConn) reply(t *testing.T) (int64, string) {
	t.Helper()
	id, text, err := c.rc.reply()
	if err != nil {
		t.Fatal(err)
	}
	return id, text
}

// TestStoppedPastLease: a server caches IDs, is stopped past its lease; a
// floor set meanwhile through another server answers (the stopped one is
// no longer live), and an INCR sent to the stopped server before it runs
// again gets an ID above the floor or TRYAGAIN, never a cached one below.
// Three times, so that either goroutine may run first after SIGCONT: the
// event loop with the request, or the heartbeat.
func TestStoppedPastLease(t *testing.T) {
	// Not parallel (see harness_test.go): b keeps a lease of a second
	// while a is stopped.
	forEachStoreOf(t, floorStores, func(t *testing.T, dir string, env []string) {
		env = append(env, "LEAF_CLUSTER_HEARTBEAT=200ms", "LEAF_CLUSTER_LEASE=1s", "LEAF_CLUSTER_ACK_TIMEOUT=30s",
			"LEAF_SEGMENT_MAX_STEP=1000", "LEAF_LOG_LEVEL=info")
		a := startLeaf(t, dir, env...)
		b := startLeaf(t, dir, env...)
		stopped := false
		t.Cleanup(func() {
			if stopped {
				_ = a.cmd.Process.Signal(syscall.SIGCONT)
			}
		})
		ca, cb := patientClient(t, a), patientClient(t, b)
		ctx := context.Background()
		var f int64
		for trial := range 3 {
			id := redistest.Incr(t, ca, "paused")
			if id <= f {
				t.Fatalf("trial %d: a's ID %d at or below the floor %d", trial, id, f)
			}
			// Nothing of a's in flight in the store when it stops (a load
			// holding a row lock would hold the floor's write).
			waitInfo(t, ca, "paused", "loading", func(in map[string]any) bool { return in["loading"] == int64(0) })
			f = id + 1_000_000
			raw := dialRaw(t, a)
			if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped = true
			// Answered once a's lease has ended in the store.
			if err := cb.Do(ctx, "LEAF.FLOOR", "paused", f).Err(); err != nil {
				t.Fatalf("trial %d: LEAF.FLOOR with a stopped: %v", trial, err)
			}
			raw.send(t, "paused") // read by a when it runs again
			if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			stopped = false
			got, text := raw.reply(t)
			switch {
			case text != "" && !strings.HasPrefix(text, "TRYAGAIN "):
				t.Fatalf("trial %d: INCR sent to the stopped server: %q", trial, text)
			case text == "" && got <= f:
				t.Fatalf("trial %d: the stopped server answered %d to an INCR sent after the floor %d was acknowledged", trial, got, f)
			}
			t.Logf("trial %d: the stopped server answered %d %q", trial, got, text)
			// It serves again, above the floor, once it has renewed.
			var after int64
			var reply string
			poll(t, func() bool {
				raw.send(t, "paused")
				after, reply = raw.reply(t)
				return reply == ""
			}, func() string { return "the stopped server serves no ID again: " + reply })
			if after <= f {
				t.Fatalf("trial %d: %d after renewing, at or below the floor %d", trial, after, f)
			}
		}
		if v := infoField(t, ca, "cluster", "lease_lapses"); v == "0" {
			t.Errorf("INFO lease_lapses = %q after three stops past the lease", v)
		}
		a.Stop(syscall.SIGTERM)
		b.Stop(syscall.SIGTERM)
	})
}

// TestShutdownRacesFloor: a server with a slow heartbeat caches IDs; a
// floor inside them is published through another server and waits for
// it; the server gets SIGTERM before it has read the floor. The floor is
// answered once it has left, and neither the other server nor one started
// afterwards hands out an ID at or below it: the stopped server gave back
// nothing below it.
func TestShutdownRacesFloor(t *testing.T) {
	t.Parallel()
	forEachStoreOf(t, floorStores, func(t *testing.T, dir string, env []string) {
		env = append(env, "LEAF_CLUSTER_ACK_TIMEOUT=60s", "LEAF_LOG_LEVEL=info")
		slow := append(env[:len(env):len(env)], "LEAF_CLUSTER_HEARTBEAT=10s", "LEAF_CLUSTER_LEASE=60s")
		fast := append(env[:len(env):len(env)], "LEAF_CLUSTER_HEARTBEAT=100ms", "LEAF_CLUSTER_LEASE=60s")
		a := startLeaf(t, dir, slow...)
		b := startLeaf(t, dir, fast...)
		ca, cb := patientClient(t, a), patientClient(t, b)
		if id := redistest.Incr(t, ca, "race"); id >= 500 {
			t.Fatalf("a's first ID %d: the test needs IDs below the floor cached", id)
		}
		watch := patientClient(t, b) // cb waits for the floor's answer
		applied := liveNodes(t, watch)[b.Addr]["applied"].(int64)
		done := make(chan error, 1)
		go func() { done <- cb.Do(context.Background(), "LEAF.FLOOR", "race", 500).Err() }()
		// Published (b applies its own change at its next heartbeat), and
		// a, beating every 10 s, has most likely not read it.
		poll(t, func() bool { return liveNodes(t, watch)[b.Addr]["applied"].(int64) > applied },
			func() string { return "b did not apply its own floor" })
		a.Stop(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Fatalf("LEAF.FLOOR once a left: %v", err)
		}
		if id := redistest.Incr(t, cb, "race"); id <= 500 {
			t.Fatalf("b handed out %d after the floor 500 was acknowledged", id)
		}
		c := startLeaf(t, dir, fast...)
		if id := redistest.Incr(t, patientClient(t, c), "race"); id <= 500 {
			t.Fatalf("a server started after the floor 500 was acknowledged handed out %d: a's shutdown gave back below it", id)
		}
		b.Stop(syscall.SIGTERM)
		c.Stop(syscall.SIGTERM)
	})
}
