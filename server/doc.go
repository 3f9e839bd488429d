// Package server is leaf's front end: it speaks the Redis protocol (RESP2
// and RESP3, on github.com/tidwall/redcon) so that any Redis client gets IDs
// with INCR tag, as from a Redis counter, from the allocator in package
// segment.
//
// Commands live one family per file (cmd_incr.go, cmd_leaf.go, cmd_conn.go,
// cmd_server.go), each with its own register function; handlers are thin:
// arity is checked by dispatch, then they parse, call the allocator and
// write the reply. Every error text is in errors.go; where a situation is
// the same as in Redis the text is Redis's own, byte for byte.
//
// # Hot path
//
// INCR on a known tag allocates nothing on the server side: the command name
// is lowercased into a per-connection buffer and looked up with
// m[string(buf)], the connection remembers the last tag's bytes and its
// *segment.Tag, handlers are plain functions, and the reply is an integer
// appended to redcon's buffer.
//
// # Shutdown
//
// Each command runs holding its connection's own mutex, which nothing else
// takes but Shutdown. Shutdown stops accepting, takes every connection's
// mutex in turn (waiting for the command in flight) and marks it closed, so
// once it returns no handler runs and none will: the caller can then close
// the allocator, which gives unused IDs back, without a late INCR handing
// out one of them again. The mutex is uncontended on the hot path.
package server
