package server

import (
	"fmt"
	"sort"

	"github.com/leaf-id/leaf/resp"
)

// handler runs one command. It is a plain function, not a closure, called
// with everything it needs: nothing is allocated to call it.
type handler func(s *Server, c *client, conn *resp.Conn, args [][]byte)

// tryHandler runs a command if it can without blocking and reports
// whether it did; when it reports false it has written nothing and
// changed nothing.
type tryHandler func(s *Server, c *client, conn *resp.Conn, args [][]byte) bool

// command is one entry of the command table, with what COMMAND INFO and
// COMMAND DOCS report about it.
type command struct {
	name   string // lowercase; "container|sub" for subcommands, as Redis names them
	arity  int    // Redis's convention: n exactly n arguments, -n at least n
	noAuth bool   // runs before authentication (AUTH, HELLO, QUIT)
	fn     handler
	subs   map[string]*command // subcommands (CLIENT, COMMAND, CONFIG)
	// txRuns: the command runs at once inside MULTI instead of being
	// queued (EXEC, DISCARD, MULTI, WATCH, QUIT, as in Redis).
	txRuns bool
	stat   int // index of its counters (stats.go), set by New

	// Whether it runs where it must not block (see nonblocking.go; set by
	// buildCommands): a neverBlocks command always does; try, when set,
	// runs it when it can without blocking; any other command waits for
	// its connection to call it again where it may block.
	neverBlocks bool
	try         tryHandler

	// For COMMAND INFO and DOCS.
	flags    []string // "write", "fast", ...
	acl      []string // ACL categories, without the @
	firstKey int      // position of the key (the tag), 0 when none
	keyFlags []string // the key's access flags ("RW", "access", "update")
	summary  string
	since    string
	group    string
	complex  string
	args     []argDoc
	help     []string // a container's HELP lines
}

// argDoc documents one argument for COMMAND DOCS (redis-cli's hints).
type argDoc struct {
	name, typ string
	optional  bool
}

// table collects the commands each cmd_*.go file registers.
type table map[string]*command

func (t table) add(cmds ...*command) {
	for _, c := range cmds {
		if _, dup := t[c.name]; dup {
			panic("server: command registered twice: " + c.name)
		}
		t[c.name] = c
	}
}

// sub makes the subcommands of a container command, named "container|sub".
func (c *command) sub(subs ...*command) *command {
	c.subs = map[string]*command{}
	for _, s := range subs {
		c.subs[s.name] = s
		s.name = c.name + "|" + s.name
	}
	return c
}

// buildCommands builds the immutable command table and the same commands
// sorted by name.
func buildCommands() (table, []*command) {
	t := table{}
	registerIncr(t)
	registerLeaf(t)
	registerConn(t)
	registerClient(t)
	registerServer(t)
	registerAdmin(t)
	registerTags(t)
	registerCluster(t)
	registerTx(t)
	registerKeys(t)
	registerScript(t)
	registerSlowlog(t)
	registerLatency(t)
	registerMonitor(t)
	registerStrlen(t)
	registerClusterFace(t)
	registerSentinel(t)
	registerPubSub(t)
	markNonBlocking(t)
	sorted := make([]*command, 0, len(t))
	for _, c := range t {
		sorted = append(sorted, c)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	return t, sorted
}

// sortedSubs returns a container's subcommands by name.
func (c *command) sortedSubs() []*command {
	out := make([]*command, 0, len(c.subs))
	for _, s := range c.subs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// arityOK applies Redis's arity rule to argc (the command name included).
func (c *command) arityOK(argc int) bool {
	if c.arity > 0 {
		return argc == c.arity
	}
	return argc >= -c.arity
}

// dispatch runs one command in Redis's order of checks: the command exists,
// then its arity, then authentication, then the handler. It is the
// connection's resp.Session.Command: with mayBlock false it runs only what
// cannot block (errors, a neverBlocks command, a try that succeeds) and
// otherwise returns false having counted and written nothing, and the
// connection calls it again with mayBlock true. On the INCR path it does
// not allocate.
func (s *Server) dispatch(c *client, conn *resp.Conn, args [][]byte, mayBlock bool) bool {
	if len(args) == 0 {
		return true
	}
	var cmd *command
	if n := c.lowerName(args[0]); n >= 0 {
		// Connections mostly repeat one command (INCR): comparing with the
		// last one costs less than hashing the name for the table.
		if last := c.lastCmd; last != nil && last.name == string(c.name[:n]) {
			cmd = last
		} else if cmd = s.cmds[string(c.name[:n])]; cmd != nil {
			c.lastCmd = cmd
		}
	}
	if cmd == nil {
		c.stats.reject(nil)
		c.flagTx()
		s.writeError(c, conn, unknownCommandText(args))
		return true
	}
	if cmd.subs != nil && len(args) >= 2 {
		var sub *command
		if n := c.lowerName(args[1]); n >= 0 {
			sub = cmd.subs[string(c.name[:n])]
		}
		if sub == nil {
			c.stats.reject(cmd)
			c.flagTx()
			s.writeError(c, conn, unknownSubText(args))
			return true
		}
		cmd = sub
	}
	switch {
	case !cmd.arityOK(len(args)):
		c.stats.reject(cmd)
		if !s.execAborted(c, conn, cmd) {
			c.flagTx()
			s.writeError(c, conn, fmt.Sprintf(errWrongArgs, cmd.name))
		}
		return true
	case !c.authed && !cmd.noAuth:
		c.stats.reject(cmd)
		c.flagTx()
		s.writeError(c, conn, errNoAuth)
		return true
	case c.subscribed > 0 && conn.Protocol() == 2 && s.subscribedMode(c, conn, cmd, args):
		return true
	case c.tx != nil && !cmd.txRuns:
		// Queued, not counted: it counts when EXEC runs it, as in Redis.
		s.queue(c, conn, cmd, args)
		return true
	case !mayBlock && !cmd.neverBlocks:
		if cmd.try == nil {
			return false
		}
		s.begin(c, cmd, true, args)
		if !cmd.try(s, c, conn, args) {
			c.stats.unbegin()
			return false
		}
		s.ran(c, cmd, conn, args)
		return true
	}
	s.begin(c, cmd, !mayBlock, args)
	if mayBlock && cmd.try != nil {
		// An INCR or INCRBY that could not be answered from memory: it
		// may wait for a segment load (INFO's blocked_clients).
		s.blocked.Add(1)
		cmd.fn(s, c, conn, args)
		s.blocked.Add(-1)
	} else {
		cmd.fn(s, c, conn, args)
	}
	s.ran(c, cmd, conn, args)
	return true
}

// ran counts a command that ran and shows it to the monitors, if any
// (cmd_monitor.go): one atomic load when there are none.
func (s *Server) ran(c *client, cmd *command, conn *resp.Conn, args [][]byte) {
	c.stats.end()
	if s.monitors.active.Load() != 0 {
		s.feedMonitors(c, cmd, args)
	}
}

// writeError writes an error reply (resp.Writer makes any CR or LF in it
// a space) and counts it: on the connection, by its code (errorstats),
// and against the running command, if any (failed_calls).
func (s *Server) writeError(c *client, conn *resp.Conn, msg string) {
	c.errors.Add(1)
	c.stats.failed = true
	s.errStats.count(msg)
	conn.WriteError(msg)
}
