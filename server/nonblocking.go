package server

import (
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// Which commands run where they must not block. An event loop serves many
// connections on one goroutine, so a command that blocks there (on the
// database, on a segment load) stalls them all; the connection layer
// therefore first calls a command with mayBlock false (resp.Session), and
// only the commands below run then. Any other command, including any
// added later, waits for the connection to call it again where it may
// block. INCR and INCRBY run at once when the allocator knows the tag and
// the IDs are in its current segment, the steady state
// (segment.Allocator.Known, segment.Tag.TryNextN); otherwise they wait
// too, and may then look the tag up, switch segments or wait for a load.

// neverBlock are the commands that never block: no database, no wait, no
// lock held for long.
var neverBlock = []string{
	"ping", "echo", "select", "quit", "auth", "hello",
	"multi", "discard", "unwatch", "persist", "expire", "pexpire", "expireat", "pexpireat", "time",
	"client|id", "client|getname", "client|setname", "client|setinfo", "client|info", "client|help",
	"config|get", "config|help", "command|count", "command|help",
	"cluster|keyslot", "cluster|myid", "cluster|help", "readonly", "readwrite", "asking", "role",
	"sentinel|myid", "sentinel|help", "sentinel|replicas", "sentinel|slaves", "sentinel|failover",
	"subscribe", "psubscribe", "unsubscribe", "punsubscribe",
}

// markNonBlocking marks the commands of t that run where they must not
// block.
func markNonBlocking(t table) {
	find := func(name string) *command {
		top, sub, ok := cutPipe(name)
		c := t[top]
		if c != nil && ok {
			c = c.subs[sub]
		}
		return c
	}
	for _, name := range neverBlock {
		if c := find(name); c != nil {
			c.neverBlocks = true
		}
	}
	if c := t["incr"]; c != nil {
		c.try = tryIncr
	}
	if c := t["incrby"]; c != nil {
		c.try = tryIncrBy
	}
}

// cutPipe splits "client|id" into "client" and "id".
func cutPipe(name string) (top, sub string, ok bool) {
	for i := range len(name) {
		if name[i] == '|' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// tryIncr is INCR when the tag is known and the ID is in its current
// segment.
func tryIncr(s *Server, c *client, conn *resp.Conn, args [][]byte) bool {
	t := s.knownTag(c, c.key(args[1]))
	if t == nil {
		return false
	}
	id, ok := t.TryNextN(1)
	if !ok {
		return false
	}
	conn.WriteInt64(id)
	return true
}

// tryIncrBy is INCRBY on the same condition, for a valid n (errors are
// cmdIncrBy's to answer).
func tryIncrBy(s *Server, c *client, conn *resp.Conn, args [][]byte) bool {
	n, ok := parseInt(args[2])
	if !ok || n <= 0 || n > s.alloc.MaxBatch() {
		return false
	}
	t := s.knownTag(c, c.key(args[1]))
	if t == nil {
		return false
	}
	last, ok := t.TryNextN(n)
	if !ok {
		return false
	}
	conn.WriteInt64(last)
	return true
}

// knownTag is s.tag without the database: the connection's last tag, or
// one the allocator knows (then cached on the connection as s.tag does);
// nil when the tag would have to be looked up.
func (s *Server) knownTag(c *client, name []byte) *segment.Tag {
	if c.tag != nil && string(name) == string(c.tagBuf[:c.tagLen]) {
		return c.tag
	}
	t := s.alloc.Known(name)
	if t != nil && len(name) <= len(c.tagBuf) {
		c.tagLen = copy(c.tagBuf[:], name)
		c.tag = t
	}
	return t
}
