package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/leaf-id/leaf/segment"
)

// maxCommandName bounds the command names dispatch looks up; longer names
// are unknown without a lookup.
const maxCommandName = 32

// client is one connection's state, made once at accept. Fields below mu
// are used only by the connection's own goroutine while it holds mu (that
// is, inside a command).
type client struct {
	cn      *conn // the transport; the fields below are the command layer's
	id      int64
	addr    string
	laddr   string
	created time.Time

	// mu is held while a command runs; Shutdown takes it to wait for the
	// command in flight and sets closed to refuse the next ones.
	mu     sync.Mutex
	closed bool // set by Shutdown
	quit   bool // QUIT: close after this command
	authed bool
	admin  bool // authenticated as the admin user (cmd_admin.go)
	resp   int  // 2 or 3

	// inLoop: an event loop is running the command, which must not block;
	// dispatch sets handoff instead of running one that might.
	inLoop, handoff bool

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
	// scratch builds RESP3 headers.
	scratch [24]byte

	// Counted here rather than on the server so the hot path writes only
	// its own cache line; INFO sums them.
	commands atomic.Int64
	errors   atomic.Int64
	// stats counts per command, for CommandStats (stats.go).
	stats clientStats

	// meta is what CLIENT LIST shows to other connections, under its own
	// small lock (never held across a command).
	meta struct {
		sync.Mutex
		name, libName, libVer string
		resp                  int
		admin                 bool
	}
}

func newClient(s *Server, rc redcon.Conn) *client {
	c := &client{
		id:      s.nextID.Add(1),
		addr:    rc.RemoteAddr(),
		created: s.now(),
		authed:  !s.hasPass,
		resp:    2,
	}
	if cn, ok := rc.(*conn); ok {
		c.laddr = cn.laddr
	} else if nc := rc.NetConn(); nc != nil {
		c.laddr = nc.LocalAddr().String()
	}
	c.meta.resp = 2
	return c
}

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
func (c *client) setResp(v int) {
	c.resp = v
	c.meta.Lock()
	c.meta.resp = v
	c.meta.Unlock()
}

// setUser records a successful login: as the admin user or the default one.
func (c *client) setUser(admin bool) {
	c.authed, c.admin = true, admin
	c.meta.Lock()
	c.meta.admin = admin
	c.meta.Unlock()
}

// info is the connection's line of CLIENT INFO and CLIENT LIST, in Redis's
// format (the fields leaf has).
func (c *client) info(now time.Time) string {
	c.meta.Lock()
	name, libName, libVer, resp := c.meta.name, c.meta.libName, c.meta.libVer, c.meta.resp
	user := "default"
	if c.meta.admin {
		user = adminUser
	}
	c.meta.Unlock()
	b := make([]byte, 0, 200)
	b = append(b, "id="...)
	b = strconv.AppendInt(b, c.id, 10)
	b = append(b, " addr="...)
	b = append(b, c.addr...)
	b = append(b, " laddr="...)
	b = append(b, c.laddr...)
	b = append(b, " name="...)
	b = append(b, name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, int64(now.Sub(c.created)/time.Second), 10)
	b = append(b, " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 user="...)
	b = append(b, user...)
	b = append(b, " redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(resp), 10)
	b = append(b, " lib-name="...)
	b = append(b, libName...)
	b = append(b, " lib-ver="...)
	b = append(b, libVer...)
	b = append(b, '\n')
	return string(b)
}
