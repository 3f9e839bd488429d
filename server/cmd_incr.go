package server

import (
	"fmt"
	"math"

	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// INCR and INCRBY: the ID commands.

func registerIncr(t table) {
	t.add(
		&command{
			name: "incr", arity: 2, fn: cmdIncr,
			flags: []string{"write", "denyoom", "fast"}, acl: []string{"write", "string", "fast"},
			firstKey: 1, keyFlags: []string{"RW", "access", "update"},
			summary: "Returns the next ID of a tag", since: "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}},
		},
		&command{
			name: "incrby", arity: 3, fn: cmdIncrBy,
			flags: []string{"write", "denyoom", "fast"}, acl: []string{"write", "string", "fast"},
			firstKey: 1, keyFlags: []string{"RW", "access", "update"},
			summary: "Reserves n consecutive IDs of a tag and returns the last", since: "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "increment", typ: "integer"}},
		},
	)
}

// cmdIncr: INCR tag -> the tag's next ID.
func cmdIncr(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	t, err := s.tag(c, c.key(args[1]))
	if err != nil {
		s.allocError(c, conn, args[1], err)
		return
	}
	id, err := t.Next(s.ctx)
	if err != nil {
		s.allocError(c, conn, args[1], err)
		return
	}
	conn.WriteInt64(id)
}

// cmdIncrBy: INCRBY tag n -> the last of n consecutive IDs; the client owns
// [r-n+1, r]. n is checked before the tag, as Redis parses it first.
func cmdIncrBy(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	n, ok := parseInt(args[2])
	if !ok {
		s.writeError(c, conn, errNotInteger)
		return
	}
	if n <= 0 {
		s.writeError(c, conn, errCountNotPositive)
		return
	}
	if maxBatch := s.alloc.MaxBatch(); n > maxBatch {
		s.writeError(c, conn, fmt.Sprintf(errCountTooLarge, maxBatch))
		return
	}
	t, err := s.tag(c, c.key(args[1]))
	if err != nil {
		s.allocError(c, conn, args[1], err)
		return
	}
	last, err := t.NextN(s.ctx, n)
	if err != nil {
		s.allocError(c, conn, args[1], err)
		return
	}
	conn.WriteInt64(last)
}

// tag returns the allocator's entry for the stored name (client.key), from
// the connection's cache when it is the tag of the previous command.
func (s *Server) tag(c *client, name []byte) (*segment.Tag, error) {
	if c.tag != nil && string(name) == string(c.tagBuf[:c.tagLen]) {
		return c.tag, nil
	}
	t, err := s.alloc.Lookup(c.ctx, name) // c.ctx: the connection may create the tag (security.go)
	if err != nil {
		return nil, err
	}
	// A Tag is never replaced for the allocator's lifetime, so caching the
	// pointer is safe.
	if len(name) <= len(c.tagBuf) {
		c.tagLen = copy(c.tagBuf[:], name)
		c.tag = t
	}
	return t, nil
}

// parseInt parses a canonical decimal int64 exactly as Redis's string2ll:
// an optional '-', then digits with no leading zero ("0" alone is fine), no
// '+', no spaces, no exponent, no "-0", within the int64 range.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		d := uint64(ch - '0')
		if d > 9 {
			return 0, false
		}
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}
