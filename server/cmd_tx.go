package server

import (
	"fmt"

	"github.com/leaf-id/leaf/resp"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis's
// semantics. After MULTI, dispatch queues every command (but these and
// QUIT) and answers QUEUED; a command refused while queueing (unknown,
// wrong arity) marks the transaction, and its EXEC answers EXECABORT
// having run nothing, so no ID is taken. EXEC runs the queue in order and
// answers an array of the replies.
//
// Several INCRs of one tag in one EXEC get consecutive IDs on this
// server: the first of them reserves, with one NextN, the IDs of every
// INCR and INCRBY of that tag up to the next command that could read or
// change the tag otherwise (txSpanEnds), and they are handed out from it
// in order. Other connections take theirs around the reservation.
//
// WATCH remembers what this server has handed out of each tag (and its
// floor); EXEC answers nil when that changed since. Servers sharing a
// database do not see each other's IDs: WATCH guards against the
// connections of this server only.

// Bounds of what a transaction makes the server hold: Redis has none but
// its client buffers; these are far beyond any real transaction.
const (
	maxQueued      = 100_000
	maxQueuedBytes = 64 << 20
	maxWatched     = 100_000
)

// txState is an open transaction.
type txState struct {
	cmds  []queuedCmd
	bytes int
	dirty bool // a command was refused while queueing: EXEC aborts
}

// queuedCmd is a queued command, with its own copy of the arguments.
type queuedCmd struct {
	cmd  *command
	args [][]byte
}

// watchedTag is a watched tag's state at WATCH.
type watchedTag struct {
	key   string // stored name
	state tagState
}

// tagState is what WATCH compares: the last ID this server handed out of
// the tag, and the end of the highest range it accepted, which a floor
// raises (as does a segment loaded meanwhile: EXEC then aborts without
// need, which WATCH allows, as Redis's own does on a FLUSHDB).
type tagState struct {
	last  int64
	guard int64
	floor int64 // a floor within the cached IDs moves neither last nor guard
}

func registerTx(t table) {
	t.add(
		&command{
			name: "multi", arity: 1, fn: cmdMulti, txRuns: true,
			flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, acl: []string{"fast", "transaction"},
			summary: "Starts a transaction", since: "1.2.0", group: "transactions", complex: "O(1)",
		},
		&command{
			name: "exec", arity: 1, fn: cmdExec, txRuns: true,
			flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, acl: []string{"slow", "transaction"},
			summary: "Executes all commands in a transaction; a run of INCRs of one tag gets consecutive IDs", since: "1.2.0", group: "transactions",
			complex: "Depends on commands in the transaction",
		},
		&command{
			name: "discard", arity: 1, fn: cmdDiscard, txRuns: true,
			flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, acl: []string{"fast", "transaction"},
			summary: "Discards a transaction", since: "2.0.0", group: "transactions", complex: "O(N), when N is the number of queued commands",
		},
		&command{
			name: "watch", arity: -2, fn: cmdWatch, txRuns: true,
			flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, acl: []string{"fast", "transaction"},
			firstKey: 1, keyFlags: []string{"RO"},
			summary: "Makes EXEC answer nil if this server handed out IDs of, or raised the floor of, a tag since", since: "2.2.0", group: "transactions",
			complex: "O(1) for every key.", args: []argDoc{{name: "key", typ: "key"}},
		},
		&command{
			name: "unwatch", arity: 1, fn: cmdUnwatch,
			flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, acl: []string{"fast", "transaction"},
			summary: "Forgets about all watched keys", since: "2.2.0", group: "transactions", complex: "O(1)",
		},
	)
}

// flagTx marks the open transaction, if any: a command was refused while
// queueing, so EXEC will abort.
func (c *client) flagTx() {
	if c.tx != nil {
		c.tx.dirty = true
	}
}

// execAborted answers EXEC with the wrong number of arguments as Redis
// does, with an EXECABORT that ends the transaction; false for any other
// command.
func (s *Server) execAborted(c *client, conn *resp.Conn, cmd *command) bool {
	if cmd.name != "exec" {
		return false
	}
	c.tx = nil
	c.watched = nil
	s.writeError(c, conn, fmt.Sprintf(errExecAbortBecause, fmt.Sprintf(errWrongArgs[len("ERR "):], cmd.name)))
	return true
}

// queue adds a command to the open transaction and answers QUEUED.
func (s *Server) queue(c *client, conn *resp.Conn, cmd *command, args [][]byte) {
	size := 0
	for _, a := range args {
		size += len(a)
	}
	tx := c.tx
	if len(tx.cmds) >= maxQueued || tx.bytes+size > maxQueuedBytes {
		c.stats.reject(cmd)
		tx.dirty = true
		s.writeError(c, conn, fmt.Sprintf(errTxTooLarge, maxQueued, maxQueuedBytes>>20))
		return
	}
	// One allocation holds the copies: args point into the read buffer.
	buf := make([]byte, 0, size)
	own := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		own[i] = buf[len(buf)-len(a):]
	}
	tx.cmds = append(tx.cmds, queuedCmd{cmd: cmd, args: own})
	tx.bytes += size
	conn.WriteString("QUEUED")
}

func cmdMulti(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if c.tx != nil {
		s.writeError(c, conn, errMultiNested)
		return
	}
	c.tx = &txState{}
	conn.WriteString("OK")
}

func cmdDiscard(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if c.tx == nil {
		s.writeError(c, conn, errDiscardNoMulti)
		return
	}
	c.tx = nil
	c.watched = nil
	conn.WriteString("OK")
}

// cmdExec: EXEC -> the replies of the queued commands; EXECABORT when one
// was refused while queueing; nil when a watched tag changed.
func cmdExec(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	tx := c.tx
	if tx == nil {
		s.writeError(c, conn, errExecNoMulti)
		return
	}
	c.tx = nil
	watched := c.watched
	c.watched = nil
	if tx.dirty {
		s.writeError(c, conn, errExecAbort)
		return
	}
	for _, w := range watched {
		if s.tagState(w.key) != w.state {
			conn.WriteNullArray()
			return
		}
	}
	conn.WriteArray(len(tx.cmds))
	run := txRun{s: s, c: c, conn: conn, cmds: tx.cmds}
	for i := range tx.cmds {
		run.exec(i)
	}
}

// cmdWatch: WATCH tag [tag ...] -> OK.
func cmdWatch(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if c.tx != nil {
		s.writeError(c, conn, errWatchInMulti)
		return
	}
next:
	for _, name := range args[1:] {
		key := string(c.key(name))
		for _, w := range c.watched {
			if w.key == key {
				continue next
			}
		}
		if len(c.watched) >= maxWatched {
			s.writeError(c, conn, fmt.Sprintf(errWatchTooMany, maxWatched))
			return
		}
		c.watched = append(c.watched, watchedTag{key: key, state: s.tagState(key)})
	}
	conn.WriteString("OK")
}

func cmdUnwatch(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	c.watched = nil
	conn.WriteString("OK")
}

// tagState is a tag's state as WATCH compares it: an ID handed out moves
// last, a floor raised moves the floor (and the guard when above it).
func (s *Server) tagState(key string) tagState {
	var st tagState
	st.last, _ = s.alloc.LastIssued(key)
	if in, err := s.alloc.Info(key); err == nil {
		st.guard, st.floor = in.GuardHigh, in.Floor
	}
	return st
}

// txRun runs a transaction's queue.
type txRun struct {
	s    *Server
	c    *client
	conn *resp.Conn
	cmds []queuedCmd
	// res holds, per stored tag name, the IDs reserved for the INCRs of
	// the current run of commands: next is the next to hand out.
	res map[string]*reserved
}

type reserved struct{ next, last int64 }

// exec runs the i-th queued command.
func (r *txRun) exec(i int) {
	q := r.cmds[i]
	r.c.runNested(q.cmd, func() {
		if n := r.incrCount(q); n > 0 {
			r.incr(i, n)
		} else {
			q.cmd.fn(r.s, r.c, r.conn, q.args)
		}
	})
}

// runNested runs cmd inside another command (EXEC, EVAL), counted as
// Redis counts it: a call of its own, timed alone, in cmd's record; the
// outer command's open run and its error flag are left as they were.
func (c *client) runNested(cmd *command, run func()) {
	cs := &c.stats
	failed, running := cs.failed, cs.running
	cs.failed = false
	r := cs.sh.record(cmd.stat)
	start := c.s.clock()
	run()
	if r != nil {
		d := max(c.s.clock()-start, 0)
		if cs.failed {
			r.failed.Add(1)
		} else {
			r.okSlow.Add(1)
		}
		r.nanos.Add(d)
		r.hist.b[bucketOf(d)].Add(1)
	}
	cs.failed, cs.running = failed, running
}

// incrCount is the number of IDs a queued INCR or a valid INCRBY takes, 0
// for any other command (an INCRBY with a bad count answers its error).
func (r *txRun) incrCount(q queuedCmd) int64 {
	switch q.cmd.name {
	case "incr":
		return 1
	case "incrby":
		n, ok := parseInt(q.args[2])
		if !ok || n <= 0 || n > r.s.alloc.MaxBatch() {
			return 0
		}
		return n
	}
	return 0
}

// txSpanEnds reports whether a queued command other than INCR and INCRBY
// ends the runs of consecutive IDs: any command that reads or changes what
// a tag handed out (GET, SET, LEAF.FLOOR, EVAL, ...) or the database
// (SELECT) would see the reservation otherwise. These do not.
func txSpanEnds(name string) bool {
	switch name {
	case "ping", "echo", "time", "exists", "type", "ttl", "pttl", "expiretime", "pexpiretime",
		"expire", "pexpire", "expireat", "pexpireat", "persist", "dbsize", "keys", "scan":
		return false
	}
	return true
}

// incr answers the i-th queued command, an INCR or INCRBY taking n IDs,
// from its tag's reservation, reserving first when none is left: the IDs
// of its run, at most max_batch.
func (r *txRun) incr(i int, n int64) {
	s, c, conn := r.s, r.c, r.conn
	name := r.cmds[i].args[1]
	key := string(c.key(name))
	res := r.res[key]
	if res == nil || res.next+n-1 > res.last {
		total := n
		for _, q := range r.cmds[i+1:] {
			m := r.incrCount(q)
			if m == 0 {
				if txSpanEnds(q.cmd.name) {
					break
				}
				continue
			}
			if string(c.key(q.args[1])) != key {
				continue
			}
			if total+m > s.alloc.MaxBatch() {
				break
			}
			total += m
		}
		t, err := s.tag(c, []byte(key))
		if err != nil {
			s.allocError(c, conn, name, err)
			return
		}
		last, err := t.NextN(s.ctx, total)
		if err != nil {
			s.allocError(c, conn, name, err)
			return
		}
		if r.res == nil {
			r.res = map[string]*reserved{}
		}
		res = &reserved{next: last - total + 1, last: last}
		r.res[key] = res
	}
	res.next += n
	conn.WriteInt64(res.next - 1)
}
