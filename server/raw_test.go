package server_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// Raw-socket tests: the exact bytes Redis clients and redis-cli parse.

// clientID asks the connection's id with CLIENT ID.
func clientID(rc *rawresp.Conn) int64 {
	rc.T.Helper()
	rc.Send(rawresp.Cmd("CLIENT", "ID"))
	l := rc.Line()
	id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(l, ":"), "\r\n"), 10, 64)
	if err != nil {
		rc.T.Fatalf("CLIENT ID: %q", l)
	}
	return id
}

func TestRawHello(t *testing.T) {
	in := start(t)
	for _, tc := range []struct {
		name  string
		args  []string
		proto int
	}{
		{"no version", []string{"HELLO"}, 2},
		{"2", []string{"HELLO", "2"}, 2},
		{"3", []string{"HELLO", "3"}, 3},
		{"3 lowercase with setname", []string{"hello", "3", "setname", "x"}, 3},
		{"3 with auth", []string{"HELLO", "3", "AUTH", "default", "anything"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := rawresp.Dial(t, in.Addr)
			id := clientID(rc)
			rc.Send(rawresp.Cmd(tc.args...))
			rc.Expect(helloReply(tc.proto, id))
		})
	}
}

// TestRawResp3 checks the RESP3 shapes after HELLO 3, and their RESP2 forms
// on a connection that did not switch.
func TestRawResp3(t *testing.T) {
	in := start(t)
	for _, tc := range []struct {
		name       string
		args       []string
		resp2      string
		resp3      string
		prefixOnly bool
	}{
		{"null", []string{"CLIENT", "GETNAME"}, "$-1\r\n", "_\r\n", false},
		{"config map", []string{"CONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n", "%1\r\n$4\r\nsave\r\n$0\r\n\r\n", false},
		{"config name as asked", []string{"CONFIG", "GET", "APPENDONLY"}, "*2\r\n$10\r\nAPPENDONLY\r\n$2\r\nno\r\n", "%1\r\n$10\r\nAPPENDONLY\r\n$2\r\nno\r\n", false},
		// In the order asked (Redis's order is its dict's, unspecified).
		{"config two", []string{"CONFIG", "GET", "save", "appendonly"},
			"*4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
			"%2\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", false},
		{"config none", []string{"CONFIG", "GET", "nosuch"}, "*0\r\n", "%0\r\n", false},
		{"info verbatim", []string{"INFO", "replication"},
			"$48\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n",
			"=52\r\ntxt:# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n", false},
		{"info empty", []string{"INFO", "nosuch"}, "$0\r\n\r\n", "=4\r\ntxt:\r\n", false},
		{"command info unknown", []string{"COMMAND", "INFO", "nosuch"}, "*1\r\n$-1\r\n", "*1\r\n_\r\n", false},
		{"command docs unknown", []string{"COMMAND", "DOCS", "nosuch"}, "*0\r\n", "%0\r\n", false},
		{"leaf.info map", []string{"LEAF.INFO", "r"}, "*64\r\n$3\r\ntag\r\n$1\r\nr\r\n", "%32\r\n$3\r\ntag\r\n$1\r\nr\r\n", true},
		{"command info set", []string{"COMMAND", "INFO", "incr"},
			"*1\r\n*10\r\n$4\r\nincr\r\n:2\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n",
			"*1\r\n*10\r\n$4\r\nincr\r\n:2\r\n~3\r\n+write\r\n+denyoom\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@write\r\n", true},
		{"ping", []string{"PING"}, "+PONG\r\n", "+PONG\r\n", false},
		{"incr", []string{"INCR", "r"}, ":", ":", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, proto := range []int{2, 3} {
				rc := rawresp.Dial(t, in.Addr)
				want := tc.resp2
				if proto == 3 {
					id := clientID(rc)
					rc.Send(rawresp.Cmd("HELLO", "3"))
					rc.Expect(helloReply(3, id))
					want = tc.resp3
				}
				rc.Send(rawresp.Cmd("INCR", "r"))
				rc.Line()
				rc.Send(rawresp.Cmd(tc.args...))
				rc.Expect(want)
				if tc.prefixOnly {
					continue
				}
				rc.Send("PING\r\n")
				rc.Expect("+PONG\r\n") // nothing left unread before it
			}
		})
	}
}

// TestRawQuit: QUIT answers +OK, closes, and drops the rest of the
// pipeline: the INCR after it never runs.
func TestRawQuit(t *testing.T) {
	in := start(t)
	rc := rawresp.Dial(t, in.Addr)
	rc.Send(rawresp.Cmd("INCR", "q") + rawresp.Cmd("QUIT") + rawresp.Cmd("INCR", "q") + "PING\r\n")
	rc.Expect(":1\r\n+OK\r\n")
	rc.ExpectClosed()

	rc2 := rawresp.Dial(t, in.Addr)
	rc2.Send("quit extra args\r\n")
	rc2.Expect("+OK\r\n")
	rc2.ExpectClosed()

	rc3 := rawresp.Dial(t, in.Addr)
	rc3.Send(rawresp.Cmd("INCR", "q"))
	rc3.Expect(":2\r\n") // the INCR after QUIT did not run
}

func TestRawUnknownCommand(t *testing.T) {
	in := start(t)
	rc := rawresp.Dial(t, in.Addr)
	x100 := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, send, want string
	}{
		{"args", rawresp.Cmd("FOO", "a", "b"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"},
		{"no args", rawresp.Cmd("FOO"), "-ERR unknown command 'FOO', with args beginning with: \r\n"},
		{"client's case", rawresp.Cmd("fOo", "A"), "-ERR unknown command 'fOo', with args beginning with: 'A' \r\n"},
		{"inline", "FOO a\r\n", "-ERR unknown command 'FOO', with args beginning with: 'a' \r\n"},
		{"newlines become spaces", rawresp.Cmd("FOO", "a\r\nb"), "-ERR unknown command 'FOO', with args beginning with: 'a  b' \r\n"},
		{"newline in the name", rawresp.Cmd("F\nO"), "-ERR unknown command 'F O', with args beginning with: \r\n"},
		// Redis shows arguments until 128 bytes of them are listed (checked
		// against redis-server 7.0.15: the second is cut to 25 bytes).
		{"long args", rawresp.Cmd("FOO", x100, x100, "z"),
			"-ERR unknown command 'FOO', with args beginning with: '" + x100 + "' '" + strings.Repeat("x", 25) + "' \r\n"},
		{"long name", rawresp.Cmd(strings.Repeat("N", 200)),
			"-ERR unknown command '" + strings.Repeat("N", 128) + "', with args beginning with: \r\n"},
		{"NUL ends an argument", rawresp.Cmd("FOO", "a\x00b"), "-ERR unknown command 'FOO', with args beginning with: 'a' \r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.Send(tc.send)
			rc.Expect(tc.want)
			rc.Send(rawresp.Cmd("PING"))
			rc.Expect("+PONG\r\n")
		})
	}
}

// TestRawInline: inline commands, as redis-cli and telnet send them.
func TestRawInline(t *testing.T) {
	in := start(t)
	rc := rawresp.Dial(t, in.Addr)
	rc.Send("PING\r\n")
	rc.Expect("+PONG\r\n")
	rc.Send("ping hello\n") // a bare LF ends a line too
	rc.Expect("$5\r\nhello\r\n")
	rc.Send("INCR inline\r\nINCR inline\r\nincrby inline 10\r\n")
	rc.Expect(":1\r\n:2\r\n:12\r\n")
	rc.Send("INCRBY inline +1\r\n")
	rc.Expect("-ERR value is not an integer or out of range\r\n")
	rc.Send("ECHO \"a b\"\r\n")
	rc.Expect("$3\r\na b\r\n")
}

// TestRawPipelineMixed: errors inside a pipeline answer in place; the
// commands around them run.
func TestRawPipelineMixed(t *testing.T) {
	in := start(t)
	rc := rawresp.Dial(t, in.Addr)
	rc.Send(rawresp.Cmd("INCR", "m") + rawresp.Cmd("INCRBY", "m", "0") + rawresp.Cmd("NOPE") + rawresp.Cmd("INCR", "m") + rawresp.Cmd("SELECT", "16") + rawresp.Cmd("INCR", "m"))
	rc.Expect(":1\r\n" +
		"-ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)\r\n" +
		"-ERR unknown command 'NOPE', with args beginning with: \r\n" +
		":2\r\n" +
		"-ERR DB index is out of range\r\n" +
		":3\r\n")
}
