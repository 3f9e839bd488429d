package server

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// CLIENT KILL, CLIENT NO-EVICT and the filters of CLIENT LIST, as Redis
// 7.0 answers them, and the line CLIENT LIST and CLIENT INFO write per
// connection. (The other CLIENT subcommands are the connection's own:
// cmd_conn.go.)

// registerClient adds the subcommands above to CLIENT (registered by
// registerConn).
func registerClient(t table) {
	client := t["client"]
	for _, sub := range []*command{
		{name: "kill", arity: -3, fn: cmdClientKill, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous", "connection"},
			summary: "Terminates open connections", since: "2.4.0", group: "connection", complex: "O(N) where N is the number of client connections",
			args: []argDoc{{name: "filter", typ: "oneof"}}},
		{name: "no-evict", arity: 3, fn: cmdClientNoEvict, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"admin", "slow", "dangerous", "connection"},
			summary: "Sets the client eviction mode of the connection", since: "7.0.0", group: "connection", complex: "O(1)",
			args: []argDoc{{name: "enabled", typ: "oneof"}}},
	} {
		sub.name = client.name + "|" + sub.name
		client.subs[sub.name[len(client.name)+1:]] = sub
	}
}

// clientFilter selects connections for CLIENT LIST and CLIENT KILL.
type clientFilter struct {
	ids         map[int64]bool // nil: any
	typ         string         // "": any; "normal" or another of Redis's types
	addr, laddr string
	user        string
	skip        *client // CLIENT KILL's SKIPME yes: the caller
}

// match reports whether o passes the filter.
func (f *clientFilter) match(o *client) bool {
	if o == f.skip || f.ids != nil && !f.ids[o.id] || f.addr != "" && o.addr != f.addr || f.laddr != "" && o.laddr != f.laddr {
		return false
	}
	if f.typ != "" && f.typ != "normal" {
		return false // leaf's connections are all normal ones: no replicas, masters, pub/sub
	}
	if f.user != "" {
		o.meta.Lock()
		admin := o.meta.admin
		o.meta.Unlock()
		if (f.user == adminUser) != admin {
			return false
		}
	}
	return true
}

// clientType checks a client type name as Redis's getClientTypeByName.
func clientType(name []byte) (string, bool) {
	switch n := string(bytes.ToLower(name)); n {
	case "normal", "master", "pubsub":
		return n, true
	case "replica", "slave":
		return "replica", true
	}
	return "", false
}

// cmdClientList: CLIENT LIST [TYPE type | ID id [id ...]]: the line of
// each connection that passes, as Redis writes it.
func cmdClientList(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	var f clientFilter
	switch {
	case len(args) == 2:
	case len(args) == 4 && bytes.EqualFold(args[2], []byte("type")):
		typ, ok := clientType(args[3])
		if !ok {
			s.writeError(c, conn, fmt.Sprintf(errClientType, cstr(args[3])))
			return
		}
		f.typ = typ
	case len(args) > 3 && bytes.EqualFold(args[2], []byte("id")):
		f.ids = map[int64]bool{}
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok {
				s.writeError(c, conn, errClientID)
				return
			}
			f.ids[id] = true
		}
	default:
		s.writeError(c, conn, errSyntax)
		return
	}
	now := s.now()
	var b []byte
	for _, o := range s.sortedClients() {
		if f.match(o) {
			b = o.appendInfo(b, now)
		}
	}
	conn.WriteVerbatim(string(b))
}

// cmdClientKill: CLIENT KILL addr, or CLIENT KILL filter value [...]
// with Redis's filters ID, TYPE, ADDR, LADDR, USER and SKIPME (yes by
// default). The old form answers OK or "No such client", the new one the
// number killed. Another connection is closed at once (resp.Conn.Kill),
// the caller's own after this reply.
func cmdClientKill(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	f := clientFilter{skip: c}
	old := len(args) == 3
	if old {
		f.addr, f.skip = string(args[2]), nil
	} else {
		for i := 2; i < len(args); i += 2 {
			if i+1 >= len(args) {
				s.writeError(c, conn, errSyntax)
				return
			}
			opt, val := bytes.ToLower(args[i]), args[i+1]
			switch string(opt) {
			case "id":
				id, ok := parseInt(val)
				if !ok || id <= 0 {
					s.writeError(c, conn, errClientKillID)
					return
				}
				f.ids = map[int64]bool{id: true}
			case "type":
				typ, ok := clientType(val)
				if !ok {
					s.writeError(c, conn, fmt.Sprintf(errClientType, cstr(val)))
					return
				}
				f.typ = typ
			case "addr":
				f.addr = string(val)
			case "laddr":
				f.laddr = string(val)
			case "user":
				if u := string(val); u != defaultUser && (u != adminUser || s.opts.AdminPassword == "") {
					s.writeError(c, conn, fmt.Sprintf(errNoSuchUser, cstr(val)))
					return
				}
				f.user = string(val)
			case "skipme":
				switch {
				case bytes.EqualFold(val, []byte("yes")):
					f.skip = c
				case bytes.EqualFold(val, []byte("no")):
					f.skip = nil
				default:
					s.writeError(c, conn, errSyntax)
					return
				}
			default:
				s.writeError(c, conn, errSyntax)
				return
			}
		}
	}
	killed, self := 0, false
	for _, o := range s.sortedClients() {
		if !f.match(o) {
			continue
		}
		killed++
		if o == c {
			self = true
			continue
		}
		o.conn.Kill()
		s.log.Debug("client killed", "id", o.id, "addr", o.addr, "by", c.id)
	}
	switch {
	case old && killed == 0:
		s.writeError(c, conn, errNoSuchClient)
		return
	case old:
		conn.WriteString("OK")
	default:
		conn.WriteInt(killed)
	}
	if self {
		conn.Quit() // after this reply, as Redis's CLIENT_CLOSE_AFTER_REPLY
	}
}

// cmdClientNoEvict: CLIENT NO-EVICT on|off. leaf never evicts a client
// (it has no maxmemory-clients), so this only sets the flag CLIENT LIST
// shows ("e"), as Redis does.
func cmdClientNoEvict(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	var on bool
	switch {
	case bytes.EqualFold(args[2], []byte("on")):
		on = true
	case bytes.EqualFold(args[2], []byte("off")):
	default:
		s.writeError(c, conn, errSyntax)
		return
	}
	c.meta.Lock()
	c.meta.noEvict = on
	c.meta.Unlock()
	conn.WriteString("OK")
}

// sortedClients are the open connections by id, as Redis lists them.
func (s *Server) sortedClients() []*client {
	cs := s.snapshotClients()
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].id < cs[j-1].id; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
	return cs
}

// appendInfo appends the connection's line of CLIENT LIST and CLIENT
// INFO: Redis 7.0's fields in its order wherever leaf has a true value,
// then 7.2's lib-name and lib-ver and 7.4's tot-net-in and tot-net-out.
// Left out: the buffer sizes (qbuf, qbuf-free, argv-mem, multi-mem,
// rbs, rbp, obl, oll, omem, tot-mem) and events, which belong to the
// connection's loop and are not read from another goroutine.
func (c *client) appendInfo(b []byte, now time.Time) []byte {
	c.meta.Lock()
	name, libName, libVer, proto, db := c.meta.name, c.meta.libName, c.meta.libVer, c.meta.resp, c.meta.db
	user := defaultUser
	if c.meta.admin {
		user = adminUser
	}
	flags := ""
	if c.meta.monitor {
		flags += "O"
	}
	if c.meta.noEvict {
		flags += "e"
	}
	if flags == "" {
		flags = "N"
	}
	c.meta.Unlock()
	age := int64(now.Sub(c.created) / time.Second)
	idle := age
	if at := c.stats.lastAt.Load(); at > 0 {
		idle = (c.s.clock() - at) / int64(time.Second)
	}
	cmd := "NULL"
	if last := c.stats.last.Load(); last != nil {
		cmd = last.name
	}
	b = append(b, "id="...)
	b = strconv.AppendInt(b, c.id, 10)
	b = append(b, " addr="...)
	b = append(b, c.addr...)
	b = append(b, " laddr="...)
	b = append(b, c.laddr...)
	b = append(b, " fd="...)
	b = strconv.AppendInt(b, int64(c.conn.FD()), 10)
	b = append(b, " name="...)
	b = append(b, name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, age, 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, idle, 10)
	b = append(b, " flags="...)
	b = append(b, flags...)
	b = append(b, " db="...)
	b = strconv.AppendInt(b, int64(db), 10)
	b = append(b, " sub=0 psub=0 ssub=0 multi=-1 cmd="...)
	b = append(b, cmd...)
	b = append(b, " user="...)
	b = append(b, user...)
	b = append(b, " redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(proto), 10)
	b = append(b, " lib-name="...)
	b = append(b, libName...)
	b = append(b, " lib-ver="...)
	b = append(b, libVer...)
	b = append(b, " tot-net-in="...)
	b = strconv.AppendInt(b, c.conn.NetIn(), 10)
	b = append(b, " tot-net-out="...)
	b = strconv.AppendInt(b, c.conn.NetOut(), 10)
	return append(b, '\n')
}
