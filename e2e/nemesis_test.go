package e2e

// The nemesis test, in the Jepsen style: three servers on one store, six
// clients sending INCR, INCRBY and pipelines of both to the servers at
// random, and a nemesis that, at random, sets floors (LEAF.FLOOR or SET)
// through a server, stops a server (SIGSTOP) past its lease, sometimes
// setting a floor through another meanwhile, kills one (SIGKILL), or
// stops one cleanly (SIGTERM), sometimes while a floor is on its way,
// each restarted at once. A stopped server is sent INCRs before it runs
// again, on a connection it had and on a new one: after the floor's OK,
// when one was set. Every reply is recorded with the time its request was
// sent, every floor acknowledged with the time its OK came back. The
// checker: no ID is handed out twice, and no ID at or below a floor comes
// back to a request sent after that floor's OK. A new server afterwards
// starts above them all.
//
// make test runs nemesisEvents events per store. LEAF_NEMESIS_DURATION
// (a duration: 10m) runs events for that long instead (give go test a
// -timeout to match); LEAF_NEMESIS_SEED picks another seed.

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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

const (
	nemesisClients  = 6
	nemesisEvents   = 12  // per store in make test
	nemesisPerEvent = 300 // replies received between two events, at least
	nemesisSeed     = 20261202
)

var nemesisTags = []string{"nem_a", "nem_b", "nem_c"}

// nemesisEnv: heartbeats every 200ms and leases of 2s, so a stop of a few
// seconds outlasts a lease; small segments, so that loads (and INCRBYs
// larger than a segment) are frequent; a load_timeout that three
// processes on one SQLite file on a busy machine do not run out.
var nemesisEnv = []string{
	"LEAF_CLUSTER_HEARTBEAT=200ms", "LEAF_CLUSTER_LEASE=2s", "LEAF_CLUSTER_ACK_TIMEOUT=20s",
	"LEAF_SEGMENT_DEFAULT_STEP=50", "LEAF_SEGMENT_MAX_STEP=500", "LEAF_SEGMENT_LOAD_TIMEOUT=10s", "LEAF_LOG_LEVEL=info",
}

// nemesisStores: one SQLite file, a PostgreSQL database, an etcd prefix.
var nemesisStores = append([]namedStore{{"SQLite", sqliteStore}}, floorStores...)

func TestNemesis(t *testing.T) {
	t.Parallel()
	forEachStoreOf(t, nemesisStores, func(t *testing.T, dir string, env []string) {
		runNemesis(t, dir, append(env, nemesisEnv...))
	})
}

// nemesisLength is how long to run events (LEAF_NEMESIS_DURATION), 0 to
// run nemesisEvents of them.
func nemesisLength(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("LEAF_NEMESIS_DURATION")
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("LEAF_NEMESIS_DURATION=%q: want a positive duration (10m)", s)
	}
	return d
}

func nemesisSeedFor(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("LEAF_NEMESIS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEAF_NEMESIS_SEED=%q: %v", s, err)
		}
		return n
	}
	return nemesisSeed
}

// nemReply is one reply with IDs: [lo, hi] of tag, to a request sent at
// sent.
type nemReply struct {
	lo, hi int64
	sent   time.Time
	who    string
}

// nemFloor is a floor acknowledged: no ID of tag at or below value may
// come back to a request sent after acked.
type nemFloor struct {
	tag   string
	value int64
	acked time.Time
	how   string
}

// nemesis is the run's shared state.
type nemesis struct {
	t   *testing.T
	cl  *cluster
	rng *rand.Rand

	received atomic.Int64
	high     map[string]*atomic.Int64 // the highest ID of each tag received
	floors   []nemFloor               // in the order acknowledged (the nemesis is one goroutine)
	probes   map[string][]nemReply    // the replies of stopped servers to the nemesis

	floorsAcked, floorsUnconfirmed, floorsRefused int
	floorsInPause, floorsInTerm, pauses, kills    int
	terms, probesSent, probesTryAgain             int
}

func runNemesis(t *testing.T, dir string, env []string) {
	seed := nemesisSeedFor(t)
	length := nemesisLength(t)
	t.Logf("seed %d (LEAF_NEMESIS_SEED), %s", seed, map[bool]string{true: "for " + length.String(), false: fmt.Sprintf("%d events", nemesisEvents)}[length > 0])
	start := time.Now()
	n := &nemesis{t: t, cl: newCluster(t, dir, env), rng: rand.New(rand.NewPCG(seed, 0)), high: map[string]*atomic.Int64{},
		probes: map[string][]nemReply{}}
	for _, tag := range nemesisTags {
		n.high[tag] = new(atomic.Int64)
	}

	ctx, cancel := context.WithCancel(context.Background())
	clients := make([]*nemClient, nemesisClients)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &nemClient{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)+1)), n: n, ranges: map[string][]nemReply{}}
		wg.Go(func() { clients[i].run(ctx) })
	}
	stopClients := sync.OnceFunc(func() { cancel(); wg.Wait() })
	defer stopClients()

	events := 0
	for length > 0 && time.Since(start) < length || length == 0 && events < nemesisEvents {
		waitReceived(t, &n.received, n.received.Load()+nemesisPerEvent)
		switch pick := n.rng.IntN(100); {
		case pick < 25:
			n.floor(-1, 2000)
		case pick < 50:
			n.pause(true)
		case pick < 60:
			n.pause(false)
		case pick < 70:
			n.kills++
			n.cl.restart(n.rng.IntN(chaosServers), killKill)
		case pick < 80:
			n.terms++
			n.cl.restart(n.rng.IntN(chaosServers), killTerm)
		default:
			n.termDuringFloor()
		}
		events++
	}
	waitReceived(t, &n.received, n.received.Load()+nemesisPerEvent)
	stopClients()
	n.cl.stopAll()

	// The checker.
	byTag := map[string][]nemReply{}
	for tag, rs := range n.probes {
		byTag[tag] = append(byTag[tag], rs...)
	}
	var tryAgain, netErrs, conns int64
	for _, c := range clients {
		for tag, rs := range c.ranges {
			byTag[tag] = append(byTag[tag], rs...)
		}
		tryAgain += c.tryAgain
		netErrs += c.netErrs
		conns += c.conns
	}
	var ids int64
	for tag, rs := range byTag {
		ids += checkUnique(t, tag, rs)
		checkFloors(t, tag, rs, n.floors)
	}
	// A new server after all that starts above every ID handed out and
	// every floor acknowledged.
	p := startLeaf(t, dir, env...)
	c := patientClient(t, p)
	for _, tag := range nemesisTags {
		want := n.high[tag].Load()
		for _, f := range n.floors {
			if f.tag == tag {
				want = max(want, f.value)
			}
		}
		if id := redistest.Incr(t, c, tag); id <= want {
			t.Errorf("tag %s: a new server hands out %d, at or below %d (handed out or a floor)", tag, id, want)
		}
	}
	p.Stop(syscall.SIGTERM)

	t.Logf("%v, %d events: %d replies (%d IDs) on %d connections, %d TRYAGAIN, %d connections lost; "+
		"%d floors acknowledged (%d set while a server was stopped past its lease, %d while one shut down), %d unconfirmed, %d refused; "+
		"%d stops past the lease (%d INCRs sent to the stopped server, %d answered TRYAGAIN), %d SIGKILL, %d SIGTERM, each restarted",
		time.Since(start).Round(time.Second), events, n.received.Load(), ids, conns, tryAgain, netErrs,
		n.floorsAcked, n.floorsInPause, n.floorsInTerm, n.floorsUnconfirmed, n.floorsRefused,
		n.pauses, n.probesSent, n.probesTryAgain, n.kills, n.terms)
}

// checkUnique fails t when two replies of tag share an ID; it returns the
// IDs counted.
func checkUnique(t *testing.T, tag string, rs []nemReply) (ids int64) {
	t.Helper()
	slices.SortFunc(rs, func(a, b nemReply) int { return cmp.Compare(a.lo, b.lo) })
	top := 0
	errs := 0
	for i, r := range rs {
		ids += r.hi - r.lo + 1
		if i > 0 && r.lo <= rs[top].hi && errs < 10 {
			errs++
			t.Errorf("tag %s: IDs handed out twice: [%d, %d] to %s and [%d, %d] to %s",
				tag, rs[top].lo, rs[top].hi, rs[top].who, r.lo, r.hi, r.who)
		}
		if r.hi > rs[top].hi {
			top = i
		}
	}
	return ids
}

// checkFloors fails t when a reply of tag to a request sent after a
// floor's OK holds an ID at or below that floor.
func checkFloors(t *testing.T, tag string, rs []nemReply, all []nemFloor) {
	t.Helper()
	var fl []nemFloor
	for _, f := range all {
		if f.tag == tag {
			fl = append(fl, f)
		}
	}
	if len(fl) == 0 {
		return
	}
	// The highest floor acknowledged up to each one.
	upTo := make([]int64, len(fl))
	for i, f := range fl {
		upTo[i] = f.value
		if i > 0 {
			upTo[i] = max(upTo[i], upTo[i-1])
		}
	}
	errs := 0
	for _, r := range rs {
		i := sort.Search(len(fl), func(i int) bool { return fl[i].acked.After(r.sent) }) - 1
		if i >= 0 && r.lo <= upTo[i] && errs < 10 {
			errs++
			t.Errorf("tag %s: [%d, %d] to %s, sent %s after a floor of %d was acknowledged (%s)",
				tag, r.lo, r.hi, r.who, r.sent.Sub(fl[i].acked).Round(time.Microsecond), upTo[i], fl[i].how)
		}
	}
}

// upSlots are the slots whose server is up, but skip.
func (n *nemesis) upSlots(skip int) []int {
	n.cl.mu.Lock()
	defer n.cl.mu.Unlock()
	var up []int
	for i, s := range n.cl.slots {
		if s.up && i != skip {
			up = append(up, i)
		}
	}
	return up
}

func (n *nemesis) proc(i int) *proc {
	n.cl.mu.Lock()
	defer n.cl.mu.Unlock()
	return n.cl.slots[i].p
}

// floorReq is a floor the nemesis sets: through p, with LEAF.FLOOR or SET.
type floorReq struct {
	p     *proc
	tag   string
	value int64
	set   bool
}

func (f floorReq) how() string {
	if f.set {
		return "SET via " + f.p.Addr
	}
	return "LEAF.FLOOR via " + f.p.Addr
}

// pickFloor draws a floor of a tag, above every ID received so far and
// every floor before by up to gap, through a server other than skip.
func (n *nemesis) pickFloor(skip int, gap int64) floorReq {
	up := n.upSlots(skip)
	f := floorReq{p: n.proc(up[n.rng.IntN(len(up))]), tag: nemesisTags[n.rng.IntN(len(nemesisTags))], set: n.rng.IntN(3) == 0}
	f.value = n.high[f.tag].Load()
	for _, old := range n.floors {
		if old.tag == f.tag {
			f.value = max(f.value, old.value)
		}
	}
	f.value += 1 + n.rng.Int64N(gap)
	return f
}

// send sends the floor and returns its outcome and when it came back.
func (f floorReq) send() (time.Time, error) {
	c := redis.NewClient(&redis.Options{Addr: f.p.Addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 2 * time.Minute, WriteTimeout: time.Minute})
	defer c.Close()
	var err error
	if f.set {
		err = c.Set(context.Background(), f.tag, f.value, 0).Err()
	} else {
		err = c.Do(context.Background(), "LEAF.FLOOR", f.tag, f.value).Err()
	}
	return time.Now(), err
}

// record counts a floor's outcome, and keeps it if it was acknowledged;
// it reports whether it was.
func (n *nemesis) record(f floorReq, err error, acked time.Time) bool {
	switch {
	case err == nil:
		n.floorsAcked++
		n.floors = append(n.floors, nemFloor{tag: f.tag, value: f.value, acked: acked, how: f.how()})
		return true
	case strings.Contains(err.Error(), "did not confirm"):
		n.floorsUnconfirmed++ // in effect, not acknowledged
	case strings.HasPrefix(err.Error(), "TRYAGAIN ") || strings.Contains(err.Error(), "never lowers") || strings.Contains(err.Error(), "cannot lower") ||
		strings.Contains(err.Error(), "unavailable") || strings.Contains(err.Error(), "deadline"):
		n.floorsRefused++
	default:
		n.t.Errorf("%s %s %d: %v", f.how(), f.tag, f.value, err)
	}
	return false
}

// floor sets a floor through a server other than skip and records it.
func (n *nemesis) floor(skip int, gap int64) bool {
	f := n.pickFloor(skip, gap)
	acked, err := f.send()
	return n.record(f, err, acked)
}

// termDuringFloor stops a server cleanly (and restarts it) while a floor
// close above the IDs received, likely inside its cached ones, is on its
// way through another: the floor is published as it shuts down.
func (n *nemesis) termDuringFloor() {
	up := n.upSlots(-1)
	i := up[n.rng.IntN(len(up))]
	f := n.pickFloor(i, 50)
	type outcome struct {
		err   error
		acked time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		acked, err := f.send()
		done <- outcome{err, acked}
	}()
	n.terms++
	n.cl.restart(i, killTerm)
	o := <-done
	if n.record(f, o.err, o.acked) {
		n.floorsInTerm++
	}
}

// pause stops a server (SIGSTOP) past its lease: with a floor, until a
// floor set through another server is answered (which waits for the
// stopped server's lease to end in the store); without, until the store
// no longer counts it live (its lease ended there). Then, before it runs again, INCRs are sent to it on a connection
// it served before the stop and on a new one: it must not answer them
// from its cache, which the floor may forbid. The replies are checked
// with the clients'.
func (n *nemesis) pause(withFloor bool) {
	t := n.t
	t.Helper()
	up := n.upSlots(-1)
	i := up[n.rng.IntN(len(up))]
	p := n.proc(i)
	idle := n.dialProbe(p)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	n.pauses++
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()
	if withFloor && n.floor(i, 2000) {
		n.floorsInPause++
	} else {
		// The stop's length is the fault: past the lease (nemesisEnv).
		n.waitLapsed(i, p)
	}
	conns := []*probeConn{idle}
	if fresh, err := net.Dial("tcp", p.Addr); err == nil { // the kernel accepts it
		conns = append(conns, &probeConn{nc: fresh, rc: respConn{r: bufio.NewReader(fresh), w: bufio.NewWriter(fresh)}})
	}
	sent := time.Now()
	var ops []chaosOp
	for _, tag := range nemesisTags {
		ops = append(ops, chaosOp{tag: tag}, chaosOp{tag: tag, n: 1 + n.rng.Int64N(30)})
	}
	for _, c := range conns {
		if c == nil {
			continue
		}
		_ = c.nc.SetDeadline(time.Now().Add(2 * time.Minute))
		if c.rc.send(ops) != nil {
			continue
		}
		n.probesSent += len(ops)
		c.sent = true
	}
	resume()
	for k, c := range conns {
		if c == nil || !c.sent {
			continue
		}
		for _, op := range ops {
			id, reply, err := c.rc.reply()
			if err != nil {
				t.Errorf("the stopped server's reply on probe %d: %v", k, err)
				break
			}
			if reply != "" {
				if !strings.HasPrefix(reply, "TRYAGAIN ") {
					t.Errorf("the stopped server answered %s %s %d: %q", opName(op), op.tag, op.n, reply)
				}
				n.probesTryAgain++
				continue
			}
			n.probes[op.tag] = append(n.probes[op.tag], nemReply{lo: id - max(op.n, 1) + 1, hi: id, sent: sent,
				who: fmt.Sprintf("the nemesis, from %s stopped past its lease", p.Addr)})
			h := n.high[op.tag]
			for v := h.Load(); id > v && !h.CompareAndSwap(v, id); v = h.Load() {
			}
		}
		c.nc.Close()
	}
}

// waitLapsed waits until the store no longer counts p, the server of slot
// stopped, live: LEAF.NODES through another server, which compares the
// lease with the store's clock, lists it no more. An error reply (the
// store busy) is read again.
func (n *nemesis) waitLapsed(stopped int, p *proc) {
	t := n.t
	t.Helper()
	other := n.proc(n.upSlots(stopped)[0])
	c := redis.NewClient(&redis.Options{Addr: other.Addr, PoolSize: 1, MaxRetries: -1, ReadTimeout: 2 * time.Minute, WriteTimeout: time.Minute})
	defer c.Close()
	var listed any
	var err error
	poll(t, func() bool {
		if listed, err = c.Do(context.Background(), "LEAF.NODES").Result(); err != nil {
			return false
		}
		for _, e := range listed.([]any) {
			if e.(map[any]any)["addr"] == p.Addr {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("%s, stopped, still live in the store: LEAF.NODES through %s = %v, %v", p.Addr, other.Addr, listed, err)
	})
}

// probeConn is a connection of the nemesis to a server it stops.
type probeConn struct {
	nc   net.Conn
	rc   respConn
	sent bool
}

// dialProbe opens a connection to p that p has served (a PING answered),
// so that p holds it when it is stopped; nil if p does not answer.
func (n *nemesis) dialProbe(p *proc) *probeConn {
	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		return nil
	}
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	c := &probeConn{nc: nc, rc: respConn{r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}}
	fmt.Fprint(c.rc.w, "*1\r\n$4\r\nPING\r\n")
	if c.rc.w.Flush() != nil {
		nc.Close()
		return nil
	}
	if line, err := c.rc.r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		nc.Close()
		return nil
	}
	return c
}

// nemClient sends INCR, INCRBY and pipelines of both to the up servers at
// random, recording each reply with the time its request was sent.
type nemClient struct {
	id     int
	rng    *rand.Rand
	n      *nemesis
	ranges map[string][]nemReply

	tryAgain, netErrs, conns int64
}

func (c *nemClient) batch() []chaosOp {
	op := func() chaosOp {
		tag := nemesisTags[c.rng.IntN(len(nemesisTags))]
		switch r := c.rng.IntN(20); {
		case r < 12:
			return chaosOp{tag: tag}
		case r < 19:
			return chaosOp{tag: tag, n: 1 + c.rng.Int64N(30)}
		default:
			return chaosOp{tag: tag, n: 150 + c.rng.Int64N(450)} // often beyond any segment
		}
	}
	k := 1
	if c.rng.IntN(4) == 0 {
		k = 2 + c.rng.IntN(15)
	}
	ops := make([]chaosOp, k)
	for i := range ops {
		ops[i] = op()
	}
	return ops
}

func (c *nemClient) run(ctx context.Context) {
	t := c.n.t
	for ctx.Err() == nil {
		addr, slot, life, ok := c.n.cl.pick(c.rng)
		if !ok {
			t.Errorf("client %d: no server up", c.id)
			return
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			c.netErrs++ // restarted after pick
			continue
		}
		c.conns++
		c.session(ctx, conn, fmt.Sprintf("client %d on server %d life %d", c.id, slot, life))
		conn.Close()
	}
}

func (c *nemClient) session(ctx context.Context, conn net.Conn, who string) {
	t := c.n.t
	rc := respConn{r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	for range 10 + c.rng.IntN(100) {
		if ctx.Err() != nil {
			return
		}
		ops := c.batch()
		// A hang guard, not a timing assertion.
		_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
		sent := time.Now()
		if err := rc.send(ops); err != nil {
			c.lost(err)
			return
		}
		for _, op := range ops {
			id, reply, err := rc.reply()
			if err != nil {
				c.lost(err)
				return
			}
			if reply != "" {
				if strings.HasPrefix(reply, "TRYAGAIN ") {
					c.tryAgain++
				} else {
					t.Errorf("%s: %s %s %d: unexpected reply %q", who, opName(op), op.tag, op.n, reply)
				}
				continue
			}
			lo := id - max(op.n, 1) + 1
			c.ranges[op.tag] = append(c.ranges[op.tag], nemReply{lo: lo, hi: id, sent: sent, who: who})
			h := c.n.high[op.tag]
			for v := h.Load(); id > v && !h.CompareAndSwap(v, id); v = h.Load() {
			}
			c.n.received.Add(1)
		}
	}
}

// lost counts a lost connection; one that timed out is a hang, and a
// reply that does not parse is garbage: both fail the test.
func (c *nemClient) lost(err error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.n.t.Errorf("client %d: no reply within 2 minutes: %v", c.id, err)
	case errors.Is(err, errProtocol):
		c.n.t.Errorf("client %d: %v", c.id, err)
	}
	c.netErrs++
}
