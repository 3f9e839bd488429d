package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// MONITOR: every command the server runs, from any client, streamed to
// the monitoring connections in Redis's format:
//
//	+1339518083.107412 [0 127.0.0.1:60866] "incr" "order"
//
// As in Redis, commands refused before they ran and administrative ones
// (CONFIG, SLOWLOG, LATENCY, CLIENT LIST and KILL, MONITOR) are not
// shown, and passwords are "(redacted)". A line is queued on the
// monitor's connection (resp.Conn.Push), which its own loop writes: the
// command that made it never waits for a monitor. A monitor that falls
// monitorMaxPending bytes behind is disconnected, as Redis does with a
// client beyond its output buffer limit, and the log says so: a slow
// monitor costs the server at most that much memory, and never a stall.

// monitorMaxPending bounds the bytes waiting to be written to a monitor.
const monitorMaxPending = 1 << 20

// monitors are the connections in MONITOR mode.
type monitors struct {
	active atomic.Int32 // len(list): read on every command
	mu     sync.Mutex
	list   map[*client]struct{}
}

// remove stops feeding c, if it is a monitor.
func (m *monitors) remove(c *client) {
	m.mu.Lock()
	if _, ok := m.list[c]; ok {
		delete(m.list, c)
		m.active.Add(-1)
	}
	m.mu.Unlock()
}

func registerMonitor(t table) {
	t.add(&command{
		name: "monitor", arity: 1, fn: cmdMonitor,
		flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
		summary: "Listens for all requests received by the server in real-time", since: "1.0.0", group: "server", complex: "",
	})
}

// cmdMonitor: MONITOR -> +OK, then the stream. A second MONITOR on the
// same connection answers +OK again and changes nothing.
func cmdMonitor(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	m := &s.monitors
	m.mu.Lock()
	if m.list == nil {
		m.list = map[*client]struct{}{}
	}
	if _, ok := m.list[c]; !ok {
		m.list[c] = struct{}{}
		m.active.Add(1)
	}
	m.mu.Unlock()
	c.meta.Lock()
	c.meta.monitor = true
	c.meta.Unlock()
	conn.WriteString("OK")
}

// feedMonitors sends a command that ran to every monitor.
func (s *Server) feedMonitors(c *client, cmd *command, args [][]byte) {
	if isAdmin(cmd) {
		return
	}
	line := monitorLine(s.now(), c.addr, cmd, args)
	m := &s.monitors
	var slow []*client
	m.mu.Lock()
	for mc := range m.list {
		if !mc.conn.Push(line, monitorMaxPending) {
			slow = append(slow, mc)
		}
	}
	m.mu.Unlock()
	for _, mc := range slow {
		m.remove(mc)
		s.log.Warn("closing a MONITOR client that does not read its stream",
			"id", mc.id, "addr", mc.addr, "pending_bytes", monitorMaxPending)
		mc.conn.Kill()
	}
}

// isAdmin reports whether cmd has Redis's admin flag.
func isAdmin(cmd *command) bool {
	for _, f := range cmd.flags {
		if f == "admin" {
			return true
		}
	}
	return false
}

// monitorLine is one line of the stream: the time, the database and the
// client's address, then the arguments quoted as Redis's sdscatrepr.
func monitorLine(now time.Time, addr string, cmd *command, args [][]byte) []byte {
	b := make([]byte, 0, 64)
	b = append(b, '+')
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	us := strconv.AppendInt(nil, int64(now.Nanosecond()/1000), 10)
	for range 6 - len(us) {
		b = append(b, '0')
	}
	b = append(b, us...)
	b = append(b, " [0 "...)
	b = append(b, addr...)
	b = append(b, ']')
	for i, a := range args {
		b = append(b, ' ')
		if redacted(cmd, args, i) {
			a = []byte("(redacted)")
		}
		b = appendRepr(b, a)
	}
	return append(b, '\r', '\n')
}

// appendRepr appends s quoted as Redis's sdscatrepr: backslash escapes
// for quotes, backslashes and control characters, \xHH for other bytes
// that are not printable.
func appendRepr(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, ch := range s {
		switch ch {
		case '\\', '"':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if ch >= ' ' && ch <= '~' {
				b = append(b, ch)
			} else {
				b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			}
		}
	}
	return append(b, '"')
}
