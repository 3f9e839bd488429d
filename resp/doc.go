// Package resp is leaf's Redis connection layer: it accepts connections,
// reads requests (RESP multibulk, or inline as telnet and redis-cli send
// them), writes replies (RESP2, or RESP3 once a command switches with
// SetProtocol), and runs every command through a small interface: a
// Handler opens a Session for each connection, and Session.Command runs
// one command. It knows no command itself; leaf's are in package server.
//
// # Connections
//
// A plain TCP connection on Linux is served by an event loop
// (loop_linux.go), as redis-server serves its clients: one goroutine waits
// in epoll for many connections and reads, runs and answers each ready
// one, so a request costs no goroutine wake-up. Any other connection (TLS,
// a wrapped listener, another system) has a goroutine of its own
// (conn.go). Either way every complete command read is parsed in place
// (reader.go: redcon's parser semantics, without its copies) and run, and
// the replies of a turn go out with one write, so a pipeline of n commands
// costs one read and one write; with a Session that allocates nothing, a
// command allocates nothing on the way (TestTurnZeroAlloc).
//
// There is one loop per core but one by default (DefaultEventLoops). The
// loops are leaf's own, on epoll: on gnet v2 the same connection code
// spent more CPU per request and answered fewer (docs/performance.md),
// and gnet reads every readable socket into a buffer without bound, where
// a loop here stops reading from a client that does not take its replies.
//
// # Commands that block
//
// A Session runs a command that might wait (on a database, say) only when
// it is called with mayBlock; otherwise it says so, and the connection
// first writes the replies of the commands before it, then runs it where
// waiting is fine: an event loop hands the connection to a goroutine for
// that one command and takes it back after. So replies go out as they are
// ready: a command that blocks never holds back the replies before it,
// and the rest follow in order.
//
// # Limits
//
// Options bound what one client can cost: MaxClients is checked at
// accept; MaxRequestBytes in the reader, which refuses a request as soon
// as a count or a length shows it cannot fit, before reading the rest, so
// a read buffer never outgrows it; MaxPipeline per turn, which also stops
// once flushAt bytes of replies wait, so the replies are written and, on
// a loop, the other connections served before the rest; IdleTimeout by
// read deadlines on a goroutine and by a coarse sweep on a loop. A
// connection whose replies wait for room in its socket reads nothing more
// until they are written, so a client that does not read its replies is
// held back by TCP rather than buffered without bound. TLS (Options.TLS)
// wraps the listener, and its connections take the goroutine path.
//
// # What monitoring asks of connections
//
// Each connection counts the bytes it reads and writes (Conn.NetIn,
// NetOut; Server.Stats sums them, closed connections included); a
// Session that is a TurnEnder is told when each turn ends, before its
// replies are written, so the server can time commands per turn instead
// of per command. Kill closes a connection from any goroutine (CLIENT
// KILL) and Push queues bytes for it to write outside any reply
// (MONITOR), up to a limit the caller gives: the connection's own
// goroutine or loop does the writing, so no lock is held across a write
// and a client that reads nothing holds back only itself.
//
// # Shutdown
//
// A connection runs its commands holding a mutex of its own, which nothing
// else takes but Shutdown (once per turn, not per command). Shutdown stops
// accepting, takes every connection's mutex in turn, waiting for the
// commands in flight, and marks it fenced, so once it returns no Command
// runs and none will. Every connection, on a loop or a goroutine, then
// has the same window to take the replies of the commands that ran
// (ShutdownFlush, or until Shutdown's context ends) before it is closed.
package resp
