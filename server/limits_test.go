package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
)

// Tests of the limits (Options.MaxClients, MaxRequestBytes, IdleTimeout,
// MaxPipeline) and of what a hostile or broken client gets, in both
// transports.

// parsed is what a reader made of a stream: the commands, the size in
// bytes of each as sent, and the error that ended it (nil at a clean EOF).
type parsed struct {
	cmds  [][]string
	sizes []int
	err   error
	// maxBuf is the largest the read buffer grew to.
	maxBuf int
}

// readLimited parses data read chunk bytes at a time by a reader with the
// given limit (0: none) and Redis's caps before AUTH when unauth.
func readLimited(data string, chunk, limit int, unauth bool) parsed {
	r := reader{rd: &chunkReader{data: []byte(data), n: chunk}}
	r.setLimits(limit, unauth)
	var p parsed
	for {
		args, err := r.next()
		p.maxBuf = max(p.maxBuf, len(r.buf))
		if err != nil {
			p.err = err
			return p
		}
		if args == nil {
			if err := r.fill(); err != nil {
				p.maxBuf = max(p.maxBuf, len(r.buf))
				if err != io.EOF {
					p.err = err
				}
				return p
			}
			continue
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		p.cmds = append(p.cmds, cmd)
		p.sizes = append(p.sizes, r.start-r.prev)
	}
}

// padTo is a RESP ECHO whose whole request is exactly n bytes (n >= 24).
func padTo(n int) string {
	// The request is 19 bytes, the length's digits and the k bytes.
	for digits := 1; digits < 20; digits++ {
		if k := n - 19 - digits; k >= 0 && len(strconv.Itoa(k)) == digits {
			return resp("ECHO", strings.Repeat("x", k))
		}
	}
	panic("padTo: no size fits")
}

// TestReaderLimits: every way a request can be too big is refused with
// Redis's text as soon as it is known, whatever the read sizes; a request
// of exactly the limit passes; the buffer never grows beyond the limit.
func TestReaderLimits(t *testing.T) {
	const limit = 100
	exact, over := padTo(limit), padTo(limit+1)
	for _, tc := range []struct {
		name   string
		in     string
		unauth bool
		cmds   int
		err    string
	}{
		{"exactly the limit", exact + resp("PING"), false, 2, ""},
		{"one byte over", resp("PING") + over, false, 1, errProtoBulkLength},
		{"bulk length announcing 1 GB", "*2\r\n$4\r\nINCR\r\n$1073741824\r\n" + strings.Repeat("x", 500), false, 0, errProtoBulkLength},
		{"bulk length beyond int64", "*1\r\n$99999999999999999999\r\n", false, 0, errProtoBulkLength},
		{"later arguments cannot fit", "*14\r\n$70\r\n", false, 0, errProtoBulkLength},
		{"count line without end", "*" + strings.Repeat("1", limit), false, 0, errProtoTooBigMultiBulk},
		{"count line short of the limit waits", "*" + strings.Repeat("1", limit-2), false, 0, ""},
		{"count that cannot fit", "*16\r\n", false, 0, errProtoMultiBulkLength},
		{"count that fits waits", "*15\r\n", false, 0, ""},
		{"huge count", "*1000000000000\r\n", false, 0, errProtoMultiBulkLength},
		{"length line without end", "*1\r\n$" + strings.Repeat("1", limit), false, 0, errProtoTooBigBulkCount},
		{"inline without end", strings.Repeat("a", limit), false, 0, errProtoTooBigInline},
		{"inline line over the limit", "PING " + strings.Repeat("a", limit) + "\r\n", false, 0, errProtoTooBigInline},
		{"inline line of exactly the limit", "ECHO " + strings.Repeat("a", limit-7) + "\r\n", false, 1, ""},
		{"blank line over the limit", strings.Repeat(" ", limit) + "\n", false, 0, errProtoTooBigInline},
		{"unauthenticated: 10 arguments", resp("A", "1", "2", "3", "4", "5", "6", "7", "8", "9"), true, 1, ""},
		{"unauthenticated: 11 arguments", "*11\r\n", true, 0, errProtoUnauthMultiBulk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 1 << 20} {
				p := readLimited(tc.in, chunk, limit, tc.unauth)
				var got string
				if p.err != nil {
					got = p.err.Error()
				}
				if got != tc.err || len(p.cmds) != tc.cmds {
					t.Fatalf("chunk %d: %d commands, error %q; want %d, %q", chunk, len(p.cmds), got, tc.cmds, tc.err)
				}
				if p.maxBuf > max(limit, readBufMax) {
					t.Fatalf("chunk %d: buffer grew to %d bytes", chunk, p.maxBuf)
				}
			}
		})
	}
	// Redis's caps before AUTH, with leaf's default limit.
	for _, tc := range []struct {
		name string
		in   string
		err  string
	}{
		{"bulk of 16384", "*2\r\n$4\r\nAUTH\r\n$16384\r\n" + strings.Repeat("p", 16384) + "\r\n", ""},
		{"bulk of 16385", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", errProtoUnauthBulkLength},
	} {
		t.Run("unauthenticated: "+tc.name, func(t *testing.T) {
			p := readLimited(tc.in, 1<<20, DefaultMaxRequestBytes, true)
			if (p.err == nil && tc.err != "") || (p.err != nil && p.err.Error() != tc.err) {
				t.Fatalf("error %v, want %q", p.err, tc.err)
			}
		})
	}
	// A stream of commands far larger than the limit, each within it, and
	// a command larger than the buffer but within the limit.
	big := strings.Repeat(resp("INCR", "a"), 10_000)
	if p := readLimited(big, 1<<20, limit, false); p.err != nil || len(p.cmds) != 10_000 {
		t.Fatalf("pipeline: %d commands, %v", len(p.cmds), p.err)
	}
	large := padTo(3 * readBufMax)
	if p := readLimited(large, 1000, 4*readBufMax, false); p.err != nil || len(p.cmds) != 1 || p.maxBuf > 4*readBufMax {
		t.Fatalf("large command: %d commands, %v, buffer %d", len(p.cmds), p.err, p.maxBuf)
	}
}

// FuzzReaderLimits: with any limit, the reader returns a prefix of the
// commands it returns without one, each within the limit; it stops early
// only with an error; on a stream shorter than the limit it returns the
// same commands, and ends the same way or refuses a count or a length
// announcing more; its buffer never grows beyond the limit (or
// readBufMax).
func FuzzReaderLimits(f *testing.F) {
	for _, s := range []string{
		resp("INCR", "a") + resp("PING"), "*2\r\n$4\r\nINCR\r\n$1073741824\r\n", "*99999\r\n", "PING\r\n" + strings.Repeat("x", 300),
		"*1\r\n$" + strings.Repeat("9", 100), "ECHO \"a b\"\r\n", strings.Repeat(" ", 200) + "\n", padTo(64),
	} {
		f.Add([]byte(s), uint16(64), false)
	}
	f.Add([]byte("*11\r\n"), uint16(1000), true)
	f.Fuzz(func(t *testing.T, data []byte, lim uint16, unauth bool) {
		limit := int(lim%2048) + 1
		chunk := 1 + len(data)%13
		free := readLimited(string(data), chunk, 0, unauth)
		got := readLimited(string(data), chunk, limit, unauth)
		if len(got.cmds) > len(free.cmds) {
			t.Fatalf("%q limit %d: %d commands, %d without a limit", data, limit, len(got.cmds), len(free.cmds))
		}
		for i := range got.cmds {
			if strings.Join(got.cmds[i], "\x00|") != strings.Join(free.cmds[i], "\x00|") {
				t.Fatalf("%q limit %d: command %d = %q, without a limit %q", data, limit, i, got.cmds[i], free.cmds[i])
			}
			if got.sizes[i] > limit {
				t.Fatalf("%q limit %d: command %d of %d bytes accepted", data, limit, i, got.sizes[i])
			}
		}
		if len(got.cmds) < len(free.cmds) && got.err == nil {
			t.Fatalf("%q limit %d: stopped after %d of %d commands without an error", data, limit, len(got.cmds), len(free.cmds))
		}
		// On a stream shorter than the limit, every command fits: only a
		// count or a length announcing more may end it differently.
		if len(data) < limit {
			sizeErr := got.err == errInvalidBulkLength || got.err == errInvalidMultiBulkLength
			if len(got.cmds) != len(free.cmds) || (fmt.Sprint(got.err) != fmt.Sprint(free.err) && !sizeErr) {
				t.Fatalf("%q limit %d: %d commands, %v; without a limit %d, %v", data, limit, len(got.cmds), got.err, len(free.cmds), free.err)
			}
		}
		if got.maxBuf > max(limit, readBufMax) {
			t.Fatalf("%q limit %d: buffer grew to %d", data, limit, got.maxBuf)
		}
	})
}

func TestFitClients(t *testing.T) {
	const inf = ^uint64(0) // RLIM_INFINITY
	for _, tc := range []struct {
		name                string
		max, reserved       int
		cur, hard, wantSoft uint64
		wantClients         int
	}{
		{"room already", 10000, 48, 20000, 20000, 20000, 10000},
		{"raise the soft limit", 10000, 48, 1024, 1 << 20, 10048, 10000},
		{"raise to an infinite hard limit", 10000, 48, 1024, inf, 10048, 10000},
		{"hard limit too low", 10000, 48, 1024, 4096, 4096, 4048},
		{"soft and hard too low", 10000, 48, 1024, 1024, 1024, 976},
		{"not even the reserve", 10000, 48, 40, 40, 40, 1},
		{"never lowers the soft limit", 10, 48, 20000, 20000, 20000, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			soft, clients := fitClients(tc.max, tc.reserved, tc.cur, tc.hard)
			if soft != tc.wantSoft || clients != tc.wantClients {
				t.Fatalf("fitClients(%d, %d, %d, %d) = %d, %d; want %d, %d",
					tc.max, tc.reserved, tc.cur, tc.hard, soft, clients, tc.wantSoft, tc.wantClients)
			}
		})
	}
}

// bufConn is a connection whose client sent data once.
func bufConn(s *Server, data string) (*conn, *client) {
	cn := &conn{fd: -1, addr: "127.0.0.1:1"}
	cn.rd.rd = strings.NewReader(data)
	c := newClient(s, cn)
	cn.rd.setLimits(s.maxRequest, !c.authed)
	c.cn, cn.ctx = cn, c
	return cn, c
}

// TestRunCommandsBatches: a batch stops after max_pipeline commands, or
// once flushAt bytes of replies wait, and the next batch continues where
// it stopped: replies are bounded per turn whatever the client sends.
func TestRunCommandsBatches(t *testing.T) {
	a, _ := newAlloc(t, "", bigStepOptions(), nil)
	// A command whose reply is larger than itself, so that replies reach
	// flushAt before the read buffer runs out of commands.
	info := resp("COMMAND", "INFO", "incr", "incrby", "ping")
	cn, c := bufConn(New(a, Options{}), info)
	if err := cn.rd.fill(); err != nil {
		t.Fatal(err)
	}
	New(a, Options{}).runCommands(cn, c, false)
	infoReply := len(cn.out)
	for _, tc := range []struct {
		name     string
		pipeline int
		data     string
		total    int // commands
		perBatch int // commands per full batch
	}{
		{"max_pipeline", 7, strings.Repeat(resp("INCR", "b"), 50), 50, 7},
		{"flushAt", 1 << 20, strings.Repeat(info, 1000), 1000, (flushAt + infoReply - 1) / infoReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(a, Options{MaxPipeline: tc.pipeline})
			cn, c := bufConn(s, tc.data)
			if err := cn.rd.fill(); err != nil {
				t.Fatal(err)
			}
			// The reader holds at most its buffer: refill until it is all run.
			var batches []int
			for done := 0; done < tc.total; {
				before := c.commands.Load()
				more, stop, _ := s.runCommands(cn, c, false)
				n := int(c.commands.Load() - before)
				if stop {
					t.Fatal("stopped")
				}
				if n > tc.perBatch {
					t.Fatalf("batch of %d commands, want at most %d", n, tc.perBatch)
				}
				if len(cn.out) > flushAt+infoReply {
					t.Fatalf("%d bytes of replies waiting", len(cn.out))
				}
				batches = append(batches, n)
				done += n
				cn.out = cn.out[:0]
				if !more {
					if err := cn.rd.fill(); err != nil && done < tc.total {
						t.Fatalf("after %d commands: %v", done, err)
					}
				}
			}
			if !slices.Contains(batches, tc.perBatch) {
				t.Fatalf("batches %v: none full (%d)", batches, tc.perBatch)
			}
		})
	}
}

// TestTransportPipelinesSmallBatches runs TestTransportPipelines's mixed
// pipeline with max_pipeline 1 and 3: the event loop then queues the
// connection between batches and must keep replies whole and in order.
func TestTransportPipelinesSmallBatches(t *testing.T) {
	var pipeline, want strings.Builder
	for i := 1; i <= 300; i++ {
		pipeline.WriteString(resp("INCR", "p"))
		fmt.Fprintf(&want, ":%d\r\n", i)
		if i%50 == 0 {
			pipeline.WriteString(resp("LEAF.INFO", "nosuch") + "PING\r\n")
			want.WriteString("-ERR unknown tag 'nosuch'\r\n+PONG\r\n")
		}
	}
	for _, tr := range transports {
		for _, batch := range []int{1, 3} {
			t.Run(tr.name+"/max_pipeline="+strconv.Itoa(batch), func(t *testing.T) {
				a, _ := newAlloc(t, "", segment.DefaultOptions(), nil)
				s := New(a, Options{EventLoops: tr.loops, MaxPipeline: batch})
				nc := dialTest(t, serve(t, s))
				go io.WriteString(nc, pipeline.String())
				got := make([]byte, want.Len())
				if _, err := io.ReadFull(nc, got); err != nil {
					t.Fatalf("%v after %q", err, got)
				}
				if string(got) != want.String() {
					t.Fatalf("got  %q\nwant %q", got, want.String())
				}
			})
		}
	}
}

// startServer is a server with opts on a fresh allocator (default
// segments), serving on 127.0.0.1:0.
func startServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	a, _ := newAlloc(t, "", segment.DefaultOptions(), nil)
	s := New(a, opts)
	return s, serve(t, s)
}

// lineConn is a raw connection for exact replies.
type lineConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialLines(t *testing.T, addr string) *lineConn {
	t.Helper()
	nc := dialTest(t, addr)
	return &lineConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (lc *lineConn) send(s string) {
	lc.t.Helper()
	if _, err := io.WriteString(lc.nc, s); err != nil {
		lc.t.Fatalf("write: %v", err)
	}
}

// expect reads exactly len(want) bytes and compares them.
func (lc *lineConn) expect(want string) {
	lc.t.Helper()
	got := make([]byte, len(want))
	if n, err := io.ReadFull(lc.r, got); err != nil {
		lc.t.Fatalf("read (want %q): %v (got %q)", want, err, got[:n])
	}
	if string(got) != want {
		lc.t.Fatalf("reply:\n got %q\nwant %q", got, want)
	}
}

// expectClosed reads until the server closes the connection and checks
// nothing more came.
func (lc *lineConn) expectClosed() {
	lc.t.Helper()
	rest, err := io.ReadAll(lc.r)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		lc.t.Fatalf("want the connection closed, got %v", err)
	}
	if len(rest) > 0 {
		lc.t.Fatalf("want the connection closed, got %q", rest)
	}
}

// TestBadInputKeepsConnection: every malformed command answers its exact
// error and the connection goes on: the next INCR answers the next ID, in
// both transports and both request forms.
func TestBadInputKeepsConnection(t *testing.T) {
	long := strings.Repeat("t", segment.MaxTagLen+1)
	notPositive := "-ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)\r\n"
	notInteger := "-ERR value is not an integer or out of range\r\n"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"INCR without a tag", []string{"INCR"}, "-ERR wrong number of arguments for 'incr' command\r\n"},
		{"INCR with two tags", []string{"INCR", "a", "b"}, "-ERR wrong number of arguments for 'incr' command\r\n"},
		{"INCRBY without n", []string{"INCRBY", "a"}, "-ERR wrong number of arguments for 'incrby' command\r\n"},
		{"INCRBY with extra", []string{"incrby", "a", "1", "2"}, "-ERR wrong number of arguments for 'incrby' command\r\n"},
		{"n a word", []string{"INCRBY", "a", "ten"}, notInteger},
		{"n empty", []string{"INCRBY", "a", ""}, notInteger},
		{"n with plus", []string{"INCRBY", "a", "+5"}, notInteger},
		{"n with leading zero", []string{"INCRBY", "a", "05"}, notInteger},
		{"n minus zero", []string{"INCRBY", "a", "-0"}, notInteger},
		{"n with space", []string{"INCRBY", "a", "5 "}, notInteger},
		{"n exponent", []string{"INCRBY", "a", "1e3"}, notInteger},
		{"n hex", []string{"INCRBY", "a", "0x10"}, notInteger},
		{"n with NUL", []string{"INCRBY", "a", "5\x00"}, notInteger},
		{"n beyond int64", []string{"INCRBY", "a", "9223372036854775808"}, notInteger},
		{"n zero", []string{"INCRBY", "a", "0"}, notPositive},
		{"n negative", []string{"INCRBY", "a", "-3"}, notPositive},
		{"n min int64", []string{"INCRBY", "a", "-9223372036854775808"}, notPositive},
		{"n over max_batch", []string{"INCRBY", "a", "100001"}, "-ERR increment exceeds max_batch (100000)\r\n"},
		{"n max int64", []string{"INCRBY", "a", "9223372036854775807"}, "-ERR increment exceeds max_batch (100000)\r\n"},
		{"empty tag", []string{"INCR", ""}, "-ERR invalid tag name: empty\r\n"},
		{"empty tag INCRBY", []string{"INCRBY", "", "2"}, "-ERR invalid tag name: empty\r\n"},
		{"tag of 129 bytes", []string{"INCR", long}, "-ERR invalid tag name: 129 bytes, the limit is 128\r\n"},
		{"tag with NUL", []string{"INCR", "a\x00b"}, "-ERR invalid tag name: control character U+0000\r\n"},
		{"tag with CR", []string{"INCR", "a\rb"}, "-ERR invalid tag name: control character U+000D\r\n"},
		{"tag with LF", []string{"INCRBY", "a\nb", "2"}, "-ERR invalid tag name: control character U+000A\r\n"},
		{"tag with CRLF", []string{"INCR", "a\r\n"}, "-ERR invalid tag name: control character U+000D\r\n"},
		{"unknown command", []string{"GETSET", "a", "1"}, "-ERR unknown command 'GETSET', with args beginning with: 'a' '1' \r\n"},
		{"unknown command with CRLF", []string{"X\r\nY"}, "-ERR unknown command 'X  Y', with args beginning with: \r\n"},
		{"unknown CLIENT subcommand", []string{"CLIENT", "KILL", "x"}, "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n"},
		{"unknown COMMAND subcommand", []string{"COMMAND", "GETKEYS"}, "-ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP.\r\n"},
		{"unknown CONFIG subcommand", []string{"CONFIG", "RESETSTAT"}, "-ERR unknown subcommand 'RESETSTAT'. Try CONFIG HELP.\r\n"},
		{"CLIENT without subcommand", []string{"CLIENT"}, "-ERR wrong number of arguments for 'client' command\r\n"},
		{"SELECT 1", []string{"SELECT", "1"}, "-ERR DB index is out of range\r\n"},
		{"SELECT 16", []string{"SELECT", "16"}, "-ERR DB index is out of range\r\n"},
		{"SELECT -1", []string{"SELECT", "-1"}, "-ERR DB index is out of range\r\n"},
		{"SELECT a word", []string{"SELECT", "one"}, notInteger},
		{"SELECT without index", []string{"SELECT"}, "-ERR wrong number of arguments for 'select' command\r\n"},
		{"DEL", []string{"DEL", "a"}, "-ERR DEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1). " +
			"Leave the row (an unused tag costs one row); to skip IDs use LEAF.FLOOR tag n\r\n"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, addr := startServer(t, Options{EventLoops: tr.loops})
			lc := dialLines(t, addr)
			next := int64(1)
			incr := func(t *testing.T, inline bool) {
				t.Helper()
				if inline {
					lc.send("INCR alive\r\n")
				} else {
					lc.send(resp("INCR", "alive"))
				}
				lc.expect(":" + strconv.FormatInt(next, 10) + "\r\n")
				next++
			}
			incr(t, false)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					lc.t = t
					lc.send(resp(tc.args...))
					lc.expect(tc.want)
					incr(t, false)
					// The same command inline, when it can be written so.
					if line := strings.Join(tc.args, " "); len(tc.args) > 1 && !strings.ContainsAny(line, "\x00\r\n\"' ") &&
						!slices.Contains(tc.args, "") && strings.Count(line, " ") == len(tc.args)-1 {
						lc.send(line + "\r\n")
						lc.expect(tc.want)
						incr(t, true)
					}
				})
			}
		})
	}
}

// TestProtocolErrorClosesOnlyThatConnection: a malformed or oversized
// request answers Redis's protocol error, after the replies of the
// commands before it, and closes that connection only: another one, open
// since before, keeps its IDs, and a new one is served.
func TestProtocolErrorClosesOnlyThatConnection(t *testing.T) {
	pe := func(text string) string { return "-ERR " + text + "\r\n" }
	for _, tc := range []struct {
		name, send, want string
	}{
		{"unbalanced quotes", "ECHO \"a\r\n", pe(errProtoUnbalancedQuotes)},
		{"quote inside an argument", "ECHO a'b\r\n", pe(errProtoUnbalancedQuotes)},
		{"count not a number", "*x\r\n", pe(errProtoMultiBulkLength)},
		{"count zero", resp("INCR", "a") + "*0\r\n", ":1\r\n" + pe(errProtoMultiBulkLength)},
		{"count negative", "*-1\r\n", pe(errProtoMultiBulkLength)},
		{"count without CR", "*1\n$4\r\nPING\r\n", pe(errProtoMultiBulkLength)},
		{"count too big for the limit", "*1000000\r\n", pe(errProtoMultiBulkLength)},
		{"count line without end", "*" + strings.Repeat("1", DefaultMaxRequestBytes), pe(errProtoTooBigMultiBulk)},
		{"no dollar", "*1\r\n:4\r\n", pe("Protocol error: expected '$', got ':'")},
		{"nested array", "*1\r\n*1\r\n$4\r\nPING\r\n", pe("Protocol error: expected '$', got '*'")},
		{"RESP3 map from the client", "*1\r\n%1\r\n", pe("Protocol error: expected '$', got '%'")},
		{"length negative", "*1\r\n$-1\r\n", pe(errProtoBulkLength)},
		{"length not a number", "*1\r\n$four\r\n", pe(errProtoBulkLength)},
		{"bulk without CRLF", "*1\r\n$4\r\nPINGPONG\r\n", pe(errProtoBulkLength)},
		{"bulk of 1 GB announced", "*2\r\n$4\r\nINCR\r\n$1073741824\r\n", pe(errProtoBulkLength)},
		{"request over the limit", resp("ECHO", strings.Repeat("x", DefaultMaxRequestBytes)), pe(errProtoBulkLength)},
		{"length line without end", "*1\r\n$" + strings.Repeat("9", DefaultMaxRequestBytes), pe(errProtoTooBigBulkCount)},
		{"inline line without end", strings.Repeat("PING ", DefaultMaxRequestBytes/5+1), pe(errProtoTooBigInline)},
	} {
		for _, tr := range transports {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				_, addr := startServer(t, Options{EventLoops: tr.loops})
				other := dialLines(t, addr)
				other.send(resp("INCR", "o"))
				other.expect(":1\r\n")
				lc := dialLines(t, addr)
				go io.WriteString(lc.nc, tc.send) // the server may stop reading it
				lc.expect(tc.want)
				lc.expectClosed()
				other.send(resp("INCR", "o") + "PING\r\n")
				other.expect(":2\r\n+PONG\r\n")
				fresh := dialLines(t, addr)
				fresh.send(resp("PING"))
				fresh.expect("+PONG\r\n")
			})
		}
	}
}

// TestUnauthenticatedCaps: with a password, a client that has not
// authenticated may send at most 10 arguments of at most 16384 bytes, as
// Redis 7; once authenticated, the usual limit applies.
func TestUnauthenticatedCaps(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, addr := startServer(t, Options{EventLoops: tr.loops, Password: "pw"})
			args := make([]string, 11)
			for i := range args {
				args[i] = "x"
			}
			lc := dialLines(t, addr)
			lc.send(resp(args...))
			lc.expect("-ERR " + errProtoUnauthMultiBulk + "\r\n")
			lc.expectClosed()

			lc = dialLines(t, addr)
			lc.send(resp("AUTH", strings.Repeat("p", 16384)))
			lc.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
			go io.WriteString(lc.nc, resp("AUTH", strings.Repeat("p", 16385)))
			lc.expect("-ERR " + errProtoUnauthBulkLength + "\r\n")
			lc.expectClosed()

			lc = dialLines(t, addr)
			lc.send(resp("AUTH", "pw") + resp(append([]string{"PING"}, strings.Repeat("y", 20000))...))
			lc.expect("+OK\r\n$20000\r\n" + strings.Repeat("y", 20000) + "\r\n")
			lc.send(resp(append([]string{"CLIENT"}, args...)...))
			lc.expect("-ERR unknown subcommand 'x'. Try CLIENT HELP.\r\n")
		})
	}
}

// waitFor polls cond until it holds, failing after a generous safety
// net; it waits for an event, it asserts no timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMaxClients: beyond max_clients a new connection gets Redis's error
// and is closed, is counted in INFO, and hurts no open connection; once a
// client leaves, a new one is served.
func TestMaxClients(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, addr := startServer(t, Options{EventLoops: tr.loops, MaxClients: 3})
			var open []*lineConn
			for range 3 {
				lc := dialLines(t, addr)
				lc.send(resp("PING"))
				lc.expect("+PONG\r\n")
				open = append(open, lc)
			}
			for range 2 {
				lc := dialLines(t, addr)
				lc.expect("-ERR max number of clients reached\r\n")
				lc.expectClosed()
			}
			open[0].send(resp("INFO", "stats"))
			if info := readBulk(t, open[0]); !strings.Contains(info, "\r\nrejected_connections:2\r\n") {
				t.Errorf("INFO stats:\n%s", info)
			}
			open[1].send(resp("INCR", "m"))
			open[1].expect(":1\r\n")

			open[2].send(resp("QUIT"))
			open[2].expect("+OK\r\n")
			open[2].expectClosed()
			waitFor(t, "the client to be unregistered", func() bool { return s.connectedClients() == 2 })
			lc := dialLines(t, addr)
			lc.send(resp("INCR", "m"))
			lc.expect(":2\r\n")
		})
	}
}

// readBulk reads one bulk string reply.
func readBulk(t *testing.T, lc *lineConn) string {
	t.Helper()
	head, err := lc.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("bulk reply: %q, %v", head, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(lc.r, b); err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

// TestIdleTimeout: a connection that sends nothing for the idle timeout is
// closed, whether it sent a command first or not; one whose command waits
// on the database all that time is not, and gets its reply. (The timeout
// is long enough that the test's own steps never wait that long.)
func TestIdleTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			bs := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
			a, _ := newAlloc(t, "", segment.DefaultOptions(), func(s persist.Store) persist.Store {
				bs.Store = s
				return bs
			})
			var logs logbuf.Buffer
			s := New(a, Options{EventLoops: tr.loops, IdleTimeout: 300 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			addr := serve(t, s)

			for _, first := range []string{"PING\r\n", ""} {
				idle := dialLines(t, addr)
				idle.send(first)
				// However long it takes: no timing asserted.
				got, err := io.ReadAll(idle.r)
				if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || (string(got) != "" && string(got) != "+PONG\r\n") {
					t.Fatalf("sent %q, then idle: got %q, %v; want the connection closed", first, got, err)
				}
			}

			busy := dialLines(t, addr)
			busy.send(resp("INCR", "slow"))
			select {
			case <-bs.entered: // the INCR waits on the database
			case <-time.After(30 * time.Second): // a safety net
				t.Fatal("the INCR never reached the database")
			}
			// A connection opened after the INCR started: once it is closed
			// as idle, the busy one has been waiting longer.
			later := dialLines(t, addr)
			later.expectClosed()
			close(bs.release)
			busy.expect(":1\r\n")
			if !strings.Contains(logs.String(), "closing idle client") {
				t.Errorf("no log line for the idle clients:\n%s", logs.String())
			}
		})
	}
}

func TestSweepEvery(t *testing.T) {
	for _, tc := range []struct {
		d      time.Duration
		period time.Duration
		ticks  int64
	}{
		{100 * time.Millisecond, 25 * time.Millisecond, 5},
		{time.Second, 250 * time.Millisecond, 5},
		{time.Hour, time.Second, 3601},
		{time.Millisecond, time.Millisecond, 2},
		{1500 * time.Millisecond, 375 * time.Millisecond, 5},
	} {
		period, ticks := sweepEvery(tc.d)
		if period != tc.period || ticks != tc.ticks {
			t.Errorf("sweepEvery(%v) = %v, %d; want %v, %d", tc.d, period, ticks, tc.period, tc.ticks)
		}
		// A connection read just after a tick is closed after at least
		// (ticks-1) periods: never before the timeout.
		if time.Duration(ticks-1)*period < tc.d {
			t.Errorf("sweepEvery(%v): closes after %v", tc.d, time.Duration(ticks-1)*period)
		}
	}
}

func TestPadTo(t *testing.T) {
	for _, n := range []int{24, 100, 101, 1000, 3 * readBufMax} {
		if got := len(padTo(n)); got != n {
			t.Errorf("len(padTo(%d)) = %d", n, got)
		}
	}
}
