package server

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// The key commands Redis code runs around counters, answered for tags:
// EXISTS, TYPE, MGET, the expiry family, the listings (DBSIZE, KEYS,
// SCAN), TIME, and the commands refused with the reason.
//
// Tags never expire: a tag dropped and created again would start at 1 and
// repeat its IDs, so EXPIRE and its kin set nothing and answer 0 (Redis's
// "no timeout was set"), and TTL answers -1 (no expiry) for a tag, -2 for
// a name that is no tag, as Redis does for a key without expiry and a
// missing one.

func registerKeys(t table) {
	ro := []string{"readonly", "fast"}
	key := []argDoc{{name: "key", typ: "key"}}
	expire := func(name, unit, since string) *command {
		return &command{
			name: name, arity: -3, fn: cmdExpire,
			flags: []string{"write", "fast"}, acl: []string{"keyspace", "write", "fast"},
			firstKey: 1, keyFlags: []string{"RW", "update"},
			summary: "Sets nothing and answers 0: tags never expire", since: since, group: "generic", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: unit, typ: "integer"}},
		}
	}
	ttl := func(name, since string) *command {
		return &command{
			name: name, arity: 2, fn: cmdTTL, flags: ro, acl: []string{"keyspace", "read", "fast"},
			firstKey: 1, keyFlags: []string{"RO", "access"},
			summary: "Answers -1 for a tag (tags never expire), -2 for a name that is no tag", since: since, group: "generic", complex: "O(1)",
			args: key,
		}
	}
	refused := func(name string, arity int, since string) *command {
		return &command{
			name: name, arity: arity, fn: cmdRefused,
			flags: []string{"write"}, acl: []string{"write", "slow"},
			summary: "Refused: " + refusals[name], since: since, group: "generic", complex: "O(1)",
		}
	}
	t.add(
		&command{
			name: "exists", arity: -2, fn: cmdExists, flags: ro, acl: []string{"keyspace", "read", "fast"},
			firstKey: 1, keyFlags: []string{"RO"},
			summary: "Counts the names that are tags (never creates one)", since: "1.0.0", group: "generic",
			complex: "O(N) where N is the number of keys to check.", args: key,
		},
		&command{
			name: "type", arity: 2, fn: cmdType, flags: ro, acl: []string{"keyspace", "read", "fast"},
			firstKey: 1, keyFlags: []string{"RO"},
			summary: "Answers string for a tag, none for a name that is no tag", since: "1.0.0", group: "generic", complex: "O(1)",
			args: key,
		},
		&command{
			name: "mget", arity: -2, fn: cmdMGet, flags: ro, acl: []string{"read", "string", "fast"},
			firstKey: 1, keyFlags: []string{"RO", "access"},
			summary: "GET of each tag", since: "1.0.0", group: "string",
			complex: "O(N) where N is the number of keys to retrieve.", args: key,
		},
		expire("expire", "seconds", "1.0.0"),
		expire("pexpire", "milliseconds", "2.6.0"),
		expire("expireat", "unix-time-seconds", "1.2.0"),
		expire("pexpireat", "unix-time-milliseconds", "2.6.0"),
		&command{
			name: "persist", arity: 2, fn: cmdPersist,
			flags: []string{"write", "fast"}, acl: []string{"keyspace", "write", "fast"},
			firstKey: 1, keyFlags: []string{"RW", "update"},
			summary: "Answers 0: tags have no expiry to remove", since: "2.2.0", group: "generic", complex: "O(1)",
			args: key,
		},
		ttl("ttl", "1.0.0"),
		ttl("pttl", "2.6.0"),
		ttl("expiretime", "7.0.0"),
		ttl("pexpiretime", "7.0.0"),
		&command{
			name: "dbsize", arity: 1, fn: cmdDBSize, flags: []string{"readonly", "fast"}, acl: []string{"keyspace", "read", "fast"},
			summary: "Returns the number of tags in the database", since: "1.0.0", group: "server", complex: "O(1)",
		},
		&command{
			name: "keys", arity: 2, fn: cmdKeys, flags: []string{"readonly"}, acl: []string{"keyspace", "read", "slow", "dangerous"},
			summary: "Returns the tags of the database matching a pattern, sorted", since: "1.0.0", group: "generic",
			complex: "O(N) with N being the number of keys in the database", args: []argDoc{{name: "pattern", typ: "pattern"}},
		},
		&command{
			name: "scan", arity: -2, fn: cmdScan, flags: []string{"readonly"}, acl: []string{"keyspace", "read", "slow"},
			summary: "Iterates over the tags of the database, in name order", since: "2.8.0", group: "generic",
			complex: "O(1) for every call. O(N) for a complete iteration.",
			args: []argDoc{{name: "cursor", typ: "integer"}, {name: "pattern", typ: "pattern", optional: true},
				{name: "count", typ: "integer", optional: true}, {name: "type", typ: "string", optional: true}},
		},
		&command{
			name: "time", arity: 1, fn: cmdTime, flags: []string{"random", "loading", "stale", "fast"}, acl: []string{"fast"},
			summary: "Returns the server time", since: "2.6.0", group: "server", complex: "O(1)",
		},
		refused("unlink", -2, "4.0.0"),
		refused("getdel", 2, "6.2.0"),
		refused("flushdb", -1, "1.0.0"),
		refused("flushall", -1, "1.0.0"),
		refused("decr", 2, "1.0.0"),
		refused("decrby", 3, "1.0.0"),
		refused("getset", 3, "1.0.0"),
		refused("incrbyfloat", 3, "2.6.0"),
		refused("rename", 3, "1.0.0"),
		refused("renamenx", 3, "1.0.0"),
	)
}

// refusals say why each refused command is: IDs never go back nor repeat.
var refusals = map[string]string{
	"unlink":      "deleting a tag risks repeated IDs (a re-created row starts again at 1); tags are never deleted",
	"getdel":      "deleting a tag risks repeated IDs (a re-created row starts again at 1); GET answers without deleting",
	"flushdb":     "deleting tags risks repeated IDs (a re-created row starts again at 1); tags are never deleted",
	"flushall":    "deleting tags risks repeated IDs (a re-created row starts again at 1); tags are never deleted",
	"decr":        "IDs never go back: an ID handed out is never handed out again",
	"decrby":      "IDs never go back: an ID handed out is never handed out again",
	"getset":      "it would set a tag back and repeat IDs; SET tag n raises the floor, and GET reads it",
	"incrbyfloat": "IDs are integers; INCRBY tag n reserves n of them",
	"rename":      "a tag's name is its row: the new name would start again at 1, and the old one again too",
	"renamenx":    "a tag's name is its row: the new name would start again at 1, and the old one again too",
}

// cmdRefused answers a refused command with the reason.
func cmdRefused(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	s.writeError(c, conn, fmt.Sprintf(errRefused, strings.ToUpper(name), refusals[name]))
}

// exists reports whether the tag name of the connection's database has a
// row, or writes the error.
func (s *Server) exists(c *client, conn *resp.Conn, name []byte) (bool, bool) {
	ok, err := s.alloc.Exists(s.ctx, string(c.key(name)))
	if err != nil {
		s.allocError(c, conn, name, err)
		return false, false
	}
	return ok, true
}

// cmdExists: EXISTS tag [tag ...] -> how many of the names are tags (a
// name given twice counts twice, as in Redis).
func cmdExists(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	n := 0
	for _, name := range args[1:] {
		ok, done := s.exists(c, conn, name)
		if !done {
			return
		}
		if ok {
			n++
		}
	}
	conn.WriteInt(n)
}

// cmdType: TYPE tag -> string, or none.
func cmdType(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	ok, done := s.exists(c, conn, args[1])
	switch {
	case !done:
	case ok:
		conn.WriteString("string")
	default:
		conn.WriteString("none")
	}
}

// cmdTTL: TTL, PTTL, EXPIRETIME, PEXPIRETIME tag -> -1 for a tag (no
// expiry), -2 for a name that is no tag.
func cmdTTL(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	ok, done := s.exists(c, conn, args[1])
	switch {
	case !done:
	case ok:
		conn.WriteInt(-1)
	default:
		conn.WriteInt(-2)
	}
}

// cmdPersist: PERSIST tag -> 0: no expiry to remove.
func cmdPersist(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteInt(0)
}

// cmdExpire: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT tag n [NX|XX|GT|LT] -> 0,
// after Redis's checks of the arguments (options first, then the number).
func cmdExpire(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	var nx, xx, gt, lt bool
	for _, opt := range args[3:] {
		switch {
		case bytes.EqualFold(opt, []byte("nx")):
			nx = true
		case bytes.EqualFold(opt, []byte("xx")):
			xx = true
		case bytes.EqualFold(opt, []byte("gt")):
			gt = true
		case bytes.EqualFold(opt, []byte("lt")):
			lt = true
		default:
			s.writeError(c, conn, fmt.Sprintf(errExpireOption, cstr(opt)))
			return
		}
	}
	if nx && (xx || gt || lt) {
		s.writeError(c, conn, errExpireNX)
		return
	}
	if gt && lt {
		s.writeError(c, conn, errExpireGTLT)
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		s.writeError(c, conn, errNotInteger)
		return
	}
	name := strings.ToLower(string(args[0]))
	if name == "expire" || name == "expireat" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			s.writeError(c, conn, fmt.Sprintf(errExpireTime, name))
			return
		}
		n *= 1000
	}
	if name == "expire" || name == "pexpire" {
		if now := s.now().UnixMilli(); n > math.MaxInt64-now {
			s.writeError(c, conn, fmt.Sprintf(errExpireTime, name))
			return
		}
	}
	conn.WriteInt(0)
}

// value is what GET answers for a stored name: the last ID this server
// handed out; before any, the floor set on a tag that has no segment
// yet (SET tag n, then GET tag: n); false when neither.
func (s *Server) value(key string) (int64, bool) {
	if last, ok := s.alloc.LastIssued(key); ok {
		return last, true
	}
	if in, err := s.alloc.Info(key); err == nil && !in.Init && in.GuardHigh > 0 {
		return in.GuardHigh - 1, true
	}
	return 0, false
}

// cmdMGet: MGET tag [tag ...] -> GET of each.
func cmdMGet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteArray(len(args) - 1)
	for _, name := range args[1:] {
		if v, ok := s.value(string(c.key(name))); ok {
			conn.WriteBulkString(strconv.FormatInt(v, 10))
		} else {
			conn.WriteNull()
		}
	}
}

// cmdTime: TIME -> [unix seconds, microseconds], as bulk strings.
func cmdTime(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	now := s.now()
	conn.WriteArray(2)
	conn.WriteBulkString(strconv.FormatInt(now.Unix(), 10))
	conn.WriteBulkString(strconv.FormatInt(int64(now.Nanosecond()/int(time.Microsecond)), 10))
}

// nameIndex is the tags' names per database, sorted, for the listings.
// Tags are never dropped, so the index of a given number of tags is
// rebuilt only when that number grows.
type nameIndex struct {
	n   int
	dbs map[int][]string // user names, sorted
}

// names returns the sorted names of the tags of database db.
func (s *Server) names(db int) []string {
	idx := s.nameIdx.Load()
	if n := s.alloc.NumTags(); idx == nil || idx.n != n {
		all := s.alloc.Names()
		sort.Strings(all)
		idx = &nameIndex{n: len(all), dbs: map[int][]string{}}
		for _, stored := range all {
			d, name := segment.SplitDBName(stored)
			idx.dbs[d] = append(idx.dbs[d], name)
		}
		s.nameIdx.Store(idx)
	}
	return idx.dbs[db]
}

// cmdDBSize: DBSIZE -> the number of tags of the database.
func cmdDBSize(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteInt(len(s.names(c.db)))
}

// cmdKeys: KEYS pattern -> the names of the database's tags that match,
// sorted.
func cmdKeys(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	var out []string
	pat := args[1]
	all := len(pat) == 1 && pat[0] == '*'
	for _, name := range s.names(c.db) {
		if all || globMatch(pat, []byte(name)) {
			out = append(out, name)
		}
	}
	conn.WriteArray(len(out))
	for _, name := range out {
		conn.WriteBulkString(name)
	}
}

// cmdScan: SCAN cursor [MATCH pattern] [COUNT n] [TYPE type] -> [next
// cursor, names]. The cursor is a position in the sorted names of the
// database's tags. Tags are only ever added, which moves later names to
// higher positions: a scan returns every tag that existed when it began,
// and may return one twice, as Redis allows.
func cmdScan(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		s.writeError(c, conn, errInvalidCursor)
		return
	}
	count := int64(10)
	var pat []byte
	typeOK := true
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			s.writeError(c, conn, errSyntax)
			return
		}
		opt, val := args[i], args[i+1]
		switch {
		case bytes.EqualFold(opt, []byte("count")):
			n, ok := parseInt(val)
			if !ok {
				s.writeError(c, conn, errNotInteger)
				return
			}
			if n < 1 {
				s.writeError(c, conn, errSyntax)
				return
			}
			count = n
		case bytes.EqualFold(opt, []byte("match")):
			pat = val
			if len(pat) == 1 && pat[0] == '*' {
				pat = nil
			}
		case bytes.EqualFold(opt, []byte("type")):
			typeOK = bytes.EqualFold(val, []byte("string"))
		default:
			s.writeError(c, conn, errSyntax)
			return
		}
	}
	names := s.names(c.db)
	var out []string
	next := uint64(0)
	if cursor < uint64(len(names)) {
		end := uint64(len(names))
		if uint64(count) < end-cursor {
			end = cursor + uint64(count)
			next = end
		}
		for _, name := range names[cursor:end] {
			if typeOK && (pat == nil || globMatch(pat, []byte(name))) {
				out = append(out, name)
			}
		}
	}
	conn.WriteArray(2)
	conn.WriteBulkString(strconv.FormatUint(next, 10))
	conn.WriteArray(len(out))
	for _, name := range out {
		conn.WriteBulkString(name)
	}
}

// globMatch is Redis's glob-style matching (stringmatchlen): * ? [set]
// [^set] [a-z] and \ escaping, byte by byte, case-sensitive. It
// backtracks only to the last star, so any pattern costs at most
// len(pat)*len(s) steps.
func globMatch(pat, s []byte) bool {
	p, i := 0, 0
	starP, starS := -1, 0
	for i < len(s) {
		if p < len(pat) && pat[p] == '*' {
			starP, starS = p, i
			p++
			continue
		}
		if p < len(pat) {
			if n, ok := globOne(pat[p:], s[i]); ok {
				p += n
				i++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		p, i = starP+1, starS
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// globOne matches the byte ch against the element that starts pat (not a
// star) and returns that element's length.
func globOne(pat []byte, ch byte) (int, bool) {
	switch pat[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pat) >= 2 {
			return 2, pat[1] == ch
		}
		return 1, ch == '\\'
	case '[':
		i := 1
		not := i < len(pat) && pat[i] == '^'
		if not {
			i++
		}
		match := false
		for i < len(pat) && pat[i] != ']' {
			switch {
			case pat[i] == '\\' && i+1 < len(pat):
				i++
				match = match || pat[i] == ch
			case i+2 < len(pat) && pat[i+1] == '-':
				lo, hi := pat[i], pat[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				match = match || (lo <= ch && ch <= hi)
				i += 2
			default:
				match = match || pat[i] == ch
			}
			i++
		}
		if i < len(pat) {
			i++ // the ]
		}
		return i, match != not
	}
	return 1, pat[0] == ch
}
