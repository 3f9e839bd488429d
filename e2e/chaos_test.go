package e2e

// The chaos test: three leaf processes on one database, six clients, and a
// schedule of kills and restarts. Every ID a client receives is recorded;
// none may repeat, and on one connection (to one process life) a tag's IDs
// must strictly increase. Across the connections to one process life too:
// a request sent after a reply was received gets higher IDs.

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The chaos schedule. The kills are paced by the IDs the clients receive,
// not by time, and drawn from a seeded generator: the same seed gives the
// same schedule. LEAF_CHAOS_SEED picks another seed.
const (
	chaosServers  = 3
	chaosClients  = 6
	chaosEvents   = 12   // kills and restarts
	chaosPerEvent = 1500 // replies received between two events
	chaosSeed     = 20261129
)

var chaosTags = []string{"chaos_a", "chaos_b", "chaos_c", "chaos_d"}

// chaosEnv: tiny segments, so that ranges switch all the time, and a
// load_timeout that three processes writing one SQLite file on a busy
// machine do not run out (the default 2 s bounds a start-up's schema
// check too, and a process that cannot open its store exits).
var chaosEnv = []string{"LEAF_SEGMENT_DEFAULT_STEP=20", "LEAF_SEGMENT_MAX_STEP=200", "LEAF_SEGMENT_LOAD_TIMEOUT=10s", "LEAF_LOG_LEVEL=info"}

// TestChaos runs the chaos on one MariaDB database and on one SQLite file
// shared by the three processes.
func TestChaos(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, dir string, env []string) {
		runChaos(t, dir, append(env, chaosEnv...), nil)
	})
}

// chaosSeedFor is the seed of the schedule and of the clients' choices.
func chaosSeedFor(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("LEAF_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEAF_CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	return chaosSeed
}

// runChaos runs the chaos on the store that env points leaf at, then
// checks what the clients received and that a new process continues above
// it. storeFault, when not nil, is called at each event, after the server
// of the event was restarted (ev counts from 0), to break the store too.
// It returns the longest time a client saw nothing but TRYAGAIN: from the
// first TRYAGAIN of a run of them to the next ID.
func runChaos(t *testing.T, dir string, env []string, storeFault func(ev int)) (longestTryAgain time.Duration) {
	return runChaosWith(t, dir, env, chaosOptions{storeFault: storeFault}).longestTryAgain
}

// chaosOptions vary the chaos of runChaosWith.
type chaosOptions struct {
	storeFault func(ev int) // as runChaos's
	// slotEnv is added to env for the servers of slot i (each server on
	// its own database node, say); nil: none.
	slotEnv func(i int) []string
	// perEvent is the replies between two events; 0: chaosPerEvent, or
	// LEAF_CHAOS_PER_EVENT for a longer run by hand.
	perEvent int64
}

// chaosResult is what a chaos run saw.
type chaosResult struct {
	longestTryAgain time.Duration
	ids             int64    // IDs received
	logs            []string // of every process life, the last check's included
}

// runChaosWith is runChaos with options.
func runChaosWith(t *testing.T, dir string, env []string, o chaosOptions) (res chaosResult) {
	seed := chaosSeedFor(t)
	t.Logf("seed %d (set LEAF_CHAOS_SEED to change it)", seed)
	storeFault := o.storeFault
	perEvent := cmp.Or(o.perEvent, chaosPerEventFor(t))
	start := time.Now()
	cl := newClusterWith(t, dir, env, o.slotEnv)
	defer func() { res.logs = cl.logs() }()

	ctx, cancel := context.WithCancel(context.Background())
	var received atomic.Int64
	clients := make([]*chaosClient, chaosClients)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &chaosClient{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)+1)), ranges: map[string][]idRange{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i].run(ctx, t, cl, &received)
		}()
	}
	stopClients := sync.OnceFunc(func() { cancel(); wg.Wait() })
	defer stopClients()

	sched := rand.New(rand.NewPCG(seed, 0))
	var kinds [3]int
	for ev := range chaosEvents {
		waitReceived(t, &received, int64(ev+1)*perEvent)
		slot, kind := sched.IntN(chaosServers), sched.IntN(len(kinds))
		kinds[kind]++
		cl.restart(slot, kind)
		if storeFault != nil {
			storeFault(ev)
		}
	}
	waitReceived(t, &received, (chaosEvents+1)*perEvent)
	stopClients()
	cl.stopAll()

	// Merge what the clients received and look for overlaps.
	byTag := map[string][]idRange{}
	var tryAgain, netErrs, conns, ids int64
	for _, c := range clients {
		for tag, rs := range c.ranges {
			byTag[tag] = append(byTag[tag], rs...)
		}
		tryAgain += c.tryAgain
		netErrs += c.netErrs
		conns += c.conns
		res.longestTryAgain = max(res.longestTryAgain, c.longestTryAgain)
	}
	for tag, rs := range byTag {
		slices.SortFunc(rs, func(a, b idRange) int { return cmp.Compare(a.lo, b.lo) })
		top := 0 // the range reaching highest so far
		for i, r := range rs {
			ids += r.hi - r.lo + 1
			if i > 0 && r.lo <= rs[top].hi {
				t.Errorf("tag %s: IDs handed out twice: [%d, %d] to %s and [%d, %d] to %s",
					tag, rs[top].lo, rs[top].hi, rs[top].who(), r.lo, r.hi, r.who())
			}
			if r.hi > rs[top].hi {
				top = i
			}
		}
	}
	// The highest ID of each tag, for the check below.
	highest := map[string]int64{}
	for tag, rs := range byTag {
		for _, r := range rs {
			highest[tag] = max(highest[tag], r.hi)
		}
	}

	// A new process after all that starts above every ID handed out. It
	// may answer TRYAGAIN for a while: servers killed in the last lease
	// may hold every Snowflake worker id until their leases end.
	p := cl.start(0)
	c := patientClient(t, p)
	for _, tag := range chaosTags {
		h, ok := highest[tag]
		if !ok {
			t.Errorf("tag %s: no ID received", tag)
			continue
		}
		var id int64
		var reply string
		poll(t, func() bool {
			var err error
			if id, reply, err = incrErr(c, tag); err != nil {
				t.Fatalf("INCR %s: %v", tag, err)
			}
			if reply != "" && !strings.HasPrefix(reply, "TRYAGAIN ") {
				t.Fatalf("INCR %s: %s", tag, reply)
			}
			return reply == ""
		}, func() string { return fmt.Sprintf("INCR %s: still %s", tag, reply) })
		if id <= h {
			t.Errorf("tag %s: a new process hands out %d, at or below %d already handed out", tag, id, h)
		}
	}
	p.Stop(syscall.SIGTERM)

	t.Logf("%v: %d replies (%d IDs) on %d connections; %d TRYAGAIN (the longest run %v), %d connections lost; "+
		"%d restarts after SIGKILL, %d after SIGTERM, %d after SIGTERM then SIGKILL",
		time.Since(start).Round(time.Millisecond), received.Load(), ids, conns, tryAgain,
		res.longestTryAgain.Round(time.Millisecond), netErrs, kinds[killKill], kinds[killTerm], kinds[killTermKill])
	res.ids = ids
	return res
}

// chaosPerEventFor is chaosPerEvent, or LEAF_CHAOS_PER_EVENT: a run by
// hand may hand out millions of IDs.
func chaosPerEventFor(t *testing.T) int64 {
	t.Helper()
	if s := os.Getenv("LEAF_CHAOS_PER_EVENT"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			t.Fatalf("LEAF_CHAOS_PER_EVENT=%q: want a positive count", s)
		}
		return n
	}
	return chaosPerEvent
}

// waitReceived waits until the clients have received n replies. A long
// stall means every server stopped answering: the test fails then rather
// than hang.
func waitReceived(t *testing.T, received *atomic.Int64, n int64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := received.Load(), time.Now()
	for received.Load() < n {
		<-tick.C
		if got := received.Load(); got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > 2*time.Minute {
			t.Fatalf("no reply for 2 minutes (%d received, waiting for %d)", got, n)
		}
	}
}

// Ways to stop a server.
const (
	killKill     = iota // SIGKILL: nothing is given back
	killTerm            // SIGTERM: a clean stop, which must exit 0
	killTermKill        // SIGTERM, then SIGKILL in the middle of the shutdown
)

// cluster is the three server slots; a slot is down while its process is
// stopped and restarted, and clients connect only to slots that are up.
type cluster struct {
	t       *testing.T
	dir     string
	env     []string
	slotEnv func(i int) []string // nil: none
	lives   []*proc              // every process started, for their logs

	mu    sync.Mutex
	slots [chaosServers]slot
	high  map[lifeTag]*atomic.Int64 // the highest ID received from a process life
}

type lifeTag struct {
	slot, life int
	tag        string
}

// highest is the highest ID of tag received so far from one process life.
func (c *cluster) highest(slot, life int, tag string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lifeTag{slot, life, tag}
	h := c.high[k]
	if h == nil {
		h = new(atomic.Int64)
		c.high[k] = h
	}
	return h
}

type slot struct {
	p    *proc
	life int // restarts so far
	up   bool
}

func newCluster(t *testing.T, dir string, env []string) *cluster {
	return newClusterWith(t, dir, env, nil)
}

// newClusterWith is newCluster with slotEnv added to env for slot i's
// servers (nil: nothing).
func newClusterWith(t *testing.T, dir string, env []string, slotEnv func(i int) []string) *cluster {
	c := &cluster{t: t, dir: dir, env: env, slotEnv: slotEnv, high: map[lifeTag]*atomic.Int64{}}
	for i := range c.slots {
		c.slots[i] = slot{p: c.start(i), up: true}
	}
	return c
}

// start starts a server of slot i.
func (c *cluster) start(i int) *proc {
	c.t.Helper()
	env := c.env
	if c.slotEnv != nil {
		env = append(env[:len(env):len(env)], c.slotEnv(i)...)
	}
	p := startLeaf(c.t, c.dir, env...)
	c.mu.Lock()
	c.lives = append(c.lives, p)
	c.mu.Unlock()
	return p
}

// logs are the logs of every server started so far.
func (c *cluster) logs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	logs := make([]string, len(c.lives))
	for i, p := range c.lives {
		logs[i] = p.Log()
	}
	return logs
}

// pick returns the address of an up server, chosen by r, and its slot and
// life.
func (c *cluster) pick(r *rand.Rand) (addr string, slot, life int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []int
	for i, s := range c.slots {
		if s.up {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		return "", 0, 0, false
	}
	i := up[r.IntN(len(up))]
	return c.slots[i].p.Addr, i, c.slots[i].life, true
}

// restart stops the server of slot i the given way and starts a new one.
func (c *cluster) restart(i, kind int) {
	c.t.Helper()
	c.mu.Lock()
	c.slots[i].up = false
	p := c.slots[i].p
	c.mu.Unlock()
	switch kind {
	case killKill:
		p.Stop(syscall.SIGKILL)
	case killTerm:
		p.Stop(syscall.SIGTERM)
	case killTermKill:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.Stop(syscall.SIGKILL)
	}
	np := c.start(i)
	c.mu.Lock()
	c.slots[i] = slot{p: np, life: c.slots[i].life + 1, up: true}
	c.mu.Unlock()
}

// stopAll stops every server cleanly.
func (c *cluster) stopAll() {
	c.t.Helper()
	c.mu.Lock()
	procs := make([]*proc, 0, len(c.slots))
	for i := range c.slots {
		c.slots[i].up = false
		procs = append(procs, c.slots[i].p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		p.Stop(syscall.SIGTERM)
	}
}

// idRange is what one reply gave: the IDs [lo, hi], and to whom.
type idRange struct {
	lo, hi             int64
	client, slot, life int16
}

func (r idRange) who() string {
	return fmt.Sprintf("client %d on server %d life %d", r.client, r.slot, r.life)
}

// chaosOp is one command: INCR tag (n == 0) or INCRBY tag n.
type chaosOp struct {
	tag string
	n   int64
}

// chaosClient sends INCR, INCRBY and pipelines of both to the up servers
// at random, a random number of rounds per connection, and reconnects
// when a connection is lost.
type chaosClient struct {
	id     int
	rng    *rand.Rand
	ranges map[string][]idRange

	tryAgain, netErrs, conns int64
	// tryAgainSince is when the current run of TRYAGAIN replies began
	// (zero: the last reply was an ID); longestTryAgain the longest run.
	tryAgainSince   time.Time
	longestTryAgain time.Duration
}

// batch draws the next round: one INCR, one INCRBY (sometimes larger than
// any segment, so it takes a range of its own) or a pipeline of both.
func (c *chaosClient) batch() []chaosOp {
	op := func() chaosOp {
		tag := chaosTags[c.rng.IntN(len(chaosTags))]
		switch r := c.rng.IntN(20); {
		case r < 12:
			return chaosOp{tag: tag}
		case r < 19:
			return chaosOp{tag: tag, n: 1 + c.rng.Int64N(30)}
		default:
			return chaosOp{tag: tag, n: 150 + c.rng.Int64N(400)}
		}
	}
	n := 1
	if c.rng.IntN(4) == 0 {
		n = 2 + c.rng.IntN(15)
	}
	ops := make([]chaosOp, n)
	for i := range ops {
		ops[i] = op()
	}
	return ops
}

func (c *chaosClient) run(ctx context.Context, t *testing.T, cl *cluster, received *atomic.Int64) {
	for ctx.Err() == nil {
		addr, slot, life, ok := cl.pick(c.rng)
		if !ok {
			t.Errorf("client %d: no server up", c.id)
			return
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			c.netErrs++ // the server went down after pick
			continue
		}
		c.conns++
		c.session(ctx, t, cl, conn, slot, life, received)
		conn.Close()
	}
}

// session runs rounds on one connection until it is lost or the round
// count is reached.
func (c *chaosClient) session(ctx context.Context, t *testing.T, cl *cluster, conn net.Conn, slot, life int, received *atomic.Int64) {
	rc := respConn{r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	last := map[string]int64{} // per tag, the highest ID on this connection
	for range 10 + c.rng.IntN(100) {
		if ctx.Err() != nil {
			return
		}
		ops := c.batch()
		// What this process had answered before the batch was sent: the
		// batch must get higher IDs.
		highs := make([]*atomic.Int64, len(ops))
		before := make([]int64, len(ops))
		for i, op := range ops {
			highs[i] = cl.highest(slot, life, op.tag)
			before[i] = highs[i].Load()
		}
		// A hang guard, not a timing assertion: a reply that never comes
		// fails the test instead of blocking it.
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		if err := rc.send(ops); err != nil {
			c.lost(t, err)
			return
		}
		for i, op := range ops {
			id, reply, err := rc.reply()
			if err != nil {
				c.lost(t, err)
				return
			}
			if reply != "" {
				if strings.HasPrefix(reply, "TRYAGAIN ") {
					c.tryAgain++
					if c.tryAgainSince.IsZero() {
						c.tryAgainSince = time.Now()
					}
				} else {
					t.Errorf("client %d: %s %s %d: unexpected reply %q", c.id, opName(op), op.tag, op.n, reply)
				}
				continue
			}
			if !c.tryAgainSince.IsZero() {
				c.longestTryAgain = max(c.longestTryAgain, time.Since(c.tryAgainSince))
				c.tryAgainSince = time.Time{}
			}
			n := max(op.n, 1)
			lo := id - n + 1
			if lo <= last[op.tag] {
				t.Errorf("client %d, server %d life %d: %s %s %d = %d (IDs from %d) after %d on the same connection",
					c.id, slot, life, opName(op), op.tag, op.n, id, lo, last[op.tag])
			}
			if lo <= before[i] {
				t.Errorf("client %d, server %d life %d: %s %s %d = %d (IDs from %d), though that process had answered %d before it was sent",
					c.id, slot, life, opName(op), op.tag, op.n, id, lo, before[i])
			}
			for h := highs[i].Load(); id > h && !highs[i].CompareAndSwap(h, id); h = highs[i].Load() {
			}
			last[op.tag] = id
			c.ranges[op.tag] = append(c.ranges[op.tag], idRange{lo: lo, hi: id, client: int16(c.id), slot: int16(slot), life: int16(life)})
			received.Add(1)
		}
	}
}

// lost counts a lost connection. One that timed out is a hang, and a reply
// that does not parse is garbage: both fail the test.
func (c *chaosClient) lost(t *testing.T, err error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Errorf("client %d: no reply within a minute: %v", c.id, err)
	case errors.Is(err, errProtocol):
		t.Errorf("client %d: %v", c.id, err)
	}
	c.netErrs++
}

func opName(op chaosOp) string {
	if op.n == 0 {
		return "INCR"
	}
	return "INCRBY"
}

// respConn speaks just enough RESP2 for INCR and INCRBY, reading replies
// one by one, so that every reply received before a connection dies is
// counted.
type respConn struct {
	r *bufio.Reader
	w *bufio.Writer
}

func (rc *respConn) send(ops []chaosOp) error {
	for _, op := range ops {
		if op.n == 0 {
			fmt.Fprintf(rc.w, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(op.tag), op.tag)
		} else {
			n := strconv.FormatInt(op.n, 10)
			fmt.Fprintf(rc.w, "*3\r\n$6\r\nINCRBY\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(op.tag), op.tag, len(n), n)
		}
	}
	return rc.w.Flush()
}

// reply reads one reply: an integer, or an error reply's text.
func (rc *respConn) reply() (int64, string, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return 0, "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, ":"):
		n, err := strconv.ParseInt(line[1:], 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("%w: %q", errProtocol, line)
		}
		return n, "", nil
	case strings.HasPrefix(line, "-"):
		return 0, line[1:], nil
	}
	return 0, "", fmt.Errorf("%w: %q", errProtocol, line)
}

// errProtocol: a reply that is neither an integer nor an error.
var errProtocol = errors.New("unexpected reply")
