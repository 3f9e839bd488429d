package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster and Sentinel clients on three leaf servers sharing one
// store, as their users configure them: go-redis ClusterClient and
// FailoverClient, redis-py RedisCluster and Sentinel, ioredis Cluster.
// Through a cluster client each tag is routed by its slot to one server,
// so its IDs increase strictly while the servers stay the same; after
// kill -9 of one server every tag answers again through every client, and
// no ID of any tag repeats.

// clusterClientTags is the number of tags the clients spread.
const clusterClientTags = 200

// clusterClientEnv: heartbeats every 250ms and a node timeout of 3s keep
// the test short; a busy machine does not make a live server 12
// heartbeats late. LEAF_TEST_CLUSTER_DEFAULTS=1 runs with leaf's and the
// clients' defaults instead (heartbeat 1s, node timeout 5 heartbeats,
// go-redis reloading its map every 60s), to measure how long clients
// take to move off a dead server as users run them.
func clusterClientEnv() (env []string, reload time.Duration) {
	env = []string{"LEAF_LOG_LEVEL=info", "LEAF_SEGMENT_LOAD_TIMEOUT=1m"}
	if os.Getenv("LEAF_TEST_CLUSTER_DEFAULTS") == "1" {
		return env, 0
	}
	return append(env, "LEAF_CLUSTER_HEARTBEAT=250ms", "LEAF_CLUSTER_NODE_TIMEOUT=3s"), time.Second
}

// idBook holds every ID handed out per tag, through any client.
type idBook struct {
	t    *testing.T
	seen map[string]map[int64]string // tag -> id -> the client that got it
}

// add records id for tag, got by client; a repeat fails the test.
func (b *idBook) add(client, tag string, id int64) {
	b.t.Helper()
	if b.seen[tag] == nil {
		b.seen[tag] = map[int64]string{}
	}
	if was, ok := b.seen[tag][id]; ok {
		b.t.Fatalf("%s got ID %d of %s, already handed out to %s", client, id, tag, was)
	}
	b.seen[tag][id] = client
}

// roundClient is a client that INCRs every tag once per round.
type roundClient interface {
	name() string
	// round INCRs every tag once, retrying each until it answers, and
	// returns the IDs and how many errors it retried.
	round() (ids map[string]int64, errors int, err error)
}

// goClient is go-redis's ClusterClient (or FailoverClient) in the test.
type goClient struct {
	label string
	c     redis.UniversalClient
	tags  []string
}

func (g *goClient) name() string { return g.label }

func (g *goClient) round() (map[string]int64, int, error) {
	ctx := context.Background()
	start, errors := time.Now(), 0
	ids := map[string]int64{}
	for _, tag := range g.tags {
		for {
			id, err := g.c.Incr(ctx, tag).Result()
			if err == nil {
				ids[tag] = id
				break
			}
			errors++
			if time.Since(start) > 2*time.Minute { // a safety net, not an assertion on time
				return nil, errors, fmt.Errorf("INCR %s: %w", tag, err)
			}
		}
	}
	return ids, errors, nil
}

// scriptClient is a client of another language, run as a process that
// does a round per "round" line (testdata/clients/cluster.py,
// cluster_ioredis.js).
type scriptClient struct {
	label string
	in    io.WriteCloser
	out   *bufio.Scanner
	cmd   *exec.Cmd
	log   *lockedBuffer
}

// lockedBuffer is a client's stderr, written by exec's copier while the
// test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (s *scriptClient) name() string { return s.label }

// startScript starts a client script, or skips (fails under CI=true) when
// probe says its library is not installed.
func startScript(t *testing.T, label, needed string, env, probe []string, args ...string) *scriptClient {
	t.Helper()
	if err := clientCmd(context.Background(), env, probe...).Run(); err != nil {
		how := label + " is not installed: install " + needed
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	cmd := clientCmd(context.Background(), env, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptClient{label: label, in: in, out: bufio.NewScanner(out), cmd: cmd, log: &lockedBuffer{}}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return s
}

func (s *scriptClient) round() (map[string]int64, int, error) {
	if _, err := io.WriteString(s.in, "round\n"); err != nil {
		return nil, 0, fmt.Errorf("%w\n%s", err, s.log)
	}
	ids := map[string]int64{}
	for s.out.Scan() {
		f := strings.Fields(s.out.Text())
		if len(f) == 3 && f[0] == "end" {
			errors, err := strconv.Atoi(f[2])
			return ids, errors, err
		}
		if len(f) != 2 || f[0] == "fail" {
			return nil, 0, fmt.Errorf("%q\n%s", s.out.Text(), s.log)
		}
		id, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("%q: %w", s.out.Text(), err)
		}
		ids[f[0]] = id
	}
	return nil, 0, fmt.Errorf("the client ended: %v\n%s", s.out.Err(), s.log)
}

// clusterSlots is CLUSTER SLOTS through c, as "first-last addr id" lines.
func clusterSlots(t *testing.T, c *redis.Client) []string {
	t.Helper()
	slots, err := c.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	var out []string
	for _, s := range slots {
		if len(s.Nodes) != 1 {
			t.Fatalf("CLUSTER SLOTS: %d nodes for %d-%d", len(s.Nodes), s.Start, s.End)
		}
		out = append(out, fmt.Sprintf("%d-%d %s %s", s.Start, s.End, s.Nodes[0].Addr, s.Nodes[0].ID))
	}
	return out
}

// agreedSlots waits until the slot maps of every server of procs agree
// and hold want servers, and returns the map.
func agreedSlots(t *testing.T, procs []*proc, want int) []string {
	t.Helper()
	var clients []*redis.Client
	for _, p := range procs {
		clients = append(clients, patientClient(t, p))
	}
	deadline := time.Now().Add(2 * time.Minute) // a safety net, not an assertion on time
	for {
		var maps [][]string
		agree := true
		for _, c := range clients {
			maps = append(maps, clusterSlots(t, c))
			agree = agree && reflect.DeepEqual(maps[0], maps[len(maps)-1])
		}
		if agree && len(maps[0]) == want {
			return maps[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot maps do not agree on %d servers: %q", want, maps)
		}
		time.Sleep(50 * time.Millisecond) // the next heartbeat, at a pace
	}
}

func TestClusterAndSentinelClients(t *testing.T) {
	// Not parallel (see harness_test.go): a live server late by the node
	// timeout (3s) would leave the slot map.
	env, reload := clusterClientEnv()
	dir := t.TempDir()
	var procs []*proc
	for range 3 {
		procs = append(procs, startLeaf(t, dir, env...))
	}
	slots := agreedSlots(t, procs, 3)
	t.Logf("slot map: %q", slots)
	// The clients start from the first server; the one killed is another,
	// and not the first of the map (slot 0): redis-py before 4.4 (Debian
	// 12 has 4.3.4) never reads the map again when its first server is
	// dead (a TypeError in its retry path, fixed by redis/redis-py#2377).
	first, dying := procs[0], procs[2]
	if strings.Contains(slots[0], " "+dying.Addr+" ") {
		dying = procs[1]
	}

	var tags []string
	for i := range clusterClientTags {
		tags = append(tags, fmt.Sprintf("t:%d", i))
	}
	// go-redis reloads its map every minute by default, or on MOVED,
	// which leaf never sends: the test reloads every second, as users
	// of a leaf cluster are told to (README).
	goc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{first.Addr}, ClusterStateReloadInterval: reload,
		DialTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	})
	t.Cleanup(func() { _ = goc.Close() })
	// The sentinel clients are given the server that is killed as their
	// sentinel, and are sent to it as their master: they find another.
	gof := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "mymaster", SentinelAddrs: []string{dying.Addr},
		DialTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	})
	t.Cleanup(func() { _ = gof.Close() })

	host, port, _ := strings.Cut(first.Addr, ":")
	script := func(name string) string { return filepath.Join(moduleRoot, "e2e", "testdata", "clients", name) }
	py := []string{"/usr/bin/python3", "-c", "import redis.cluster, redis.sentinel"}
	nodeEnv := []string{"NODE_PATH=" + os.Getenv("LEAF_TEST_NODE_MODULES")}
	count := strconv.Itoa(clusterClientTags)
	clients := []roundClient{
		&goClient{label: "go-redis ClusterClient", c: goc, tags: tags},
		startScript(t, "redis-py RedisCluster", "the Debian package python3-redis", nil, py,
			"/usr/bin/python3", script("cluster.py"), "cluster", host, port, count),
		startScript(t, "ioredis Cluster", "npm's ioredis in LEAF_TEST_NODE_MODULES (scripts/test.sh)", nodeEnv,
			[]string{"node", "-e", "require('ioredis')"}, "node", script("cluster_ioredis.js"), host, port, count),
	}
	sentinels := []roundClient{
		&goClient{label: "go-redis FailoverClient", c: gof, tags: tags[:20]},
		startScript(t, "redis-py Sentinel", "the Debian package python3-redis", nil, py,
			"/usr/bin/python3", script("cluster.py"), "sentinel", "20", dying.Addr, first.Addr),
	}

	book := &idBook{t: t, seen: map[string]map[int64]string{}}
	// While the servers stay the same, every cluster client sends a tag
	// to the same server: its IDs increase strictly, client after client.
	last := map[string]int64{}
	for r := range 2 {
		for _, c := range clients {
			ids, _, err := c.round()
			if err != nil {
				t.Fatalf("%s: %v", c.name(), err)
			}
			for _, tag := range tags {
				id, ok := ids[tag]
				if !ok {
					t.Fatalf("%s: no ID for %s", c.name(), tag)
				}
				book.add(c.name(), tag, id)
				if id <= last[tag] {
					t.Fatalf("round %d, %s: %s got %d after %d: a tag moved while the servers stayed the same",
						r, c.name(), tag, id, last[tag])
				}
				last[tag] = id
			}
		}
	}
	// The tags were spread over all three servers: each counted INCRs.
	for i, p := range procs {
		info, err := patientClient(t, p).Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "cmdstat_incr:calls=") {
			t.Fatalf("server %d served no INCR: the tags were not spread\n%s", i, info)
		}
	}
	if now := agreedSlots(t, procs, 3); !reflect.DeepEqual(now, slots) {
		t.Fatalf("the slot map changed while the servers ran: %q, then %q", slots, now)
	}
	for _, c := range sentinels {
		ids, _, err := c.round()
		if err != nil {
			t.Fatalf("%s: %v", c.name(), err)
		}
		for tag, id := range ids {
			book.add(c.name(), tag, id)
		}
	}
	if id, err := gof.Do(context.Background(), "CLUSTER", "MYID").Text(); err != nil ||
		id != mustText(t, patientClient(t, dying), "CLUSTER", "MYID") {
		t.Fatalf("go-redis FailoverClient's master: CLUSTER MYID %q, %v: not the server it was given as sentinel", id, err)
	}

	// kill -9 of one server: every client answers every tag again, through
	// another server, and no ID repeats. The clients run their rounds at
	// once, so that each one's time is its own.
	if err := dying.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dying.done
	killed := time.Now()
	type result struct {
		ids    map[string]int64
		after  time.Duration
		errors int
		err    error
	}
	all := append(clients, sentinels...)
	results := make([]chan result, len(all))
	for i, c := range all {
		results[i] = make(chan result, 1)
		go func() {
			ids, errors, err := c.round()
			results[i] <- result{ids, time.Since(killed), errors, err}
		}()
	}
	for i, c := range all {
		r := <-results[i]
		if r.err != nil {
			t.Fatalf("%s after the kill: %v", c.name(), r.err)
		}
		for tag, id := range r.ids {
			book.add(c.name(), tag, id)
		}
		t.Logf("%s: every tag answered %.1fs after the kill (%d errors retried)", c.name(), r.after.Seconds(), r.errors)
	}
	var alive []*proc
	for _, p := range procs {
		if p != dying {
			alive = append(alive, p)
		}
	}
	survivors := agreedSlots(t, alive, 2)
	for _, line := range survivors {
		if strings.Contains(line, dying.Addr) {
			t.Fatalf("the killed server is still in the slot map: %q", survivors)
		}
	}
	// Once the map no longer lists it, the cluster clients do not try it:
	// a round without an error.
	for _, c := range clients {
		ids, errors, err := c.round()
		if err != nil {
			t.Fatalf("%s: %v", c.name(), err)
		}
		for tag, id := range ids {
			book.add(c.name(), tag, id)
		}
		if errors != 0 {
			t.Fatalf("%s: %d errors once the map left the killed server out", c.name(), errors)
		}
	}
}

// mustText runs a command answering a string.
func mustText(t *testing.T, c *redis.Client, args ...any) string {
	t.Helper()
	s, err := c.Do(context.Background(), args...).Text()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return s
}
