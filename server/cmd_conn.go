package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/leaf-id/leaf/resp"
)

// Connection commands: what client libraries and redis-cli send on connect
// (HELLO, AUTH, SELECT, CLIENT SETNAME/SETINFO) and PING, ECHO, QUIT.

// redisVersion is the Redis version leaf reports (HELLO, INFO): clients
// enable features by it, and leaf behaves as 7.0 where they look.
const redisVersion = "7.0.0"

// defaultUser is the only user: leaf has requirepass, not ACLs.
const defaultUser = "default"

func registerConn(t table) {
	t.add(
		&command{
			name: "hello", arity: -1, noAuth: true, fn: cmdHello,
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"fast", "connection"},
			summary: "Handshakes with the server: protocol version, authentication, name", since: "6.0.0", group: "connection", complex: "O(1)",
			args: []argDoc{{name: "protover", typ: "integer", optional: true}},
		},
		&command{
			name: "auth", arity: -2, noAuth: true, fn: cmdAuth,
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"fast", "connection"},
			summary: "Authenticates the connection", since: "1.0.0", group: "connection", complex: "O(N) where N is the number of passwords defined for the user",
			args: []argDoc{{name: "username", typ: "string", optional: true}, {name: "password", typ: "string"}},
		},
		&command{
			name: "quit", arity: -1, noAuth: true, fn: cmdQuit, txRuns: true,
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"connection"},
			summary: "Closes the connection", since: "1.0.0", group: "connection", complex: "O(1)",
		},
		&command{
			name: "ping", arity: -1, fn: cmdPing,
			flags: []string{"fast"}, acl: []string{"fast", "connection"},
			summary: "Returns the server's liveliness response", since: "1.0.0", group: "connection", complex: "O(1)",
			args: []argDoc{{name: "message", typ: "string", optional: true}},
		},
		&command{
			name: "echo", arity: 2, fn: cmdEcho,
			flags: []string{"fast"}, acl: []string{"fast", "connection"},
			summary: "Returns the given string", since: "1.0.0", group: "connection", complex: "O(1)",
			args: []argDoc{{name: "message", typ: "string"}},
		},
		&command{
			name: "select", arity: 2, fn: cmdSelect,
			flags: []string{"loading", "stale", "fast"}, acl: []string{"fast", "connection"},
			summary: "Changes the selected database: each its own namespace of tags", since: "1.0.0", group: "connection", complex: "O(1)",
			args: []argDoc{{name: "index", typ: "integer"}},
		},
		(&command{
			name: "client", arity: -2,
			flags: []string{}, acl: []string{"slow"},
			summary: "A container for client connection commands", since: "2.4.0", group: "connection", complex: "Depends on subcommand.",
			help: []string{
				"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"GETNAME",
				"    Return the name of the current connection.",
				"ID",
				"    Return the ID of the current connection.",
				"INFO",
				"    Return information about the current client connection.",
				"KILL <ip:port>",
				"    Kill connection made from <ip:port>.",
				"KILL <option> <value> [<option> <value> [...]]",
				"    Kill connections. Options are:",
				"    * ADDR (<ip:port>|<unixsocket>:0)",
				"      Kill connections made from the specified address",
				"    * LADDR (<ip:port>|<unixsocket>:0)",
				"      Kill connections made to specified local address",
				"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
				"      Kill connections by type.",
				"    * USER <username>",
				"      Kill connections authenticated by <username>.",
				"    * SKIPME (YES|NO)",
				"      Skip killing current connection (default: yes).",
				"LIST [options ...]",
				"    Return information about client connections. Options:",
				"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
				"      Return clients of specified type.",
				"SETINFO <option> <value>",
				"    Set client meta attr. Options are:",
				"    * LIB-NAME: the client lib name.",
				"    * LIB-VER: the client lib version.",
				"SETNAME <name>",
				"    Assign the name <name> to the current connection.",
				"NO-EVICT (ON|OFF)",
				"    Protect current client connection from eviction.",
				"HELP",
				"    Print this help.",
			},
		}).sub(
			&command{name: "id", arity: 2, fn: cmdClientID, flags: []string{"noscript", "loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns the unique client ID of the connection", since: "5.0.0", group: "connection", complex: "O(1)"},
			&command{name: "setname", arity: 3, fn: cmdClientSetName, flags: []string{"noscript", "loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Sets the connection name", since: "2.6.9", group: "connection", complex: "O(1)",
				args: []argDoc{{name: "connection-name", typ: "string"}}},
			&command{name: "getname", arity: 2, fn: cmdClientGetName, flags: []string{"noscript", "loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns the name of the connection", since: "2.6.9", group: "connection", complex: "O(1)"},
			&command{name: "setinfo", arity: 4, fn: cmdClientSetInfo, flags: []string{"noscript", "loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Sets information specific to the client or connection", since: "7.2.0", group: "connection", complex: "O(1)",
				args: []argDoc{{name: "attr", typ: "string"}, {name: "value", typ: "string"}}},
			&command{name: "info", arity: 2, fn: cmdClientInfo, flags: []string{"noscript", "loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns information about the connection", since: "6.2.0", group: "connection", complex: "O(1)"},
			&command{name: "list", arity: -2, fn: cmdClientList, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous", "connection"},
				summary: "Lists open connections", since: "2.4.0", group: "connection", complex: "O(N) where N is the number of client connections"},
			&command{name: "help", arity: 2, fn: cmdClientHelp, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns helpful text about the different subcommands", since: "5.0.0", group: "connection", complex: "O(1)"},
		),
	)
}

// checkAuth reports whether user/pass are the default user's credentials.
// Without a password the default user takes any password, as Redis's
// nopass default user does. Both sides are hashed and compared in constant
// time, so neither the password nor its length leaks through timing.
func (s *Server) checkAuth(user, pass []byte) bool {
	userOK := subtle.ConstantTimeCompare(user, []byte(defaultUser)) == 1
	if !s.hasPass {
		return userOK
	}
	sum := sha256.Sum256(pass)
	passOK := subtle.ConstantTimeCompare(sum[:], s.passSum[:]) == 1
	return userOK && passOK
}

// cmdAuth: AUTH [user] pass.
func cmdAuth(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if len(args) > 3 {
		s.writeError(c, conn, errSyntax)
		return
	}
	user, pass := []byte(defaultUser), args[len(args)-1]
	if len(args) == 2 {
		if !s.hasPass {
			s.writeError(c, conn, errNoPassword)
			return
		}
	} else {
		user = args[1]
	}
	if !s.login(c, conn, user, pass) {
		s.writeError(c, conn, errWrongPass)
		s.authFailed(c, conn)
		return
	}
	conn.WriteString("OK")
}

// cmdHello: HELLO [protover [AUTH user pass] [SETNAME name]]. It follows
// Redis 7.0's helloCommand: version first, then options, then
// authentication, then the name, then the switch and the reply.
func cmdHello(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	ver := int64(0)
	i := 1
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			s.writeError(c, conn, errProtoNotInt)
			return
		}
		if v < 2 || v > 3 {
			s.writeError(c, conn, errNoProto)
			return
		}
		ver, i = v, 2
	}
	var user, pass, name []byte
	auth, setName := false, false
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		switch opt := args[i]; {
		case bytes.EqualFold(opt, []byte("auth")) && more >= 2:
			user, pass, auth = args[i+1], args[i+2], true
			i += 2
		case bytes.EqualFold(opt, []byte("setname")) && more >= 1:
			name, setName = args[i+1], true
			i++
		default:
			s.writeError(c, conn, fmt.Sprintf(errHelloOption, cstr(opt)))
			return
		}
	}
	if auth {
		if !s.login(c, conn, user, pass) {
			s.writeError(c, conn, errWrongPass)
			s.authFailed(c, conn)
			return
		}
	}
	if !c.authed {
		s.writeError(c, conn, errHelloNoAuth)
		return
	}
	if setName && !s.setName(c, conn, name) {
		return
	}
	if ver != 0 {
		c.setResp(conn, int(ver))
	}
	conn.WriteMap(7)
	conn.WriteBulkString("server")
	conn.WriteBulkString("redis")
	conn.WriteBulkString("version")
	conn.WriteBulkString(redisVersion)
	conn.WriteBulkString("proto")
	conn.WriteInt(conn.Protocol())
	conn.WriteBulkString("id")
	conn.WriteInt64(c.id)
	conn.WriteBulkString("mode")
	conn.WriteBulkString("standalone")
	conn.WriteBulkString("role")
	conn.WriteBulkString("master")
	conn.WriteBulkString("modules")
	conn.WriteArray(0)
}

// cmdQuit: QUIT -> +OK, then the connection closes; the rest of the
// pipeline is dropped unread, as Redis does.
func cmdQuit(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteString("OK")
	conn.Quit()
}

// cmdPing: PING [message].
func cmdPing(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if len(args) > 2 {
		s.writeError(c, conn, fmt.Sprintf(errWrongArgs, "ping"))
		return
	}
	if len(args) == 2 {
		conn.WriteBulk(args[1])
		return
	}
	conn.WriteString("PONG")
}

// cmdEcho: ECHO message.
func cmdEcho(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteBulk(args[1])
}

// cmdSelect: SELECT n, for n below Options.Databases: the connection's
// tags are then those of database n, a namespace of its own
// (segment.AppendDBName).
func cmdSelect(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	n, ok := parseInt(args[1])
	if !ok || n < -2147483648 || n > 2147483647 {
		s.writeError(c, conn, errNotInteger)
		return
	}
	if n < 0 || n >= int64(s.opts.Databases) {
		s.writeError(c, conn, errDBIndex)
		return
	}
	c.db = int(n)
	c.meta.Lock()
	c.meta.db = c.db
	c.meta.Unlock()
	conn.WriteString("OK")
}

func cmdClientID(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteInt64(c.id)
}

// validAttr is Redis's rule for client names and library attributes:
// printable ASCII without spaces.
func validAttr(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// setName sets the connection's name, or writes the error and reports
// false. An empty name removes it.
func (s *Server) setName(c *client, conn *resp.Conn, name []byte) bool {
	if !validAttr(name) {
		s.writeError(c, conn, errClientName)
		return false
	}
	if len(name) > maxClientAttr {
		s.writeError(c, conn, fmt.Sprintf(errClientNameLong, maxClientAttr))
		return false
	}
	c.meta.Lock()
	c.meta.name = string(name)
	c.meta.Unlock()
	return true
}

func cmdClientSetName(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if s.setName(c, conn, args[2]) {
		conn.WriteString("OK")
	}
}

func cmdClientGetName(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	c.meta.Lock()
	name := c.meta.name
	c.meta.Unlock()
	if name == "" {
		conn.WriteNull()
		return
	}
	conn.WriteBulkString(name)
}

// cmdClientSetInfo: CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2, sent
// by go-redis, redis-py and others on connect).
func cmdClientSetInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	attr, val := args[2], args[3]
	var dst *string
	switch {
	case bytes.EqualFold(attr, []byte("lib-name")):
		dst = &c.meta.libName
	case bytes.EqualFold(attr, []byte("lib-ver")):
		dst = &c.meta.libVer
	default:
		s.writeError(c, conn, fmt.Sprintf(errSetInfoOption, cstr(attr)))
		return
	}
	if !validAttr(val) {
		s.writeError(c, conn, fmt.Sprintf(errSetInfoValue, cstr(attr)))
		return
	}
	if len(val) > maxClientAttr {
		s.writeError(c, conn, fmt.Sprintf(errSetInfoLong, cstr(attr), maxClientAttr))
		return
	}
	c.meta.Lock()
	*dst = string(val)
	c.meta.Unlock()
	conn.WriteString("OK")
}

func cmdClientInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteVerbatim(string(c.appendInfo(nil, s.now())))
}

func cmdClientHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["client"].help)
}

// writeHelp writes a HELP reply: an array of status lines, as Redis does.
func writeHelp(conn *resp.Conn, lines []string) {
	conn.WriteArray(len(lines))
	for _, l := range lines {
		conn.WriteString(l)
	}
}
