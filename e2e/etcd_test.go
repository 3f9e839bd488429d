package e2e

// leaf on a three-member etcd cluster of the test's own, whose members
// fail under it: the leader killed and hung during the chaos test, and
// the quorum lost and back under a running server.

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
)

// etcdLoadTimeout is segment.load_timeout in the etcd tests.
const etcdLoadTimeout = time.Second

// tryAgainBound is the longest a client may see nothing but TRYAGAIN
// while one member is down or hung: a leader election (up to twice the
// election timeout, as randomised by etcd) and a load that met the old
// leader (load_timeout), with five times that as margin for a busy
// machine, which stretches elections and loads alike.
const tryAgainBound = 5 * (2*etcdElectionMS*time.Millisecond + etcdLoadTimeout)

// TestEtcdChaos is the chaos test (three leaf servers killed and restarted
// on a schedule, six clients mixing INCR, INCRBY and pipelines) on a
// three-member cluster whose leader is killed (and later started again),
// then hung (SIGSTOP, and later continued). No ID repeats; no client sees
// TRYAGAIN for longer than tryAgainBound.
func TestEtcdChaos(t *testing.T) {
	t.Parallel()
	e := ownEtcd(t)
	st := etcdStoreAt(t, e.endpoints, "/leaf/")
	env := append(append(st.env, chaosEnv...), "LEAF_SEGMENT_LOAD_TIMEOUT="+etcdLoadTimeout.String())
	var killed, paused string
	faults := map[int]func(){
		2: func() {
			killed = e.member(t, "kill", "leader")
			t.Logf("event 2: member %s, the leader, killed", killed)
		},
		4: func() { e.member(t, "start", killed); t.Logf("event 4: member %s started again", killed) },
		6: func() {
			paused = e.member(t, "pause", "leader")
			t.Logf("event 6: member %s, the leader, paused", paused)
		},
		8: func() { e.member(t, "resume", paused); t.Logf("event 8: member %s continued", paused) },
	}
	longest := runChaos(t, t.TempDir(), env, func(ev int) {
		if f := faults[ev]; f != nil {
			f()
		}
	})
	t.Logf("the longest run of TRYAGAIN a client saw: %v (bound %v)", longest.Round(time.Millisecond), tryAgainBound)
	if longest > tryAgainBound {
		t.Errorf("a client saw only TRYAGAIN for %v, longer than %v (elections of %dms, load_timeout %v, with margin)",
			longest, tryAgainBound, etcdElectionMS, etcdLoadTimeout)
	}
}

// TestEtcdQuorumLost: with two segments cached, two of the three members
// crash (SIGKILL) or hang (SIGSTOP), the leader among them. INCR answers
// every cached ID, in order, then TRYAGAIN within load_timeout, without
// hanging; INFO shows the store away. Once the members are back, the same
// process serves again, above every ID it served before.
func TestEtcdQuorumLost(t *testing.T) {
	// Not parallel (see harness_test.go): TRYAGAIN must come within five
	// load_timeouts.
	e := ownEtcd(t)
	tests := []struct {
		name           string
		fault, recover string // scripts/etcd.sh commands
	}{
		{"Crash", "kill", "start"},
		{"Hang", "pause", "resume"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := "quorum_" + strings.ToLower(tc.name)
			st := etcdStoreAt(t, e.endpoints, "/leaf-"+strings.ToLower(tc.name)+"/")
			p := startLeaf(t, t.TempDir(), append(st.env, "LEAF_SEGMENT_DEFAULT_STEP=100", "LEAF_SEGMENT_MAX_STEP=100",
				"LEAF_SEGMENT_LOAD_TIMEOUT="+etcdLoadTimeout.String(), "LEAF_LOG_LEVEL=info")...)
			c := patientClient(t, p)
			var last int64
			for range 20 { // past the prefetch point (10%)
				last = redistest.Incr(t, c, tag)
			}
			nextReady(t, c, tag)

			down := []string{e.member(t, tc.fault, "leader")}
			other := slices.IndexFunc([]string{"1", "2", "3"}, func(m string) bool { return m != down[0] })
			down = append(down, e.member(t, tc.fault, []string{"1", "2", "3"}[other]))
			recovered := false
			recover := func() {
				for _, m := range down {
					e.member(t, tc.recover, m)
				}
				recovered = true
			}
			t.Cleanup(func() {
				if !recovered {
					recover()
				}
			})
			t.Logf("members %q down (%s)", down, tc.fault)

			runway := infoInt(t, redistest.LeafInfo(t, c, tag), "runway_ids")
			if runway != 180 {
				t.Fatalf("runway_ids = %d with 20 of 200 cached IDs used, want 180", runway)
			}
			last = incrRising(t, c, tag, "cached ID", last, runway)
			// The cache is empty: an error, within load_timeout (with a
			// margin for a busy machine; a hang would be the client's
			// five minutes).
			begin := time.Now()
			_, reply, err := incrErr(c, tag)
			took := time.Since(begin)
			if err != nil || !strings.HasPrefix(reply, "TRYAGAIN no cached IDs for tag '"+tag+"'") {
				t.Fatalf("INCR with no cached IDs and no quorum = %v, %q; want TRYAGAIN", err, reply)
			}
			t.Logf("TRYAGAIN after %v: %s", took.Round(time.Millisecond), reply)
			if took > 5*etcdLoadTimeout {
				t.Errorf("TRYAGAIN came after %v, want about load_timeout (%v)", took, etcdLoadTimeout)
			}
			waitStoreOK(t, c, "0")

			recover()
			begin = time.Now()
			id := incrOnceBack(t, c, tag)
			t.Logf("first ID %v after the members were back", time.Since(begin).Round(time.Millisecond))
			if id <= last {
				t.Fatalf("first INCR after recovery = %d, want > %d", id, last)
			}
			incrRising(t, c, tag, "ID after recovery", id, 250) // through more segment loads
			if v := infoField(t, c, "leaf", "store_ok"); v != "1" {
				t.Errorf("INFO store_ok = %q after recovery, want 1", v)
			}
			p.Stop(syscall.SIGTERM)
		})
	}
}

// incrOnceBack is INCR tag until it answers an ID, once the store is back:
// TRYAGAIN is accepted while the cluster elects a leader (poll fails the
// test after a minute), any other error reply is not.
func incrOnceBack(t *testing.T, c *redis.Client, tag string) int64 {
	t.Helper()
	var id int64
	var replies []string
	poll(t, func() bool {
		got, reply, err := incrErr(c, tag)
		if err != nil {
			t.Fatalf("INCR %s: %v", tag, err)
		}
		if reply == "" {
			id = got
			return true
		}
		if !strings.HasPrefix(reply, "TRYAGAIN ") {
			t.Fatalf("INCR %s once the store is back: %q", tag, reply)
		}
		replies = append(replies, reply)
		return false
	}, func() string { return "no ID once the store is back: " + strings.Join(replies, "; ") })
	return id
}

// TestEtcdPassword: with authentication on in the cluster, leaf logs in
// with the user and password of store.dsn's endpoints, as a user allowed
// to read and write its prefix only (as the README says to set it up); a
// wrong password stops the start (no wait fixes it); an unreachable
// cluster does not. The password shows nowhere in leaf's output (at debug
// level).
func TestEtcdPassword(t *testing.T) {
	t.Parallel()
	e := ownEtcd(t)
	const pw, wrong = "s3cret-Etcd-pw", "wr0ng-Etcd-pw"
	admin := etcdtest.Client(t, e.endpoints)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"add role root", func() error { _, err := admin.RoleAdd(ctx, "root"); return err }},
		{"add user root", func() error { _, err := admin.UserAdd(ctx, "root", "root-"+pw); return err }},
		{"grant root to root", func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err }},
		{"add role leaf", func() error { _, err := admin.RoleAdd(ctx, "leaf"); return err }},
		{"grant /leaf/ to leaf", func() error {
			_, err := admin.RoleGrantPermission(ctx, "leaf", "/leaf/", clientv3.GetPrefixRangeEnd("/leaf/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"add user leaf", func() error { _, err := admin.UserAdd(ctx, "leaf", pw); return err }},
		{"grant leaf to leaf", func() error { _, err := admin.UserGrantRole(ctx, "leaf", "leaf"); return err }},
		{"enable auth", func() error { _, err := admin.AuthEnable(ctx); return err }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	withUser := func(pass string, endpoints string) string {
		var eps []string
		for ep := range strings.SplitSeq(endpoints, ",") {
			eps = append(eps, strings.Replace(ep, "http://", "http://leaf:"+pass+"@", 1))
		}
		return strings.Join(eps, ",")
	}
	env := func(dsn string) []string {
		return []string{"LEAF_STORE_DRIVER=etcd", "LEAF_STORE_DSN=" + dsn, "LEAF_SEGMENT_LOAD_TIMEOUT=" + etcdLoadTimeout.String()}
	}

	// Each of the three starts a server of its own on the cluster as set
	// up above.
	t.Run("LogsIn", func(t *testing.T) {
		t.Parallel()
		p := startLeaf(t, t.TempDir(), env(withUser(pw, e.endpoints))...)
		if id := redistest.Incr(t, p.client(t), "pw"); id != 1 {
			t.Fatalf("INCR = %d, want 1", id)
		}
		p.Stop(syscall.SIGTERM)
		if strings.Contains(p.Log(), pw) {
			t.Fatalf("the log shows the password:\n%s", p.Log())
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		t.Parallel()
		// A refusal must be told from a cluster that does not answer:
		// a load_timeout a busy machine's first connection cannot run out.
		code, out := runLeafToExit(t, t.TempDir(), append(env(withUser(wrong, e.endpoints)), "LEAF_SEGMENT_LOAD_TIMEOUT=30s")...)
		if code == 0 || !strings.Contains(out, "authentication failed") || !strings.Contains(out, "leaf:REDACTED@") {
			t.Errorf("leaf with a wrong password: exit %d, want 1 saying the authentication failed, naming the redacted endpoints\n%s", code, out)
		}
		if strings.Contains(out, wrong) {
			t.Fatalf("the output shows the password:\n%s", out)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		p := startLeaf(t, t.TempDir(), env(withUser(pw, "http://127.0.0.1:1,http://127.0.0.1:2"))...)
		if _, reply, err := incrErr(p.client(t), "pw"); err != nil || !strings.HasPrefix(reply, "TRYAGAIN ") {
			t.Errorf("INCR with the cluster unreachable = %v, %q; want TRYAGAIN", err, reply)
		}
		p.Stop(syscall.SIGTERM)
		if !strings.Contains(p.Log(), "etcd unreachable at start") {
			t.Errorf("no warning that the cluster is unreachable:\n%s", p.Log())
		}
		if strings.Contains(p.Log(), pw) {
			t.Fatalf("the log shows the password:\n%s", p.Log())
		}
	})
}
