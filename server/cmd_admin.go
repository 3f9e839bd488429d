package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leaf-id/leaf/resp"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
)

// Administration: LEAF.CREATE, LEAF.STEP and LEAF.FLOOR change a tag's row;
// SET, GET and DEL are what users migrating Redis counters reach for: SET
// raises the floor (LEAF.FLOOR), GET is the last ID this server handed
// out, DEL is refused because a deleted row starts again at 1.
//
// LEAF.CREATE, LEAF.STEP, LEAF.FLOOR and SET are administrative: when
// Options.AdminPassword is set, only a connection authenticated as the user
// admin (AUTH admin <pw>, HELLO 3 AUTH admin <pw>) may run them; others get
// Redis's NOPERM. When it is empty, any authenticated client may.

// adminUser is the second AUTH user, enabled by Options.AdminPassword.
const adminUser = "admin"

func registerAdmin(t table) {
	adminFlags := []string{"write", "admin", "denyoom"}
	adminACL := []string{"admin", "write", "slow", "dangerous"}
	t.add(
		&command{
			name: "leaf.create", arity: -2, fn: cmdLeafCreate,
			flags: adminFlags, acl: adminACL,
			firstKey: 1, keyFlags: []string{"OW", "insert"},
			summary: "Creates a tag, with the table's step and a description, in segment or Snowflake mode; an error when it exists",
			since:   "1.0.0", group: "server", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "step", typ: "integer", optional: true},
				{name: "desc", typ: "string", optional: true}, {name: "mode", typ: "string", optional: true}},
		},
		&command{
			name: "leaf.step", arity: 3, fn: cmdLeafStep,
			flags: adminFlags, acl: adminACL,
			firstKey: 1, keyFlags: []string{"RW", "update"},
			summary: "Changes a tag's step in the table: the floor of its adaptive step, from the next load",
			since:   "1.0.0", group: "server", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "step", typ: "integer"}},
		},
		&command{
			name: "leaf.floor", arity: 3, fn: cmdLeafFloor,
			flags: adminFlags, acl: adminACL,
			firstKey: 1, keyFlags: []string{"RW", "update"},
			summary: "Makes every later ID of a tag greater than n; never lowers; returns the floor in effect",
			since:   "1.0.0", group: "server", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "n", typ: "integer"}},
		},
		&command{
			name: "set", arity: -3, fn: cmdSet,
			flags: adminFlags, acl: []string{"admin", "write", "string", "slow", "dangerous"},
			firstKey: 1, keyFlags: []string{"RW", "update"},
			summary: "SET tag n: LEAF.FLOOR for Redis users migrating counters (raises only); SET tag n NX creates the tag with its first ID above n",
			since:   "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "value", typ: "integer"}},
		},
		&command{
			name: "setnx", arity: 3, fn: cmdSetNX,
			flags: adminFlags, acl: []string{"admin", "write", "string", "fast", "dangerous"},
			firstKey: 1, keyFlags: []string{"OW", "insert"},
			summary: "SETNX tag n: creates the tag with its first ID above n; 0 when it exists",
			since:   "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "value", typ: "integer"}},
		},
		&command{
			name: "get", arity: 2, fn: cmdGet,
			flags: []string{"readonly", "fast"}, acl: []string{"read", "string", "fast"},
			firstKey: 1, keyFlags: []string{"RO", "access"},
			summary: "Returns the last ID this server handed out for a tag, or the floor set before any; nil when neither",
			since:   "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}},
		},
		&command{
			name: "del", arity: -2, fn: cmdDel,
			flags: []string{"write"}, acl: []string{"keyspace", "write", "slow"},
			firstKey: 1, keyFlags: []string{"RM", "delete"},
			summary: "Refused: deleting a tag lets its IDs repeat",
			since:   "1.0.0", group: "generic", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}},
		},
	)
}

// login checks the credentials of AUTH or HELLO ... AUTH: the admin user's
// when Options.AdminPassword is set, else the default user's (checkAuth).
// On success it records who the connection is now (AUTH switches users, as
// in Redis); on failure nothing changes.
func (s *Server) login(c *client, conn *resp.Conn, user, pass []byte) bool {
	switch {
	case s.checkAdmin(user, pass):
		c.setUser(conn, true)
	case s.checkAuth(user, pass):
		c.setUser(conn, false)
	default:
		return false
	}
	return true
}

// checkAdmin reports whether user/pass are the admin user's credentials;
// never when no admin password is set. Digests are compared in constant
// time, as checkAuth does.
func (s *Server) checkAdmin(user, pass []byte) bool {
	if s.opts.AdminPassword == "" {
		return false
	}
	userOK := subtle.ConstantTimeCompare(user, []byte(adminUser)) == 1
	want := sha256.Sum256([]byte(s.opts.AdminPassword))
	got := sha256.Sum256(pass)
	passOK := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	return userOK && passOK
}

// adminOK reports whether the connection may run the administrative command
// name; when not, it writes Redis's NOPERM reply.
func (s *Server) adminOK(c *client, conn *resp.Conn, name string) bool {
	if s.opts.AdminPassword == "" || c.admin {
		return true
	}
	s.writeError(c, conn, fmt.Sprintf(errNoPerm, defaultUser, name))
	return false
}

// cmdLeafCreate: LEAF.CREATE tag [STEP n] [DESC text] [MODE segment|snowflake]
// -> OK. Without STEP the tag gets segment.default_step; MODE snowflake
// makes a Snowflake tag (cmd_cluster.go), which takes no STEP.
func cmdLeafCreate(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "leaf.create") {
		return
	}
	var step int64
	var desc, mode string
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			s.writeError(c, conn, errSyntax)
			return
		}
		switch opt, val := args[i], args[i+1]; {
		case bytes.EqualFold(opt, []byte("step")):
			n, ok := s.parseStep(c, conn, val)
			if !ok {
				return
			}
			step = n
		case bytes.EqualFold(opt, []byte("desc")):
			if !utf8.Valid(val) || utf8.RuneCount(val) > persist.MaxDescriptionLen {
				s.writeError(c, conn, fmt.Sprintf(errDescription, persist.MaxDescriptionLen))
				return
			}
			desc = string(val)
		case bytes.EqualFold(opt, []byte("mode")):
			switch {
			case bytes.EqualFold(val, []byte("segment")):
				mode = ""
			case bytes.EqualFold(val, []byte(persist.ModeSnowflake)):
				mode = persist.ModeSnowflake
			default:
				s.writeError(c, conn, fmt.Sprintf(errModeUnknown, sanitize(string(trunc(val, 32)))))
				return
			}
		default:
			s.writeError(c, conn, errSyntax)
			return
		}
	}
	var err error
	switch {
	case mode == "":
		err = s.alloc.Create(s.ctx, string(c.key(args[1])), step, desc)
	case step != 0:
		s.writeError(c, conn, errModeStep)
		return
	default:
		err = s.alloc.CreateMode(s.ctx, string(c.key(args[1])), mode, desc)
	}
	switch {
	case err == nil:
		conn.WriteString("OK")
	case errors.Is(err, segment.ErrExists):
		s.writeError(c, conn, fmt.Sprintf(errTagExists, args[1]))
	default:
		s.allocError(c, conn, args[1], err)
	}
}

// cmdLeafStep: LEAF.STEP tag n -> OK.
func cmdLeafStep(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "leaf.step") {
		return
	}
	step, ok := s.parseStep(c, conn, args[2])
	if !ok {
		return
	}
	key := c.key(args[1])
	if err := s.alloc.SetStep(s.ctx, string(key), step); err != nil {
		if errors.Is(err, segment.ErrUnknownTag) {
			s.writeError(c, conn, fmt.Sprintf(errUnknownTagStep, args[1]))
			return
		}
		s.allocError(c, conn, args[1], err)
		return
	}
	if s.announce(c, conn, persist.ChangeStep, key, step, "step "+strconv.FormatInt(step, 10)) {
		conn.WriteString("OK")
	}
}

// parseStep parses a step argument: 1..persist.MaxStep (the column is an
// INT), or writes the error.
func (s *Server) parseStep(c *client, conn *resp.Conn, b []byte) (int64, bool) {
	n, ok := parseInt(b)
	if !ok {
		s.writeError(c, conn, errNotInteger)
		return 0, false
	}
	if n < 1 || n > persist.MaxStep {
		s.writeError(c, conn, fmt.Sprintf(errStepRange, persist.MaxStep))
		return 0, false
	}
	return n, true
}

// cmdLeafFloor: LEAF.FLOOR tag n -> the floor in effect: the tag's max_id - 1
// in the database, at least n. Every ID handed out later is above n.
func cmdLeafFloor(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "leaf.floor") {
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		s.writeError(c, conn, errNotInteger)
		return
	}
	floor, ok := s.floor(c, conn, args[1], n, errFloorLower)
	if ok {
		conn.WriteInt64(floor)
	}
}

// cmdSet: SET tag n -> OK, LEAF.FLOOR for Redis users migrating counters:
// it raises the floor and never lowers it. SET tag n NX -> OK when it
// created the tag with its first ID above n, nil when the tag exists (the
// idiom that starts a counter at n). The other options are refused with
// the reason: expiries, GET and XX mean nothing for an ID sequence.
func cmdSet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "set") {
		return
	}
	nx := false
	for _, opt := range args[3:] {
		o := strings.ToUpper(string(opt))
		switch o {
		case "NX":
			nx = true
		case "EX", "PX", "EXAT", "PXAT", "KEEPTTL":
			s.writeError(c, conn, fmt.Sprintf(errSetOption, o, "tags never expire (a tag dropped and created again would start at 1 and repeat its IDs)"))
			return
		case "GET":
			s.writeError(c, conn, fmt.Sprintf(errSetOption, o, "SET tag n raises the tag's floor, and GET tag reads the last ID"))
			return
		case "XX":
			s.writeError(c, conn, fmt.Sprintf(errSetOption, o, "SET tag n raises the floor of the tag, and creates it when missing; LEAF.FLOOR is the same"))
			return
		default:
			s.writeError(c, conn, errSyntax)
			return
		}
	}
	n, ok := s.parseFloor(c, conn, args[2])
	if !ok {
		return
	}
	if nx {
		if created, ok := s.createFloor(c, conn, args[1], n); ok {
			if created {
				conn.WriteString("OK")
			} else {
				conn.WriteNull()
			}
		}
		return
	}
	if _, ok := s.floor(c, conn, args[1], n, errSetLower); ok {
		conn.WriteString("OK")
	}
}

// cmdSetNX: SETNX tag n -> 1 when it created the tag with its first ID
// above n, 0 when the tag exists (SET tag n NX).
func cmdSetNX(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "setnx") {
		return
	}
	n, ok := s.parseFloor(c, conn, args[2])
	if !ok {
		return
	}
	if created, ok := s.createFloor(c, conn, args[1], n); ok {
		writeBool(conn, created)
	}
}

// parseFloor parses SET's value, a floor n >= 0, or writes the error.
func (s *Server) parseFloor(c *client, conn *resp.Conn, b []byte) (int64, bool) {
	n, ok := parseInt(b)
	if !ok {
		s.writeError(c, conn, errSetNotInteger)
		return 0, false
	}
	if n < 0 {
		s.writeError(c, conn, errFloorNegative)
		return 0, false
	}
	return n, true
}

// createFloor runs the allocator's CreateFloor for SET NX and SETNX, or
// writes the error.
func (s *Server) createFloor(c *client, conn *resp.Conn, name []byte, n int64) (created, ok bool) {
	key := c.key(name)
	created, err := s.alloc.CreateFloor(s.ctx, string(key), n)
	switch {
	case err == nil && !created:
		return false, true
	case err == nil:
		// Servers that still hold a tag of the name (its row deleted)
		// skip to the floor too.
		return true, s.announce(c, conn, persist.ChangeFloor, key, n, "floor "+strconv.FormatInt(n, 10))
	case errors.Is(err, segment.ErrOverflow) && s.ctx.Err() == nil:
		s.writeError(c, conn, fmt.Sprintf(errFloorRange, n))
	default:
		s.allocError(c, conn, name, err)
	}
	return false, false
}

// floor runs the allocator's Floor for LEAF.FLOOR and SET, or writes the
// error; lowerText is the command's reply when n is below an ID this server
// already handed out.
func (s *Server) floor(c *client, conn *resp.Conn, name []byte, n int64, lowerText string) (int64, bool) {
	if n < 0 {
		s.writeError(c, conn, errFloorNegative)
		return 0, false
	}
	key := c.key(name)
	floor, err := s.alloc.Floor(s.ctx, string(key), n)
	switch {
	case err == nil:
		// The floor asked for, not the one in effect: other servers'
		// cached segments lie below max_id, and only what is at or below
		// n is forbidden.
		return floor, s.announce(c, conn, persist.ChangeFloor, key, n, "floor "+strconv.FormatInt(n, 10))
	case errors.Is(err, segment.ErrWouldLower):
		last, _ := s.alloc.LastIssued(string(key))
		s.writeError(c, conn, fmt.Sprintf(lowerText, name, last, n))
	case errors.Is(err, segment.ErrOverflow) && s.ctx.Err() == nil:
		s.writeError(c, conn, fmt.Sprintf(errFloorRange, n))
	default:
		s.allocError(c, conn, name, err)
	}
	return 0, false
}

// cmdGet: GET tag -> the last ID this server handed out for the tag, as a
// bulk string like Redis's GET of a counter; before it handed out any, the
// floor set on the tag (SET tag n, then GET tag: n); nil when neither. It
// never answers an ID that was not handed out: after INCR (501) and a
// floor raised to 5000, GET answers 501 and the next INCR 5001. A
// Snowflake tag answers its last ID. It never reads the database.
func cmdGet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	v, ok := s.value(string(c.key(args[1])))
	if !ok {
		conn.WriteNull()
		return
	}
	conn.WriteBulkString(strconv.FormatInt(v, 10))
}

// cmdDel: DEL tag ... -> always an error: a deleted row is re-created at
// max_id 1 by the next INCR (auto-create) or by an operator, and servers
// that never saw the old row hand its IDs out again.
func cmdDel(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, errDel)
}
