package server

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// SLOWLOG GET|LEN|RESET|HELP: the commands that took at least
// Options.SlowlogThreshold (server.slowlog_threshold), newest first, as
// Redis 7.0 answers them: id, unix time, microseconds, arguments, client
// address, client name. In leaf a slow command is nearly always an INCR
// that waited for a segment load or a tag's lookup on a slow database.
// Commands answered from memory within one pipeline are timed together
// (stats.go): a slow run of them is one entry, with the first command's
// arguments and the run's average time.

const (
	slowlogMaxLen    = 128 // Redis's slowlog-max-len default
	slowlogMaxArgc   = 32  // SLOWLOG_ENTRY_MAX_ARGC
	slowlogMaxString = 128 // SLOWLOG_ENTRY_MAX_STRING
)

// slowlogEntry is one logged command.
type slowlogEntry struct {
	id     int64
	at     int64 // unix seconds
	micros int64
	args   []string
	addr   string
	name   string
}

// slowlog keeps the newest slowlogMaxLen entries.
type slowlog struct {
	threshold time.Duration // negative: off

	mu      sync.Mutex
	entries []slowlogEntry // oldest first
	nextID  int64
}

func (l *slowlog) init(threshold time.Duration) {
	if threshold == 0 {
		threshold = DefaultSlowlogThreshold
	}
	l.threshold = threshold
}

// keepArgs keeps a copy of the arguments of a run's first command, as
// SLOWLOG shows them: at most slowlogMaxArgc, each at most
// slowlogMaxString bytes, and passwords redacted. It reuses the
// connection's buffers, so it allocates nothing once they have grown.
func (cs *clientStats) keepArgs(cmd *command, args [][]byte) {
	cs.argBuf = cs.argBuf[:0]
	cs.args = cs.args[:0]
	var ends [slowlogMaxArgc]int
	n := min(len(args), slowlogMaxArgc)
	for i := range n {
		a := args[i]
		switch {
		case n != len(args) && i == n-1:
			cs.argBuf = append(cs.argBuf, "... ("...)
			cs.argBuf = strconv.AppendInt(cs.argBuf, int64(len(args)-n+1), 10)
			cs.argBuf = append(cs.argBuf, " more arguments)"...)
		case redacted(cmd, args, i):
			cs.argBuf = append(cs.argBuf, "(redacted)"...)
		case len(a) > slowlogMaxString:
			cs.argBuf = append(cs.argBuf, a[:slowlogMaxString]...)
			cs.argBuf = append(cs.argBuf, "... ("...)
			cs.argBuf = strconv.AppendInt(cs.argBuf, int64(len(a)-slowlogMaxString), 10)
			cs.argBuf = append(cs.argBuf, " more bytes)"...)
		default:
			cs.argBuf = append(cs.argBuf, a...)
		}
		ends[i] = len(cs.argBuf)
	}
	start := 0
	for i := range n {
		cs.args = append(cs.args, cs.argBuf[start:ends[i]])
		start = ends[i]
	}
}

// redacted reports whether argument i of cmd is a password, which
// SLOWLOG and MONITOR show as "(redacted)", as Redis does: AUTH's
// arguments, and the user and password after HELLO's AUTH.
func redacted(cmd *command, args [][]byte, i int) bool {
	switch cmd.name {
	case "auth":
		return i > 0
	case "hello":
		for j := 2; j < len(args) && j < i; j++ {
			if bytes.EqualFold(args[j], []byte("auth")) && (i == j+1 || i == j+2) {
				return true
			}
		}
	}
	return false
}

// slowEntry logs a run of calls that took per nanoseconds each, and
// records it as a latency event.
func (s *Server) slowEntry(c *client, fast bool, args [][]byte, per int64) {
	e := slowlogEntry{at: s.now().Unix(), micros: per / 1000, addr: c.addr}
	e.args = make([]string, len(args))
	for i, a := range args {
		e.args[i] = string(a)
	}
	c.meta.Lock()
	e.name = c.meta.name
	c.meta.Unlock()
	l := &s.slowlog
	l.mu.Lock()
	e.id = l.nextID
	l.nextID++
	if len(l.entries) == slowlogMaxLen {
		copy(l.entries, l.entries[1:])
		l.entries = l.entries[:slowlogMaxLen-1]
	}
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	event := "command"
	if fast {
		event = "fast-command"
	}
	s.latency.add(event, e.at, per/1e6)
}

func registerSlowlog(t table) {
	t.add((&command{
		name: "slowlog", arity: -2,
		flags: []string{}, acl: []string{"slow"},
		summary: "A container for slow log commands", since: "2.2.12", group: "server", complex: "Depends on subcommand.",
		help: []string{
			"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GET [<count>]",
			"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
			"    Entries are made of:",
			"    id, timestamp, time in microseconds, arguments array, client IP and port,",
			"    client name",
			"LEN",
			"    Return the length of the slowlog.",
			"RESET",
			"    Reset the slowlog.",
			"HELP",
			"    Prints this help.",
		},
	}).sub(
		&command{name: "get", arity: -2, fn: cmdSlowlogGet, flags: []string{"admin", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Returns the slow log's entries", since: "2.2.12", group: "server", complex: "O(N) where N is the number of entries returned",
			args: []argDoc{{name: "count", typ: "integer", optional: true}}},
		&command{name: "len", arity: 2, fn: cmdSlowlogLen, flags: []string{"admin", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Returns the number of entries in the slow log", since: "2.2.12", group: "server", complex: "O(1)"},
		&command{name: "reset", arity: 2, fn: cmdSlowlogReset, flags: []string{"admin", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
			summary: "Clears all entries from the slow log", since: "2.2.12", group: "server", complex: "O(N) where N is the number of entries in the slowlog"},
		&command{name: "help", arity: 2, fn: cmdSlowlogHelp, flags: []string{"loading", "stale"}, acl: []string{"slow"},
			summary: "Show helpful text about the different subcommands", since: "6.2.0", group: "server", complex: "O(1)"},
	))
}

// cmdSlowlogGet: SLOWLOG GET [count]: the newest count entries (10; -1:
// all), newest first.
func cmdSlowlogGet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	count := int64(10)
	if len(args) > 3 {
		s.writeError(c, conn, fmt.Sprintf(errSubSyntax, cstr(args[1]), "SLOWLOG"))
		return
	}
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok || n < -1 {
			s.writeError(c, conn, errSlowlogCount)
			return
		}
		count = n
	}
	l := &s.slowlog
	l.mu.Lock()
	n := len(l.entries)
	if count >= 0 {
		n = min(n, int(count))
	}
	out := make([]slowlogEntry, n)
	for i := range out {
		out[i] = l.entries[len(l.entries)-1-i]
	}
	l.mu.Unlock()
	conn.WriteArray(len(out))
	for _, e := range out {
		conn.WriteArray(6)
		conn.WriteInt64(e.id)
		conn.WriteInt64(e.at)
		conn.WriteInt64(e.micros)
		conn.WriteArray(len(e.args))
		for _, a := range e.args {
			conn.WriteBulkString(a)
		}
		conn.WriteBulkString(e.addr)
		conn.WriteBulkString(e.name)
	}
}

func cmdSlowlogLen(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.slowlog.mu.Lock()
	n := len(s.slowlog.entries)
	s.slowlog.mu.Unlock()
	conn.WriteInt(n)
}

func cmdSlowlogReset(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.slowlog.mu.Lock()
	s.slowlog.entries = nil
	s.slowlog.mu.Unlock()
	conn.WriteString("OK")
}

func cmdSlowlogHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["slowlog"].help)
}
