package server

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// Per-command counters and times, for INFO commandstats, errorstats and
// latencystats, LATENCY HISTOGRAM, SLOWLOG and metrics
// (leaf_commands_total).
//
// Nothing on the path of a command is shared with another core. A
// connection counts its commands in plain fields while a turn runs
// (resp.TurnEnder), and times them by runs: the commands of a turn that
// follow one another under the same name (a pipeline of INCRs) are one
// run, timed with one clock read where it starts and one where it ends,
// each charged the run's average. A turn of one command is timed exactly,
// and a command that may block (a segment load, a lookup) is always
// alone in its turn. When a run ends its counts, time and histogram
// bucket are added, three atomic adds, to the records of its shard: the
// shard of the event loop serving the connection, whose connections run
// one at a time on one goroutine, so its lines stay in one core's cache.
// (Connections with a goroutine of their own, TLS ones, share a few
// shards by id.) A reader (INFO, a scrape) sums the shards' records,
// never the connections.
//
// A command is counted once answered, never before: were calls counted
// on arrival and errors later, calls minus errors could go down between
// two scrapes, and Prometheus would read that as a reset.

// CommandStat is how often one command ran since the server started.
type CommandStat struct {
	// Name is the command's lowercase name, "container|sub" for a
	// subcommand (as COMMAND INFO names it), or UnknownCommand for every
	// name leaf does not know (so clients cannot grow the set of names).
	Name string
	// Calls counts the times the command was answered, with a result or
	// an error, refusals included; a command still running is not counted
	// yet.
	Calls int64
	// Errors counts the calls answered with an error reply: Rejected plus
	// Failed. Calls-Errors, the calls answered without error, never goes
	// down between two calls of CommandStats.
	Errors int64
	// Rejected counts the calls refused before the command ran (wrong
	// arity, NOAUTH, an unknown subcommand or command): Redis's
	// rejected_calls. Failed counts the calls that ran and answered an
	// error (a bad argument, an allocator error): its failed_calls.
	Rejected, Failed int64
	// Time is the time the calls that ran spent running (Redis's usec).
	Time time.Duration
	// Fast counts the calls answered where they must not block, from
	// memory (for INCR and INCRBY: INFO's keyspace_hits).
	Fast int64
}

// UnknownCommand is the CommandStat name of commands leaf does not know.
const UnknownCommand = "unknown"

// cmdRecord is one command's counters and histogram in one shard. The
// shard's connections add, readers load.
type cmdRecord struct {
	okFast, okSlow, failed, rejected, nanos atomic.Int64
	hist                                    histogram
}

// shard holds the records of the connections of one event loop (or of a
// group of goroutine connections), one per command, each made on first
// use.
type shard struct {
	by []atomic.Pointer[cmdRecord]
}

func newShard(n int) *shard { return &shard{by: make([]atomic.Pointer[cmdRecord], n)} }

// record is the shard's record of command i, nil for a connection that
// was never registered (tests that dispatch directly).
func (sh *shard) record(i int) *cmdRecord {
	if sh == nil {
		return nil
	}
	r := sh.by[i].Load()
	if r == nil {
		// The loop's goroutine and one running a blocking command for it
		// may both come here first: one record wins.
		sh.by[i].CompareAndSwap(nil, new(cmdRecord))
		r = sh.by[i].Load()
	}
	return r
}

// clientStats are a connection's part: its shard, what CLIENT LIST shows,
// and the open run, used only by the connection's own goroutine.
type clientStats struct {
	sh *shard
	// last is the command that ran last (CLIENT LIST's cmd); lastAt when
	// a turn of the connection last ended (idle), in Server.clock's
	// nanoseconds, stored at most every lastAtStep.
	last   atomic.Pointer[command]
	lastAt atomic.Int64
	seenAt int64 // lastAt's value, read without an atomic

	run      *cmdRecord // nil: no run open
	runCmd   *command
	runFast  bool
	runStart int64
	runN     int64 // commands in the run, the running one included
	runFail  int64 // of which answered an error
	running  bool  // a command of the run is running now
	failed   bool  // the running command answered an error
	// The arguments of the run's first command, kept for SLOWLOG
	// (cmd_slowlog.go): args slices argBuf, both reused.
	args   [][]byte
	argBuf []byte
}

// lastAtStep bounds how stale CLIENT LIST's idle may be: a connection
// stores the time of its last turn once per step, not once per turn.
const lastAtStep = int64(100 * time.Millisecond)

// begin counts cmd as running, where it must not block (fast) or may.
// It opens a run, reading the clock, unless cmd continues the open one.
func (s *Server) begin(c *client, cmd *command, fast bool, args [][]byte) {
	cs := &c.stats
	cs.failed = false
	if cs.run != nil && cs.runCmd == cmd && cs.runFast == fast {
		cs.runN++
		cs.running = true
		if cs.last.Load() != cmd { // after a refused command
			cs.last.Store(cmd)
		}
		return
	}
	r := cs.sh.record(cmd.stat)
	if r == nil {
		return
	}
	cs.running = true
	now := s.clock()
	if cs.run != nil {
		s.closeRun(c, now)
	}
	cs.run, cs.runCmd, cs.runFast, cs.runStart, cs.runN, cs.runFail = r, cmd, fast, now, 1, 0
	cs.keepArgs(cmd, args)
	if cs.last.Load() != cmd {
		cs.last.Store(cmd)
	}
}

// unbegin takes back begin when a command did not run after all (a try
// that found it must block).
func (cs *clientStats) unbegin() {
	if !cs.running {
		return
	}
	cs.running = false
	if cs.runN--; cs.runN == 0 {
		cs.run = nil
	}
}

// end counts the running command as answered.
func (cs *clientStats) end() {
	if !cs.running {
		return
	}
	cs.running = false
	if cs.failed {
		cs.runFail++
		cs.run.failed.Add(1)
	}
}

// reject counts a command refused before it ran (nil: an unknown one).
// As Redis, CLIENT LIST's cmd shows it all the same (NULL when unknown).
func (cs *clientStats) reject(cmd *command) {
	cs.last.Store(cmd)
	i := 0
	if cmd != nil {
		i = cmd.stat
	}
	if r := cs.sh.record(i); r != nil {
		r.rejected.Add(1)
	}
}

// closeRun ends the open run at now: its calls, time and histogram
// bucket go to the record, each call charged the run's average; a run
// slower than the threshold goes to SLOWLOG and LATENCY.
func (s *Server) closeRun(c *client, now int64) {
	cs := &c.stats
	r, n := cs.run, cs.runN
	cs.run = nil
	d := max(now-cs.runStart, 0)
	if ok := n - cs.runFail; ok > 0 {
		if cs.runFast {
			r.okFast.Add(ok)
		} else {
			r.okSlow.Add(ok)
		}
	}
	r.nanos.Add(d)
	per := d / n
	r.hist.b[bucketOf(per)].Add(n)
	if s.slowlog.threshold >= 0 && per >= int64(s.slowlog.threshold) {
		s.slowEntry(c, cs.runFast, cs.args, per)
	}
}

// EndTurn closes the connection's open run (resp.TurnEnder): the
// commands of the turn that just ran are counted and timed before their
// replies are written.
func (c *client) EndTurn(conn *resp.Conn) {
	cs := &c.stats
	if cs.run == nil {
		return
	}
	now := c.s.clock()
	c.s.closeRun(c, now)
	if now-cs.seenAt >= lastAtStep {
		cs.seenAt = now
		cs.lastAt.Store(now)
	}
}

// serverStats numbers the commands and keeps the shards.
type serverStats struct {
	names []string   // by index; names[0] is UnknownCommand
	cmds  []*command // by index; nil for UnknownCommand

	mu     sync.Mutex
	shards map[int]*shard // by event loop, or goroutine group (negative)
}

// init numbers every command and subcommand of sorted (by name, so the
// numbering does not depend on map order).
func (st *serverStats) init(sorted []*command) {
	st.names = []string{UnknownCommand}
	st.cmds = []*command{nil}
	for _, c := range sorted {
		c.stat = len(st.names)
		st.names = append(st.names, c.name)
		st.cmds = append(st.cmds, c)
		for _, sub := range c.sortedSubs() {
			sub.stat = len(st.names)
			st.names = append(st.names, sub.name)
			st.cmds = append(st.cmds, sub)
		}
	}
	st.shards = map[int]*shard{}
}

// goroutineShards is the number of shards per core of the connections
// that have a goroutine of their own: with a few times more shards than
// cores, two of them rarely meet on one at once.
const goroutineShards = 4

// add gives a newly accepted connection its shard: its event loop's, or
// for a connection with a goroutine of its own, one of a few by its id.
func (st *serverStats) add(cs *clientStats, conn *resp.Conn, id int64, procs int) {
	key := conn.Loop()
	if key < 0 {
		key = -1 - int(id%int64(goroutineShards*procs))
	}
	st.mu.Lock()
	sh := st.shards[key]
	if sh == nil {
		sh = newShard(len(st.names))
		st.shards[key] = sh
	}
	st.mu.Unlock()
	cs.sh = sh
}

// snapshot lists the shards.
func (st *serverStats) snapshot() []*shard {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]*shard, 0, len(st.shards))
	for _, sh := range st.shards {
		out = append(out, sh)
	}
	return out
}

// cmdTotals are one command's counts summed over the shards.
type cmdTotals struct {
	okFast, okSlow, failed, rejected, nanos int64
	hist                                    *histCounts // nil when no call was timed
}

// sums are the totals of every command, index by index; withHist adds
// the histograms. The failures are read before the successes: a failed
// call is counted as it fails, its run's successes when the run ends.
func (st *serverStats) sums(withHist bool) []cmdTotals {
	sum := make([]cmdTotals, len(st.names))
	for _, sh := range st.snapshot() {
		for i := range sh.by {
			r := sh.by[i].Load()
			if r == nil {
				continue
			}
			t := &sum[i]
			t.failed += r.failed.Load()
			t.rejected += r.rejected.Load()
			t.okFast += r.okFast.Load()
			t.okSlow += r.okSlow.Load()
			t.nanos += r.nanos.Load()
			if withHist {
				if t.hist == nil {
					t.hist = new(histCounts)
				}
				for b := range r.hist.b {
					t.hist[b] += r.hist.b[b].Load()
				}
			}
		}
	}
	return sum
}

// executed is the number of commands that ran since start (refusals not
// included): total_commands_processed. It allocates nothing: the sampler
// calls it ten times a second.
func (st *serverStats) executed() int64 {
	var n int64
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sh := range st.shards {
		for i := range sh.by {
			if r := sh.by[i].Load(); r != nil {
				n += r.okFast.Load() + r.okSlow.Load() + r.failed.Load()
			}
		}
	}
	return n
}

// CommandStats returns the counts of every command that was answered at
// least once since the server started, sorted by name. It is cheap
// enough to call on every metrics scrape: it reads each shard's records
// once and takes no lock a command takes.
func (s *Server) CommandStats() []CommandStat {
	var out []CommandStat
	for i, t := range s.stats.sums(false) {
		calls := t.okFast + t.okSlow + t.failed + t.rejected
		if calls == 0 {
			continue
		}
		out = append(out, CommandStat{
			Name: s.stats.names[i], Calls: calls, Errors: t.failed + t.rejected,
			Rejected: t.rejected, Failed: t.failed, Time: time.Duration(t.nanos), Fast: t.okFast,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ConnectedClients is the number of open client connections.
func (s *Server) ConnectedClients() int { return s.connectedClients() }

// errorStats counts error replies by their code, the first word
// ("ERR", "NOAUTH", "TRYAGAIN"), as Redis's errorstats. Errors are off
// the hot path, but a client can send nothing else, so the map is read
// under a read lock and a code's counter is an atomic. As Redis, at
// most maxErrorCodes codes are kept; later new codes are not counted
// apart (their replies still count in total_error_replies).
type errorStats struct {
	mu    sync.RWMutex
	codes map[string]*atomic.Int64
	total atomic.Int64
}

// maxErrorCodes is Redis's ERRORSTATS_LIMIT.
const maxErrorCodes = 128

// count counts one error reply with text msg.
func (e *errorStats) count(msg string) {
	e.total.Add(1)
	code := msg
	for i := 0; i < len(msg); i++ {
		if msg[i] == ' ' {
			code = msg[:i]
			break
		}
	}
	e.mu.RLock()
	n := e.codes[code]
	e.mu.RUnlock()
	if n == nil {
		e.mu.Lock()
		if n = e.codes[code]; n == nil {
			if e.codes == nil {
				e.codes = map[string]*atomic.Int64{}
			}
			if len(e.codes) >= maxErrorCodes {
				e.mu.Unlock()
				return
			}
			n = new(atomic.Int64)
			e.codes[code] = n
		}
		e.mu.Unlock()
	}
	n.Add(1)
}

// snapshot returns the counts by code, sorted by code.
func (e *errorStats) snapshot() (codes []string, counts []int64) {
	e.mu.RLock()
	for code := range e.codes {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		counts = append(counts, e.codes[code].Load())
	}
	e.mu.RUnlock()
	return codes, counts
}
