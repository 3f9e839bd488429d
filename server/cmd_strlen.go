package server

import (
	"strconv"

	"github.com/leaf-id/leaf/resp"
)

// STRLEN tag: the length of what GET tag answers (the last ID this server
// handed out for the tag, in decimal), 0 when GET answers nil, as Redis
// answers for a missing key. redis-cli --bigkeys and the exporter's
// --check-keys size a string key with it.

func registerStrlen(t table) {
	t.add(&command{
		name: "strlen", arity: 2, fn: cmdStrlen,
		flags: []string{"readonly", "fast"}, acl: []string{"read", "string", "fast"},
		firstKey: 1, keyFlags: []string{"RO"},
		summary: "Returns the length of GET's reply for a tag", since: "2.2.0", group: "string", complex: "O(1)",
		args: []argDoc{{name: "key", typ: "key"}},
	})
}

func cmdStrlen(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	last, ok := s.alloc.LastIssued(string(args[1]))
	if !ok {
		conn.WriteInt(0)
		return
	}
	var buf [20]byte
	conn.WriteInt(len(strconv.AppendInt(buf[:0], last, 10)))
}
