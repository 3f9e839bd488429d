package server

import (
	"sort"
	"strconv"
	"sync"

	"github.com/leaf-id/leaf/resp"
)

// LATENCY LATEST|HISTORY|RESET|HISTOGRAM|HELP, as Redis 7.0 answers them.
//
// The latency monitor keeps, per event, the worst latency of each second
// with one (the last 160 such seconds), the latest and the all-time
// worst. leaf's events are Redis's two for commands: "command" for one
// that may block (in leaf: a command that waited on the database, most
// often an INCR waiting for a segment load) and "fast-command" for one
// answered from memory; an event is recorded when a command takes at
// least server.slowlog_threshold, the threshold SLOWLOG uses (Redis's
// latency-monitor-threshold is a setting of its own, off by default).
// HISTOGRAM reads the per-command histograms (histogram.go).

// latencyHistoryLen is Redis's LATENCY_TS_LEN.
const latencyHistoryLen = 160

// latencySample is an event's worst latency in one second.
type latencySample struct {
	at, millis int64
}

// latencySeries is one event's record.
type latencySeries struct {
	samples []latencySample // oldest first, at most latencyHistoryLen
	max     int64
}

// latencyMonitor keeps the events' records.
type latencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencySeries
}

// add records a latency of millis ms at unix second at, as Redis's
// latencyAddSample: within the same second only the worst is kept.
func (m *latencyMonitor) add(event string, at, millis int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencySeries{}
	}
	ts := m.events[event]
	if ts == nil {
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, millis)
	if n := len(ts.samples); n > 0 && ts.samples[n-1].at == at {
		ts.samples[n-1].millis = max(ts.samples[n-1].millis, millis)
		return
	}
	if len(ts.samples) == latencyHistoryLen {
		copy(ts.samples, ts.samples[1:])
		ts.samples = ts.samples[:latencyHistoryLen-1]
	}
	ts.samples = append(ts.samples, latencySample{at, millis})
}

func registerLatency(t table) {
	t.add((&command{
		name: "latency", arity: -2,
		flags: []string{}, acl: []string{"slow"},
		summary: "A container for latency diagnostics commands", since: "2.8.13", group: "server", complex: "Depends on subcommand.",
		help: []string{
			"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"HISTORY <event>",
			"    Return time-latency samples for the <event> class.",
			"LATEST",
			"    Return the latest latency samples for all events.",
			"RESET [<event> ...]",
			"    Reset latency data of one or more <event> classes.",
			"    (default: reset all data for all event classes)",
			"HISTOGRAM [COMMAND ...]",
			"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
			"    If no commands are specified then all histograms are replied.",
			"HELP",
			"    Prints this help.",
		},
	}).sub(
		&command{name: "latest", arity: 2, fn: cmdLatencyLatest, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Returns the latest latency samples for all events", since: "2.8.13", group: "server", complex: "O(1)"},
		&command{name: "history", arity: 3, fn: cmdLatencyHistory, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Returns timestamp-latency samples for an event", since: "2.8.13", group: "server", complex: "O(1)",
			args: []argDoc{{name: "event", typ: "string"}}},
		&command{name: "reset", arity: -2, fn: cmdLatencyReset, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Resets the latency data for one or more events", since: "2.8.13", group: "server", complex: "O(1)",
			args: []argDoc{{name: "event", typ: "string", optional: true}}},
		&command{name: "histogram", arity: -2, fn: cmdLatencyHistogram, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Returns the cumulative distribution of latencies of a subset or all commands", since: "7.0.0", group: "server",
			complex: "O(N) where N is the number of commands with latency information being retrieved.",
			args:    []argDoc{{name: "command", typ: "string", optional: true}}},
		&command{name: "help", arity: 2, fn: cmdLatencyHelp, flags: []string{"loading", "stale"}, acl: []string{"slow"},
			summary: "Returns helpful text about the different subcommands", since: "2.8.13", group: "server", complex: "O(1)"},
	))
}

// cmdLatencyLatest: one [event, unix time, latest ms, max ms] per event.
func cmdLatencyLatest(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := &s.latency
	m.mu.Lock()
	names := make([]string, 0, len(m.events))
	for name := range m.events {
		names = append(names, name)
	}
	sort.Strings(names)
	type row struct {
		name             string
		at, last, maxLat int64
	}
	rows := make([]row, 0, len(names))
	for _, name := range names {
		ts := m.events[name]
		last := ts.samples[len(ts.samples)-1]
		rows = append(rows, row{name, last.at, last.millis, ts.max})
	}
	m.mu.Unlock()
	conn.WriteArray(len(rows))
	for _, r := range rows {
		conn.WriteArray(4)
		conn.WriteBulkString(r.name)
		conn.WriteInt64(r.at)
		conn.WriteInt64(r.last)
		conn.WriteInt64(r.maxLat)
	}
}

// cmdLatencyHistory: LATENCY HISTORY event: [unix time, ms] per second
// recorded, oldest first; empty for an unknown event.
func cmdLatencyHistory(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := &s.latency
	m.mu.Lock()
	var samples []latencySample
	if ts := m.events[string(args[2])]; ts != nil {
		samples = append(samples, ts.samples...)
	}
	m.mu.Unlock()
	conn.WriteArray(len(samples))
	for _, smp := range samples {
		conn.WriteArray(2)
		conn.WriteInt64(smp.at)
		conn.WriteInt64(smp.millis)
	}
}

// cmdLatencyReset: LATENCY RESET [event ...]: the number of events reset.
func cmdLatencyReset(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := &s.latency
	m.mu.Lock()
	n := 0
	if len(args) == 2 {
		n = len(m.events)
		m.events = nil
	} else {
		for _, a := range args[2:] {
			if _, ok := m.events[string(a)]; ok {
				delete(m.events, string(a))
				n++
			}
		}
	}
	m.mu.Unlock()
	conn.WriteInt(n)
}

func cmdLatencyHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["latency"].help)
}

// cmdLatencyHistogram: LATENCY HISTOGRAM [command ...]: for each command
// that ran, its calls and the cumulative counts at each power of two of
// nanoseconds from 1024, keyed in microseconds as Redis keys them. As
// Redis: commands that never ran and unknown names are left out, a
// container command stands for its subcommands, a name given twice is
// answered twice; without names, every command that ran.
func cmdLatencyHistogram(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	hists := s.stats.histograms()
	type entry struct {
		name string
		h    *histCounts
	}
	var out []entry
	add := func(cmd *command) {
		if h := hists[cmd.stat]; h != nil {
			out = append(out, entry{cmd.name, h})
		}
	}
	if len(args) == 2 {
		for _, cmd := range s.stats.cmds[1:] {
			add(cmd)
		}
	}
	for _, a := range args[2:] {
		cmd := s.lookupName(a)
		if cmd == nil {
			continue
		}
		add(cmd)
		for _, sub := range cmd.sortedSubs() {
			add(sub)
		}
	}
	conn.WriteMap(len(out))
	for _, e := range out {
		conn.WriteBulkString(e.name)
		conn.WriteMap(2)
		conn.WriteBulkString("calls")
		conn.WriteInt64(e.h.total())
		conn.WriteBulkString("histogram_usec")
		cdf := e.h.cdf()
		conn.WriteMap(len(cdf))
		for _, p := range cdf {
			conn.WriteInt64(p[0])
			conn.WriteInt64(p[1])
		}
	}
}

// cdf is the histogram as LATENCY HISTOGRAM shows it: at each power of
// two of nanoseconds from 1024 where the cumulative count grows, the
// count at or below it, keyed by the bound in microseconds as Redis's
// HdrHistogram (two significant digits) writes it: the highest value
// equivalent to 2^k ns, divided by 1000 (1, 2, 4, 8, 16, 33, 66, 132, ...).
func (h *histCounts) cdf() [][2]int64 {
	var out [][2]int64
	var cum, prev int64
	b := 0
	for shift := histMinShift; shift <= histMaxShift; shift++ {
		top := int64(1) << shift
		for b < histBuckets && bucketTop(b) <= top {
			cum += h[b]
			b++
		}
		if cum > prev {
			out = append(out, [2]int64{(top + max(top>>7, 1) - 1) / 1000, cum})
			prev = cum
		}
	}
	return out
}

// percentileText formats a percentile of h in microseconds, as Redis's
// latencystats ("1.024").
func percentileText(h *histCounts, p float64) string {
	return strconv.FormatFloat(float64(h.percentile(p))/1000, 'f', 3, 64)
}
