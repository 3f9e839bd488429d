package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
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
			summary: "SET tag n: LEAF.FLOOR for Redis users migrating counters (raises only)",
			since:   "1.0.0", group: "string", complex: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}, {name: "value", typ: "integer"}},
		},
		&command{
			name: "get", arity: 2, fn: cmdGet,
			flags: []string{"readonly", "fast"}, acl: []string{"read", "string", "fast"},
			firstKey: 1, keyFlags: []string{"RO", "access"},
			summary: "Returns the last ID this server handed out for a tag, nil when none",
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
		err = s.alloc.Create(s.ctx, string(args[1]), step, desc)
	case step != 0:
		s.writeError(c, conn, errModeStep)
		return
	default:
		err = s.alloc.CreateMode(s.ctx, string(args[1]), mode, desc)
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
	if err := s.alloc.SetStep(s.ctx, string(args[1]), step); err != nil {
		if errors.Is(err, segment.ErrUnknownTag) {
			s.writeError(c, conn, fmt.Sprintf(errUnknownTag, args[1]))
			return
		}
		s.allocError(c, conn, args[1], err)
		return
	}
	if s.announce(c, conn, persist.ChangeStep, args[1], step, "step "+strconv.FormatInt(step, 10)) {
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
// it raises the floor and never lowers it. SET's options (EX, NX, GET, ...)
// are refused: they mean nothing for an ID sequence.
func cmdSet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if !s.adminOK(c, conn, "set") {
		return
	}
	if len(args) > 3 {
		s.writeError(c, conn, errSetOptions)
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		s.writeError(c, conn, errSetNotInteger)
		return
	}
	if _, ok := s.floor(c, conn, args[1], n, errSetLower); ok {
		conn.WriteString("OK")
	}
}

// floor runs the allocator's Floor for LEAF.FLOOR and SET, or writes the
// error; lowerText is the command's reply when n is below an ID this server
// already handed out.
func (s *Server) floor(c *client, conn *resp.Conn, tag []byte, n int64, lowerText string) (int64, bool) {
	if n < 0 {
		s.writeError(c, conn, errFloorNegative)
		return 0, false
	}
	floor, err := s.alloc.Floor(s.ctx, string(tag), n)
	switch {
	case err == nil:
		// The floor asked for, not the one in effect: other servers'
		// cached segments lie below max_id, and only what is at or below
		// n is forbidden.
		return floor, s.announce(c, conn, persist.ChangeFloor, tag, n, "floor "+strconv.FormatInt(n, 10))
	case errors.Is(err, segment.ErrWouldLower):
		last, _ := s.alloc.LastIssued(string(tag))
		s.writeError(c, conn, fmt.Sprintf(lowerText, tag, last, n))
	case errors.Is(err, segment.ErrOverflow) && s.ctx.Err() == nil:
		s.writeError(c, conn, fmt.Sprintf(errFloorRange, n))
	default:
		s.allocError(c, conn, tag, err)
	}
	return 0, false
}

// cmdGet: GET tag -> the last ID this server handed out for the tag, as a
// bulk string like Redis's GET of a counter; nil when it handed out none
// (or does not know the tag). It never reads the database.
func cmdGet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	last, ok := s.alloc.LastIssued(string(args[1]))
	if !ok {
		conn.WriteNull()
		return
	}
	conn.WriteBulkString(strconv.FormatInt(last, 10))
}

// cmdDel: DEL tag ... -> always an error: a deleted row is re-created at
// max_id 1 by the next INCR (auto-create) or by an operator, and servers
// that never saw the old row hand its IDs out again.
func cmdDel(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, errDel)
}
