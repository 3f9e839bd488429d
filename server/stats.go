package server

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Per-command counters for metrics (leaf_commands_total). Each connection
// counts its own commands in an array of its own, so the hot path adds one
// uncontended atomic to a cache line no other connection writes; a scrape
// sums the live connections' arrays and the totals of the closed ones.
//
// A command is counted once answered, as ok or as an error, never before:
// were calls counted on arrival and errors later, calls minus errors could
// go down between two scrapes, and Prometheus would read that as a reset.

// CommandStat is how often one command ran since the server started.
type CommandStat struct {
	// Name is the command's lowercase name, "container|sub" for a
	// subcommand (as COMMAND INFO names it), or UnknownCommand for every
	// name leaf does not know (so clients cannot grow the set of names).
	Name string
	// Calls counts the times the command was answered, with a result or
	// an error; a command still running is not counted yet.
	Calls int64
	// Errors counts the calls answered with an error reply (wrong arity,
	// NOAUTH, a bad argument, an allocator error). Calls-Errors, the calls
	// answered without error, never goes down between two calls of
	// CommandStats.
	Errors int64
}

// UnknownCommand is the CommandStat name of commands leaf does not know.
const UnknownCommand = "unknown"

// cmdCounter is one command's counts on one connection.
type cmdCounter struct {
	ok, errors atomic.Int64
}

// clientStats are a connection's per-command counters. by is indexed by
// command.stat (0: unknown commands); cur is the command running, so its
// outcome is charged to it, and failed says it answered an error. Only the
// connection's own goroutine uses them, inside a command.
type clientStats struct {
	by     []cmdCounter
	cur    *cmdCounter
	failed bool
}

// begin makes cmd (nil: an unknown command) the command running. It costs
// two stores: the count is taken by fail or end. A connection that was
// never registered (tests that dispatch directly) counts nothing.
func (cs *clientStats) begin(cmd *command) {
	i := 0
	if cmd != nil {
		i = cmd.stat
	}
	cs.failed = false
	if i >= len(cs.by) {
		cs.cur = nil
		return
	}
	cs.cur = &cs.by[i]
}

// fail counts the running command as answered with an error (once).
func (cs *clientStats) fail() {
	if cs.cur != nil && !cs.failed {
		cs.failed = true
		cs.cur.errors.Add(1)
	}
}

// end counts the running command as answered, unless fail already did.
func (cs *clientStats) end() {
	if cs.cur != nil && !cs.failed {
		cs.cur.ok.Add(1)
	}
	cs.cur = nil
}

// serverStats numbers the commands and keeps the connections' counters:
// the live connections' arrays, and the sums of the closed ones. Adding a
// closed connection's counts and forgetting it happen under one lock, the
// lock a scrape holds, so a scrape never misses nor doubles a connection
// and the totals never go down.
type serverStats struct {
	names []string // by index; names[0] is UnknownCommand

	mu   sync.Mutex
	live map[*clientStats]struct{}
	done []cmdTotals
}

type cmdTotals struct{ ok, errors int64 }

// init numbers every command and subcommand of sorted (by name, so the
// numbering does not depend on map order).
func (st *serverStats) init(sorted []*command) {
	st.names = []string{UnknownCommand}
	for _, c := range sorted {
		c.stat = len(st.names)
		st.names = append(st.names, c.name)
		for _, sub := range c.sortedSubs() {
			sub.stat = len(st.names)
			st.names = append(st.names, sub.name)
		}
	}
	st.live = map[*clientStats]struct{}{}
	st.done = make([]cmdTotals, len(st.names))
}

// add gives a newly accepted connection its counters.
func (st *serverStats) add(cs *clientStats) {
	cs.by = make([]cmdCounter, len(st.names))
	st.mu.Lock()
	st.live[cs] = struct{}{}
	st.mu.Unlock()
}

// remove folds a closed connection's counts into the totals.
func (st *serverStats) remove(cs *clientStats) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.live[cs]; !ok {
		return
	}
	delete(st.live, cs)
	for i := range cs.by {
		st.done[i].ok += cs.by[i].ok.Load()
		st.done[i].errors += cs.by[i].errors.Load()
	}
}

// CommandStats returns the counts of every command that ran at least once
// since the server started, sorted by name. It is cheap enough to call on
// every metrics scrape: it reads each open connection's counters once and
// takes no lock a command takes.
func (s *Server) CommandStats() []CommandStat {
	st := &s.stats
	sum := make([]cmdTotals, len(st.names))
	st.mu.Lock()
	copy(sum, st.done)
	for cs := range st.live {
		for i := range cs.by {
			sum[i].ok += cs.by[i].ok.Load()
			sum[i].errors += cs.by[i].errors.Load()
		}
	}
	st.mu.Unlock()
	var out []CommandStat
	for i, t := range sum {
		if calls := t.ok + t.errors; calls > 0 {
			out = append(out, CommandStat{Name: st.names[i], Calls: calls, Errors: t.errors})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ConnectedClients is the number of open client connections.
func (s *Server) ConnectedClients() int { return s.connectedClients() }
