package server

import (
	"bytes"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// Server commands: INFO, COMMAND and CONFIG, in the shapes redis-cli,
// redis-benchmark and client libraries read.

func registerServer(t table) {
	t.add(
		&command{
			name: "info", arity: -1, fn: cmdInfo,
			flags: []string{"loading", "stale"}, acl: []string{"slow", "dangerous"},
			summary: "Returns information and statistics about the server", since: "1.0.0", group: "server",
			complex: "O(1)", args: []argDoc{{name: "section", typ: "string", optional: true}},
		},
		(&command{
			name: "command", arity: -1, fn: cmdCommand,
			flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
			summary: "Returns detailed information about all commands", since: "2.8.13", group: "server",
			complex: "O(N) where N is the total number of commands",
			help: []string{
				"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"(no subcommand)",
				"    Return details about all commands.",
				"COUNT",
				"    Return the total number of commands in this server.",
				"LIST",
				"    Return a list of all commands in this server.",
				"INFO [<command-name> ...]",
				"    Return details about multiple commands.",
				"DOCS [<command-name> ...]",
				"    Return documentation details about multiple commands.",
				"HELP",
				"    Print this help.",
			},
		}).sub(
			&command{name: "count", arity: 2, fn: cmdCommandCount, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns a count of commands", since: "2.8.13", group: "server", complex: "O(1)"},
			&command{name: "docs", arity: -2, fn: cmdCommandDocs, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns documentary information about one, multiple or all commands", since: "7.0.0", group: "server",
				complex: "O(N) where N is the number of commands to look up"},
			&command{name: "info", arity: -2, fn: cmdCommandInfo, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns information about one, multiple or all commands", since: "2.8.13", group: "server",
				complex: "O(N) where N is the number of commands to look up"},
			&command{name: "list", arity: 2, fn: cmdCommandList, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns a list of command names", since: "7.0.0", group: "server", complex: "O(N) where N is the total number of commands"},
			&command{name: "help", arity: 2, fn: cmdCommandHelp, flags: []string{"loading", "stale"}, acl: []string{"slow", "connection"},
				summary: "Returns helpful text about the different subcommands", since: "5.0.0", group: "server", complex: "O(1)"},
		),
		(&command{
			name: "config", arity: -2,
			flags: []string{}, acl: []string{"slow"},
			summary: "A container for server configuration commands", since: "2.0.0", group: "server", complex: "Depends on subcommand.",
			help: []string{
				"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"GET <pattern>",
				"    Return parameters matching the glob-like <pattern> and their values.",
				"SET <directive> <value>",
				"    Not supported: leaf reads its settings from leaf.yaml at start.",
				"HELP",
				"    Print this help.",
			},
		}).sub(
			&command{name: "get", arity: -3, fn: cmdConfigGet, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
				summary: "Returns the effective values of configuration parameters", since: "2.0.0", group: "server", complex: "O(N) when N is the number of configuration parameters provided",
				args: []argDoc{{name: "parameter", typ: "string"}}},
			&command{name: "set", arity: -4, fn: cmdConfigSet, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous"},
				summary: "Not supported by leaf", since: "2.0.0", group: "server", complex: "O(1)",
				args: []argDoc{{name: "parameter", typ: "string"}, {name: "value", typ: "string"}}},
			&command{name: "help", arity: 2, fn: cmdConfigHelp, flags: []string{"loading", "stale"}, acl: []string{"slow"},
				summary: "Returns helpful text about the different subcommands", since: "5.0.0", group: "server", complex: "O(1)"},
		),
	)
}

// unixMilli is t in unix milliseconds, 0 for the zero time (never).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// port is the TCP port Serve listens on, 0 when unknown.
func (s *Server) port() int {
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// cmdCommand: COMMAND -> COMMAND INFO of every command.
func cmdCommand(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteArray(len(s.sorted))
	for _, cmd := range s.sorted {
		c.writeCommandInfo(conn, cmd)
	}
}

func cmdCommandCount(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteInt(len(s.sorted))
}

func cmdCommandHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["command"].help)
}

// cmdCommandList: COMMAND LIST -> every command name, subcommands included.
func cmdCommandList(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	var names []string
	for _, cmd := range s.sorted {
		names = append(names, cmd.name)
		for _, sub := range cmd.sortedSubs() {
			names = append(names, sub.name)
		}
	}
	conn.WriteArray(len(names))
	for _, n := range names {
		conn.WriteBulkString(n)
	}
}

// lookupName finds a command by the name COMMAND INFO/DOCS take: "incr",
// or "client|setname" for a subcommand; any case.
func (s *Server) lookupName(name []byte) *command {
	top, sub, hasSub := bytes.Cut(bytes.ToLower(name), []byte("|"))
	cmd := s.cmds[string(top)]
	if cmd == nil || !hasSub {
		return cmd
	}
	return cmd.subs[string(sub)]
}

// cmdCommandInfo: COMMAND INFO [name ...] -> one entry per name, nil for an
// unknown one; every command when no name is given.
func cmdCommandInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if len(args) == 2 {
		cmdCommand(s, c, conn, args)
		return
	}
	conn.WriteArray(len(args) - 2)
	for _, name := range args[2:] {
		if cmd := s.lookupName(name); cmd != nil {
			c.writeCommandInfo(conn, cmd)
		} else {
			conn.WriteNull()
		}
	}
}

// writeCommandInfo writes Redis 7's ten-element COMMAND INFO entry: name,
// arity, flags, first key, last key, key step, ACL categories, tips, key
// specs, subcommands.
func (c *client) writeCommandInfo(conn *resp.Conn, cmd *command) {
	conn.WriteArray(10)
	conn.WriteBulkString(cmd.name)
	conn.WriteInt(cmd.arity)
	conn.WriteSet(len(cmd.flags))
	for _, f := range cmd.flags {
		conn.WriteString(f)
	}
	step := 0
	if cmd.firstKey > 0 {
		step = 1
	}
	conn.WriteInt(cmd.firstKey)
	conn.WriteInt(cmd.firstKey)
	conn.WriteInt(step)
	conn.WriteSet(len(cmd.acl))
	for _, a := range cmd.acl {
		conn.WriteString("@" + a)
	}
	conn.WriteSet(0) // tips
	if cmd.firstKey > 0 {
		// One key at a fixed index, as Redis describes INCR's.
		conn.WriteArray(1)
		conn.WriteMap(3)
		conn.WriteBulkString("flags")
		conn.WriteSet(len(cmd.keyFlags))
		for _, f := range cmd.keyFlags {
			conn.WriteString(f)
		}
		conn.WriteBulkString("begin_search")
		conn.WriteMap(2)
		conn.WriteBulkString("type")
		conn.WriteBulkString("index")
		conn.WriteBulkString("spec")
		conn.WriteMap(1)
		conn.WriteBulkString("index")
		conn.WriteInt(cmd.firstKey)
		conn.WriteBulkString("find_keys")
		conn.WriteMap(2)
		conn.WriteBulkString("type")
		conn.WriteBulkString("range")
		conn.WriteBulkString("spec")
		conn.WriteMap(3)
		conn.WriteBulkString("lastkey")
		conn.WriteInt(0)
		conn.WriteBulkString("keystep")
		conn.WriteInt(1)
		conn.WriteBulkString("limit")
		conn.WriteInt(0)
	} else {
		conn.WriteArray(0)
	}
	subs := cmd.sortedSubs()
	conn.WriteArray(len(subs))
	for _, sub := range subs {
		c.writeCommandInfo(conn, sub)
	}
}

// cmdCommandDocs: COMMAND DOCS [name ...] -> a map of name to its docs
// (redis-cli asks on connect for its hints); unknown names are left out.
func cmdCommandDocs(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	cmds := s.sorted
	if len(args) > 2 {
		cmds = nil
		for _, name := range args[2:] {
			if cmd := s.lookupName(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	conn.WriteMap(len(cmds))
	for _, cmd := range cmds {
		conn.WriteBulkString(cmd.name)
		c.writeCommandDocs(conn, cmd)
	}
}

func (c *client) writeCommandDocs(conn *resp.Conn, cmd *command) {
	n := 4
	if len(cmd.args) > 0 {
		n++
	}
	if len(cmd.subs) > 0 {
		n++
	}
	conn.WriteMap(n)
	conn.WriteBulkString("summary")
	conn.WriteBulkString(cmd.summary)
	conn.WriteBulkString("since")
	conn.WriteBulkString(cmd.since)
	conn.WriteBulkString("group")
	conn.WriteBulkString(cmd.group)
	conn.WriteBulkString("complexity")
	conn.WriteBulkString(cmd.complex)
	if len(cmd.args) > 0 {
		conn.WriteBulkString("arguments")
		conn.WriteArray(len(cmd.args))
		for _, a := range cmd.args {
			m := 2
			if a.typ == "key" {
				m++
			}
			if a.optional {
				m++
			}
			conn.WriteMap(m)
			conn.WriteBulkString("name")
			conn.WriteBulkString(a.name)
			conn.WriteBulkString("type")
			conn.WriteBulkString(a.typ)
			if a.typ == "key" {
				conn.WriteBulkString("key_spec_index")
				conn.WriteInt(0) // the one key spec
			}
			if a.optional {
				conn.WriteBulkString("flags")
				conn.WriteSet(1)
				conn.WriteString("optional")
			}
		}
	}
	if len(cmd.subs) > 0 {
		conn.WriteBulkString("subcommands")
		subs := cmd.sortedSubs()
		conn.WriteMap(len(subs))
		for _, sub := range subs {
			conn.WriteBulkString(sub.name)
			c.writeCommandDocs(conn, sub)
		}
	}
}

// configParams are the parameters CONFIG GET answers, with the values that
// describe leaf to tools written for Redis: redis-benchmark asks for save
// and appendonly, prometheus-redis-exporter for maxmemory, maxclients
// and databases. The password is never among them.
func (s *Server) configParams() [][2]string {
	host, port := "", "0"
	if a := s.Addr(); a != nil {
		if h, p, err := net.SplitHostPort(a.String()); err == nil {
			host, port = h, p
		}
	}
	// Redis's slowlog-log-slower-than is in microseconds, -1 when off.
	slower := int64(-1)
	if th := s.slowlog.threshold; th >= 0 {
		slower = th.Microseconds()
	}
	return [][2]string{
		{"appendonly", "no"},
		{"bind", host},
		{"databases", strconv.Itoa(s.opts.Databases)},
		{"maxclients", strconv.Itoa(s.rs.MaxClients())},
		{"maxmemory", "0"}, // leaf keeps no data set that could grow: no limit to set
		{"maxmemory-policy", "noeviction"},
		{"port", port},
		{"save", ""},
		{"slowlog-log-slower-than", strconv.FormatInt(slower, 10)},
		{"slowlog-max-len", strconv.Itoa(slowlogMaxLen)},
		{"timeout", strconv.FormatInt(int64((s.opts.Conn.IdleTimeout+time.Second-1)/time.Second), 10)}, // seconds, rounded up
	}
}

// cmdConfigGet: CONFIG GET pattern [pattern ...] -> name/value pairs (a map
// in RESP3). As Redis 7.0: a pattern without glob characters is looked up
// by name and answered under the name as given; a glob answers the
// canonical names that match, case-insensitively. Each parameter once.
func cmdConfigGet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	params := s.configParams()
	var out [][2]string
	seen := map[string]bool{}
	for _, a := range args[2:] {
		pat := strings.ToLower(string(a))
		glob := strings.ContainsAny(pat, "*?[")
		for _, p := range params {
			if seen[p[0]] {
				continue
			}
			if glob {
				if ok, _ := path.Match(pat, p[0]); !ok {
					continue
				}
				seen[p[0]] = true
				out = append(out, p)
			} else if pat == p[0] {
				seen[p[0]] = true
				out = append(out, [2]string{string(a), p[1]})
			}
		}
	}
	conn.WriteMap(len(out))
	for _, p := range out {
		conn.WriteBulkString(p[0])
		conn.WriteBulkString(p[1])
	}
}

func cmdConfigSet(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, errConfigSet)
}

func cmdConfigHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["config"].help)
}
