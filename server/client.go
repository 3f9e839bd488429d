package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

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

	// ctx is the context of the connection's allocator calls: the
	// server's, with the connection as the segment.Creator of the tags it
	// creates (security.go).
	ctx context.Context
	// authFailures counts its refused passwords; certPending: its client
	// certificate is still to be read (Options.CertLogin).
	authFailures int
	certPending  bool
	// creates bounds its tag creations (Options.CreateRate); nil until
	// its first.
	creates *rate.Limiter

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

	// db is the database SELECT chose: 0 names tags as they are, another
	// stores them under a prefix (segment.AppendDBName) built in keyBuf.
	db     int
	keyBuf [segment.MaxTagLen + 16]byte
	// tx is the transaction MULTI opened, nil outside one, and watched the
	// tags WATCH watches (cmd_tx.go): a connection that uses neither pays
	// one nil check per command.
	tx      *txState
	watched []watchedTag
	// subscribed is its number of channels and patterns (cmd_pubsub.go):
	// above 0, a RESP2 connection is in Redis's subscribed mode.
	subscribed int

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
		db                    int  // SELECT's, for CLIENT LIST
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
	c.ctx = segment.WithCreator(s.ctx, c)
	c.certPending = s.opts.CertLogin
	return c
}

// Command runs one command (resp.Session).
func (c *client) Command(conn *resp.Conn, args [][]byte, mayBlock bool) bool {
	if c.certPending { // once, after the TLS handshake
		c.certLogin(conn)
	}
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
			c.s.alloc.PrepareCtx(c.ctx, c.key(args[1]))
		}
	}
}

// key is the stored name of the tag name in the connection's database:
// name itself in database 0; else in keyBuf, valid until the next call.
func (c *client) key(name []byte) []byte {
	if segment.StoredAsIs(c.db, name) {
		return name // the common case, without a copy
	}
	return segment.AppendDBName(c.keyBuf[:0], c.db, name)
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
