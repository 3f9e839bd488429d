package e2e

// The process test of package client: three processes take IDs through it,
// eight goroutines each on one generator, while the leaf servers they
// lease from are killed and restarted on one database. The client
// processes are testdata/idclient, built by the test with -race and driven
// over stdin and stdout.

import (
	"bufio"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/internal/redistest"
)

const (
	cpProcs      = 3    // client processes, each on its own leaf server
	cpGoroutines = 8    // goroutines per process, sharing its generator
	cpRounds     = 8    // rounds of calls, a server killed or stopped in each
	cpCalls      = 4000 // calls per client process and round
	cpMaxLease   = 100  // the clients' MaxLease
	cpProbeMS    = 500  // the deadline of a call while the servers are away
	cpTag        = "client_procs"
)

// cpEnv: tiny segments, so that the servers go to the database all the
// time, and leases of up to 100 IDs take ranges of their own; a
// load_timeout a busy machine does not run out, as chaosEnv's.
var cpEnv = []string{"LEAF_SEGMENT_DEFAULT_STEP=50", "LEAF_SEGMENT_MAX_STEP=400", "LEAF_SEGMENT_LOAD_TIMEOUT=10s", "LEAF_LOG_LEVEL=info"}

// TestClientProcesses: no ID twice across the three processes, and each
// goroutine's IDs increase, through SIGKILLs and SIGTERMs of the servers;
// with the servers hung (SIGSTOP) and then gone (SIGKILL), Next serves
// what the generator holds (at most two leases), then fails within its
// deadline; once they are back, Next serves again, above every ID before.
func TestClientProcesses(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "idclient")
	build := exec.Command("go", "build", "-race", "-o", bin, "./testdata/idclient")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/idclient: %v\n%s", err, out)
	}
	forEachSharedStore(t, func(t *testing.T, dir string, env []string) {
		runClientProcesses(t, bin, dir, append(env, cpEnv...))
	})
}

func runClientProcesses(t *testing.T, bin, dir string, env []string) {
	seed := chaosSeedFor(t)
	t.Logf("seed %d (set LEAF_CHAOS_SEED to change it)", seed)
	start := time.Now()
	var servers [cpProcs]*proc
	var clients [cpProcs]*idClient
	for i := range servers {
		servers[i] = startLeaf(t, dir, env...)
		clients[i] = startIDClient(t, bin, dir, i, seed)
		clients[i].call("addr "+servers[i].Addr, "ok")
	}
	restart := func(i int) {
		servers[i] = startLeaf(t, dir, env...)
		clients[i].call("addr "+servers[i].Addr, "ok")
	}

	// Rounds: a server is killed (or stopped cleanly) while every client
	// is in the middle of its round.
	sched := rand.New(rand.NewPCG(seed, 0))
	kills, terms := 0, 0
	for range cpRounds {
		for _, c := range clients {
			c.send("run " + strconv.Itoa(cpCalls))
		}
		for _, c := range clients {
			c.expect("half")
		}
		i, sig := sched.IntN(cpProcs), syscall.SIGKILL
		if sched.IntN(4) == 0 {
			sig = syscall.SIGTERM
			terms++
		} else {
			kills++
		}
		clients[i].call("down", "ok")
		servers[i].Stop(sig)
		restart(i)
		for _, c := range clients {
			c.expect("ran")
		}
	}

	// The servers hang: the cached IDs are served, then Next fails at its
	// deadline. They resume: the lease in flight arrives.
	var recovered [cpProcs]int64
	for _, p := range servers {
		p.Pause()
	}
	for _, c := range clients {
		c.probe(t, "hung", true)
	}
	for _, p := range servers {
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		recovered[i] = c.recover()
	}

	// The servers are gone: the same, until new ones are started.
	for i, c := range clients {
		servers[i].Stop(syscall.SIGKILL)
		c.probe(t, "gone", false)
		restart(i)
		c.recover()
	}

	// Every range received, by process and goroutine.
	var all []cpRange
	for i, c := range clients {
		t.Logf("client %d: %s", i, c.call("exit", "bye"))
		c.wait()
		byWho := c.ranges()
		var top int64 // highest ID of the rounds and the first probe
		for who, rs := range byWho {
			for k, r := range rs {
				if k > 0 && r.lo <= rs[k-1].hi {
					t.Errorf("client %d goroutine %d: [%d, %d] after [%d, %d]", i, who, r.lo, r.hi, rs[k-1].lo, rs[k-1].hi)
				}
				if who < cpGoroutines { // the rounds', not the probes'
					top = max(top, r.hi)
				}
				all = append(all, cpRange{lo: r.lo, hi: r.hi, client: i, goroutine: who})
			}
		}
		if recovered[i] <= top {
			t.Errorf("client %d: %d after the servers resumed, not above %d received before", i, recovered[i], top)
		}
	}
	slices.SortFunc(all, func(a, b cpRange) int { return cmp.Compare(a.lo, b.lo) })
	var ids, highest int64
	for k, r := range all {
		ids += r.hi - r.lo + 1
		highest = max(highest, r.hi)
		if k > 0 && r.lo <= all[k-1].hi {
			p := all[k-1]
			t.Errorf("IDs handed out twice: [%d, %d] to client %d goroutine %d and [%d, %d] to client %d goroutine %d",
				p.lo, p.hi, p.client, p.goroutine, r.lo, r.hi, r.client, r.goroutine)
		}
	}
	for _, p := range servers {
		p.Stop(syscall.SIGTERM)
	}

	// A new server continues above them all.
	p := startLeaf(t, dir, env...)
	if id := redistest.Incr(t, patientClient(t, p), cpTag); id <= highest {
		t.Errorf("a new server hands out %d, at or below %d already handed out", id, highest)
	}
	p.Stop(syscall.SIGTERM)
	t.Logf("%v: %d calls, %d IDs; %d servers SIGKILLed, %d SIGTERMed during the rounds",
		time.Since(start).Round(time.Millisecond), len(all), ids, kills, terms)
}

// cpRange is what one call received: the IDs [lo, hi], and who called.
type cpRange struct {
	lo, hi            int64
	client, goroutine int
}

// idClient is one testdata/idclient process.
type idClient struct {
	t       *testing.T
	i       int
	cmd     *exec.Cmd
	stdin   *bufio.Writer
	closeIn func() error
	lines   chan string // its answers; closed at EOF
	pending []string    // answers read while waiting for another
	stderr  logbuf.Buffer
	out     string // where it writes the ranges
	exited  chan error
}

func startIDClient(t *testing.T, bin, dir string, i int, seed uint64) *idClient {
	t.Helper()
	c := &idClient{t: t, i: i, out: filepath.Join(dir, fmt.Sprintf("client%d.ranges", i)), lines: make(chan string, 64), exited: make(chan error, 1)}
	c.cmd = exec.Command(bin, "-tag", cpTag, "-goroutines", strconv.Itoa(cpGoroutines), "-min-lease", "1",
		"-max-lease", strconv.Itoa(cpMaxLease), "-lease-duration", "2ms",
		"-seed", strconv.FormatUint(seed+uint64(i), 10), "-out", c.out)
	c.cmd.Env = append(os.Environ(), goraceEnv())
	c.cmd.Stderr = &c.stderr
	in, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin, c.closeIn = bufio.NewWriter(in), in.Close
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.exited <- c.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = c.closeIn()
		_ = c.cmd.Process.Kill()
		for range c.lines {
		}
	})
	return c
}

func (c *idClient) send(line string) {
	c.t.Helper()
	if _, err := c.stdin.WriteString(line + "\n"); err != nil {
		c.t.Fatalf("client %d: %v", c.i, err)
	}
	if err := c.stdin.Flush(); err != nil {
		c.t.Fatalf("client %d: %v\n%s", c.i, err, c.stderr.String())
	}
}

// call sends a command and returns the answer starting with want.
func (c *idClient) call(line, want string) string {
	c.t.Helper()
	c.send(line)
	return c.expect(want)
}

// expect returns the next answer starting with want (a word); the answers
// of other commands read meanwhile are kept for later. An "error" answer
// fails the test.
func (c *idClient) expect(want string) string {
	c.t.Helper()
	match := func(l string) bool { return l == want || strings.HasPrefix(l, want+" ") }
	for k, l := range c.pending {
		if match(l) {
			c.pending = slices.Delete(c.pending, k, k+1)
			return l
		}
	}
	// A hang guard, not a timing assertion.
	timeout := time.NewTimer(5 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			switch {
			case !ok:
				c.t.Fatalf("client %d exited while %q was awaited\n%s", c.i, want, c.stderr.String())
			case strings.HasPrefix(l, "error "):
				c.t.Fatalf("client %d: %s\n%s", c.i, l, c.stderr.String())
			case match(l):
				return l
			}
			c.pending = append(c.pending, l)
		case <-timeout.C:
			c.t.Fatalf("client %d: no %q within 5 minutes", c.i, want)
		}
	}
}

// probe takes IDs with a short deadline while the servers are away: what
// the generator holds (at most two leases), then ErrUnavailable; at the
// deadline when the server hangs (deadline is true).
func (c *idClient) probe(t *testing.T, how string, deadline bool) {
	t.Helper()
	f := strings.SplitN(c.call("probe "+strconv.Itoa(cpProbeMS), "probe"), " ", 5)
	ids, _ := strconv.Atoi(f[1])
	classes := strings.Split(f[2], ",")
	t.Logf("client %d, servers %s: %s IDs from the leases held, then after %s ms: %s", c.i, how, f[1], f[3], f[4])
	if ids > 2*cpMaxLease {
		t.Errorf("client %d, servers %s: %d IDs served, more than two leases of at most %d", c.i, how, ids, cpMaxLease)
	}
	if !slices.Contains(classes, "unavailable") {
		t.Errorf("client %d, servers %s: error %q, want ErrUnavailable", c.i, how, f[4])
	}
	if deadline && !slices.Contains(classes, "deadline") {
		t.Errorf("client %d, servers %s: error %q, want the deadline's", c.i, how, f[4])
	}
}

// recover is the ID a call with a long deadline gets once the server is
// back.
func (c *idClient) recover() int64 {
	c.t.Helper()
	f := strings.Fields(c.call("recover", "recovered"))
	id, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		c.t.Fatalf("client %d: %q", c.i, f)
	}
	return id
}

// wait waits for the process to exit after "exit"; it must exit 0 (a race
// report fails it).
func (c *idClient) wait() {
	c.t.Helper()
	_ = c.closeIn()
	for range c.lines {
	}
	if err := <-c.exited; err != nil {
		c.t.Fatalf("client %d: %v\n%s", c.i, err, c.stderr.String())
	}
}

// ranges reads what the process received: per goroutine, its calls'
// ranges in order.
func (c *idClient) ranges() map[int][]cpRange {
	c.t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil {
		c.t.Fatal(err)
	}
	by := map[int][]cpRange{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var who int
		var r cpRange
		if _, err := fmt.Sscan(line, &who, &r.lo, &r.hi); err != nil {
			c.t.Fatalf("client %d: %q: %v", c.i, line, err)
		}
		by[who] = append(by[who], r)
	}
	return by
}
