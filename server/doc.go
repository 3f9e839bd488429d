// Package server is leaf's Redis commands: any Redis client gets IDs with
// INCR tag, as from a Redis counter, from the allocator in package
// segment. The connections (reading requests, writing RESP2 and RESP3
// replies, event loops, limits, TLS) are package resp's: Server is its
// resp.Handler, and each connection's state (client) its resp.Session.
//
// Commands live one family per file (cmd_incr.go, cmd_leaf.go, cmd_conn.go,
// cmd_server.go, cmd_admin.go, cmd_tags.go, cmd_cluster.go, cmd_tx.go for
// transactions, cmd_keys.go for the key and listing commands, cmd_script.go
// for Lua, and for monitoring cmd_client.go, cmd_slowlog.go,
// cmd_latency.go, cmd_monitor.go), each with its own register function;
// handlers are thin: arity is checked by dispatch, then they parse, call
// the allocator and write the reply. Every error text is in errors.go;
// where a situation is the same as in Redis the text is Redis's own, byte
// for byte.
//
// # Monitoring
//
// INFO (info.go) writes Redis 7.0's sections and fields wherever leaf has
// a true value. Commands are counted and timed by runs (stats.go): a
// connection counts in its own fields while a turn runs and, when the
// turn ends (resp.TurnEnder), adds each run's counts, time and histogram
// bucket (histogram.go) to its event loop's records, which INFO, SLOWLOG,
// LATENCY and the metrics read.
//
// # Commands that must not block
//
// resp first offers a command where it must not block (an event loop
// serves many connections on one goroutine). nonblocking.go says which
// commands run then: those that never block, and INCR and INCRBY when the
// allocator can answer from memory (segment.Allocator.Known,
// segment.Tag.TryNextN), the steady state. Any other command is run again
// where it may block, after the replies before it are written.
//
// # Hot path
//
// INCR on a known tag allocates nothing on the server side: the command
// name is lowercased into a per-connection buffer and compared with the
// connection's last command (else looked up with m[string(buf)]), the
// connection remembers the last tag's bytes and its *segment.Tag,
// handlers are plain functions, and the reply is an integer appended to
// the connection's buffer.
//
// # Transactions, scripts and databases
//
// After MULTI, dispatch queues commands (cmd_tx.go) instead of running
// them; a connection that never sends MULTI or WATCH pays one nil check.
// EXEC runs the queue, reserving the IDs of a run of INCRs of one tag at
// once so that they are consecutive. EVAL runs a script in a fresh
// gopher-lua interpreter whose redis.call runs the same handlers, their
// replies written to a scratch connection and read back as Lua values.
// SELECT n makes the connection's tags those of database n: handlers name
// a tag by client.key, its stored name (segment.AppendDBName).
//
// # Shutdown
//
// Shutdown is resp.Server.Shutdown's: once it returns no handler runs and
// none will, so the caller can then close the allocator, which gives
// unused IDs back, without a late INCR handing out one of them again. A
// command waiting on the database when Shutdown's context ends is
// cancelled (it answers TRYAGAIN).
package server
