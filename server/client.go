package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// maxCommandName bounds the command names dispatch looks up; longer names
// are unknown without a lookup.
const maxCommandName = 32

// client is one connection's state: the resp.Session that runs its
// commands, made when the connection is accepted (Server.Open). Its
// fields but id, addr, laddr, created, the counters and meta are used
// only inside a command, and the connection runs one command at a time.
type client struct {
	s       *Server
	conn    *resp.Conn
	id      int64
	addr    string
	laddr   string
	created time.Time

	authed bool
	admin  bool // authenticated as the admin user (cmd_admin.go)

	// name is the scratch buffer dispatch lowercases command names into, so
	// the table lookup m[string(name[:n])] does not allocate.
	name [maxCommandName]byte
	// lastCmd is the last command found in the table (not a subcommand):
	// a repeat skips the lookup.
	lastCmd *command
	// The last tag this connection used and its allocator entry: a repeat
	// INCR compares bytes and skips even the map lookup.
	tagBuf [segment.MaxTagLen]byte
	tagLen int
	tag    *segment.Tag

	// errors counts the error replies; stats the commands, by name
	// (stats.go).
	errors atomic.Int64
	stats  clientStats

	// meta is what CLIENT LIST shows to other connections, under its own
	// small lock (never held across a command).
	meta struct {
		sync.Mutex
		name, libName, libVer string
		resp                  int
		admin                 bool
		monitor, noEvict      bool // MONITOR, CLIENT NO-EVICT on
	}
}

// newClient is the state of a new connection.
func newClient(s *Server, conn *resp.Conn) *client {
	c := &client{
		s:       s,
		conn:    conn,
		id:      s.nextID.Add(1),
		addr:    conn.RemoteAddr(),
		laddr:   conn.LocalAddr(),
		created: s.now(),
		authed:  !s.hasPass,
	}
	c.meta.resp = 2
	return c
}

// Command runs one command (resp.Session).
func (c *client) Command(conn *resp.Conn, args [][]byte, mayBlock bool) bool {
	return c.s.dispatch(c, conn, args, mayBlock)
}

// Preview starts the lookups and loads that an INCR or INCRBY of the
// rest of a pipeline will wait for (resp.Previewer), so that they run
// together, in a few store round trips, while the first one waits.
func (c *client) Preview(conn *resp.Conn, args [][]byte) {
	if !c.authed || len(args) < 2 {
		return
	}
	if n := c.lowerName(args[0]); n >= 0 {
		if name := string(c.name[:n]); name == "incr" || name == "incrby" {
			c.s.alloc.Prepare(args[1])
		}
	}
}

// Closed unregisters the connection (resp.Session).
func (c *client) Closed() { c.s.unregister(c) }

// lowerName lowercases b into c.name and returns its length, or -1 when b is
// too long to be a command name.
func (c *client) lowerName(b []byte) int {
	if len(b) > len(c.name) {
		return -1
	}
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		c.name[i] = ch
	}
	return len(b)
}

// setResp switches the connection's protocol (HELLO).
func (c *client) setResp(conn *resp.Conn, v int) {
	conn.SetProtocol(v)
	c.meta.Lock()
	c.meta.resp = v
	c.meta.Unlock()
}

// setUser records a successful login, as the admin user or the default
// one; Redis's caps on requests before AUTH end.
func (c *client) setUser(conn *resp.Conn, admin bool) {
	c.authed, c.admin = true, admin
	conn.SetUnauthenticated(false)
	c.meta.Lock()
	c.meta.admin = admin
	c.meta.Unlock()
}
