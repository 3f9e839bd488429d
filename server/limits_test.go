package server

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// Tests of the limits as the server applies them (Options.Conn.MaxClients,
// Redis's caps before AUTH, IdleTimeout) and of what a client sending bad
// commands gets, in both transports. The connection layer's own limits
// are tested in package resp.

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

// startServer is a server with opts on a fresh allocator (default
// segments), serving on 127.0.0.1:0.
func startServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	a, _ := newAlloc(t, "", segment.DefaultOptions(), nil)
	s := New(a, opts)
	return s, serve(t, s)
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
		{"unknown command", []string{"LPUSH", "a", "1"}, "-ERR unknown command 'LPUSH', with args beginning with: 'a' '1' \r\n"},
		{"unknown command with CRLF", []string{"X\r\nY"}, "-ERR unknown command 'X  Y', with args beginning with: \r\n"},
		{"unknown CLIENT subcommand", []string{"CLIENT", "PAUSE", "x"}, "-ERR unknown subcommand 'PAUSE'. Try CLIENT HELP.\r\n"},
		{"unknown COMMAND subcommand", []string{"COMMAND", "GETKEYS"}, "-ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP.\r\n"},
		{"unknown CONFIG subcommand", []string{"CONFIG", "RESETSTAT"}, "-ERR unknown subcommand 'RESETSTAT'. Try CONFIG HELP.\r\n"},
		{"CLIENT without subcommand", []string{"CLIENT"}, "-ERR wrong number of arguments for 'client' command\r\n"},
		{"SELECT 16", []string{"SELECT", "16"}, "-ERR DB index is out of range\r\n"},
		{"SELECT -1", []string{"SELECT", "-1"}, "-ERR DB index is out of range\r\n"},
		{"SELECT a word", []string{"SELECT", "one"}, notInteger},
		{"SELECT without index", []string{"SELECT"}, "-ERR wrong number of arguments for 'select' command\r\n"},
		{"DEL", []string{"DEL", "a"}, "-ERR DEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1). " +
			"Leave the row (an unused tag costs one row); to skip IDs use LEAF.FLOOR tag n\r\n"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, addr := startServer(t, Options{Conn: resp.Options{EventLoops: tr.loops}})
			lc := rawresp.Dial(t, addr)
			next := int64(1)
			incr := func(t *testing.T, inline bool) {
				t.Helper()
				if inline {
					lc.Send("INCR alive\r\n")
				} else {
					lc.Send(rawresp.Cmd("INCR", "alive"))
				}
				lc.Expect(":" + strconv.FormatInt(next, 10) + "\r\n")
				next++
			}
			incr(t, false)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					lc.T = t
					lc.Send(rawresp.Cmd(tc.args...))
					lc.Expect(tc.want)
					incr(t, false)
					// The same command inline, when it can be written so.
					if line := strings.Join(tc.args, " "); len(tc.args) > 1 && !strings.ContainsAny(line, "\x00\r\n\"' ") &&
						!slices.Contains(tc.args, "") && strings.Count(line, " ") == len(tc.args)-1 {
						lc.Send(line + "\r\n")
						lc.Expect(tc.want)
						incr(t, true)
					}
				})
			}
		})
	}
}

// TestUnauthenticatedCaps: with a password, a client that has not
// authenticated may send at most 10 arguments of at most 16384 bytes, as
// Redis 7; once authenticated, the usual limit applies.
func TestUnauthenticatedCaps(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, addr := startServer(t, Options{Password: "pw", Conn: resp.Options{EventLoops: tr.loops}})
			args := make([]string, 11)
			for i := range args {
				args[i] = "x"
			}
			lc := rawresp.Dial(t, addr)
			lc.Send(rawresp.Cmd(args...))
			lc.Expect("-ERR Protocol error: unauthenticated multibulk length\r\n")
			lc.ExpectClosed()

			lc = rawresp.Dial(t, addr)
			lc.Send(rawresp.Cmd("AUTH", strings.Repeat("p", 16384)))
			lc.Expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
			go io.WriteString(lc.NC, rawresp.Cmd("AUTH", strings.Repeat("p", 16385)))
			lc.Expect("-ERR Protocol error: unauthenticated bulk length\r\n")
			lc.ExpectClosed()

			lc = rawresp.Dial(t, addr)
			lc.Send(rawresp.Cmd("AUTH", "pw") + rawresp.Cmd(append([]string{"PING"}, strings.Repeat("y", 20000))...))
			lc.Expect("+OK\r\n$20000\r\n" + strings.Repeat("y", 20000) + "\r\n")
			lc.Send(rawresp.Cmd(append([]string{"CLIENT"}, args...)...))
			lc.Expect("-ERR unknown subcommand 'x'. Try CLIENT HELP.\r\n")
		})
	}
}

// TestMaxClients: beyond max_clients a new connection gets Redis's error
// and is closed, is counted in INFO, and hurts no open connection; once a
// client leaves, a new one is served.
func TestMaxClients(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, addr := startServer(t, Options{Conn: resp.Options{EventLoops: tr.loops, MaxClients: 3}})
			var open []*rawresp.Conn
			for range 3 {
				lc := rawresp.Dial(t, addr)
				lc.Send(rawresp.Cmd("PING"))
				lc.Expect("+PONG\r\n")
				open = append(open, lc)
			}
			for range 2 {
				lc := rawresp.Dial(t, addr)
				lc.Expect("-ERR max number of clients reached\r\n")
				lc.ExpectClosed()
			}
			open[0].Send(rawresp.Cmd("INFO", "stats"))
			if info := readBulk(t, open[0]); !strings.Contains(info, "\r\nrejected_connections:2\r\n") {
				t.Errorf("INFO stats:\n%s", info)
			}
			open[1].Send(rawresp.Cmd("INCR", "m"))
			open[1].Expect(":1\r\n")

			open[2].Send(rawresp.Cmd("QUIT"))
			open[2].Expect("+OK\r\n")
			open[2].ExpectClosed()
			redistest.WaitFor(t, "the client to be unregistered", func() bool { return s.connectedClients() == 2 })
			lc := rawresp.Dial(t, addr)
			lc.Send(rawresp.Cmd("INCR", "m"))
			lc.Expect(":2\r\n")
		})
	}
}

// readBulk reads one bulk string reply.
func readBulk(t *testing.T, lc *rawresp.Conn) string {
	t.Helper()
	head, err := lc.R.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("bulk reply: %q, %v", head, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(lc.R, b); err != nil {
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
			hold := faultstore.NewHold()
			a, _ := newAlloc(t, "", segment.DefaultOptions(), holdTakes(hold, ""))
			var logs logbuf.Buffer
			s := New(a, Options{Conn: resp.Options{EventLoops: tr.loops, IdleTimeout: 300 * time.Millisecond},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			addr := serve(t, s)

			for _, first := range []string{"PING\r\n", ""} {
				idle := rawresp.Dial(t, addr)
				idle.Send(first)
				// However long it takes: no timing asserted.
				got, err := io.ReadAll(idle.R)
				if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || (string(got) != "" && string(got) != "+PONG\r\n") {
					t.Fatalf("sent %q, then idle: got %q, %v; want the connection closed", first, got, err)
				}
			}

			busy := rawresp.Dial(t, addr)
			busy.Send(rawresp.Cmd("INCR", "slow"))
			select {
			case <-hold.Entered(): // the INCR waits on the database
			case <-time.After(30 * time.Second): // a safety net
				t.Fatal("the INCR never reached the database")
			}
			// A connection opened after the INCR started: once it is closed
			// as idle, the busy one has been waiting longer.
			later := rawresp.Dial(t, addr)
			later.ExpectClosed()
			hold.Release()
			busy.Expect(":1\r\n")
			if !strings.Contains(logs.String(), "closing idle client") {
				t.Errorf("no log line for the idle clients:\n%s", logs.String())
			}
		})
	}
}
