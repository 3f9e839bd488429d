// Package server is leaf's front end: it speaks the Redis protocol (RESP2
// and RESP3) so that any Redis client gets IDs with INCR tag, as from a
// Redis counter, from the allocator in package segment.
//
// Commands live one family per file (cmd_incr.go, cmd_leaf.go, cmd_conn.go,
// cmd_server.go), each with its own register function; handlers are thin:
// arity is checked by dispatch, then they parse, call the allocator and
// write the reply. Every error text is in errors.go; where a situation is
// the same as in Redis the text is Redis's own, byte for byte.
//
// # Connections
//
// A plain TCP connection on Linux is served by an event loop
// (loop_linux.go), as redis-server serves its clients: one goroutine waits
// in epoll for all of them and reads, runs and answers each ready one, so a
// request costs no goroutine wake-up. A command that might block (the
// database, a segment load: inline.go lists the ones that cannot) goes with
// its connection to a goroutine, and the connection comes back after. Any
// other connection (TLS, a wrapped listener, another system) has a
// goroutine of its own (conn.go). Either way every complete command read is
// parsed in place (reader.go: redcon's parser semantics, without its
// copies) and run, and all their replies go out with one write, so a
// pipeline of n commands costs one read and one write. Handlers write
// replies through the redcon.Conn interface, which conn implements by
// appending to the connection's reply buffer; redcon's own server loop is
// not used (README.md, Performance, says why).
//
// # Limits
//
// Options bound what one client can cost (README.md, Security and
// limits): MaxClients is checked at accept; MaxRequestBytes in the reader,
// which refuses a request as soon as a count or a length shows it cannot
// fit, before reading the rest, so a read buffer never outgrows it;
// MaxPipeline in runCommands, which stops a batch there (or at 64 KiB of
// replies) so the replies are written and, on a loop, the other
// connections served before the rest; IdleTimeout by read deadlines on a
// goroutine and by a coarse sweep on a loop. Limits are never a wrapper
// around net.Conn: a wrapped connection could not join an event loop. TLS
// (Options.TLS) wraps the listener, and its connections take the
// goroutine path.
//
// # Hot path
//
// INCR on a known tag allocates nothing on the server side: the request is
// parsed in place, the command name is lowercased into a per-connection
// buffer and compared with the connection's last command (else looked up
// with m[string(buf)]), the connection remembers the last tag's bytes and
// its *segment.Tag, handlers are plain functions, and the reply is an
// integer appended to the connection's buffer.
//
// # Shutdown
//
// A connection runs its commands holding its own mutex, which nothing else
// takes but Shutdown (once per batch read, not per command). Shutdown stops
// accepting, takes every connection's mutex in turn (waiting for the
// commands in flight) and marks it closed, so once it returns no handler
// runs and none will: the caller can then close the allocator, which gives
// unused IDs back, without a late INCR handing out one of them again. The
// mutex is uncontended on the hot path, and never held while writing to
// the network.
package server
