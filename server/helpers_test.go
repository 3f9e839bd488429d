package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server/servertest"
)

// forEachProtocol runs f as a subtest per protocol go-redis speaks to leaf:
// its default handshake (HELLO 3) and Protocol 2 (HELLO 2).
func forEachProtocol(t *testing.T, f func(t *testing.T, proto int)) {
	t.Helper()
	for _, p := range []int{3, 2} {
		t.Run("resp"+strconv.Itoa(p), func(t *testing.T) { f(t, p) })
	}
}

// start starts a default server.
func start(t testing.TB) *servertest.Instance {
	t.Helper()
	return servertest.Start(t, servertest.Options{})
}

// newClient is a go-redis client with one connection, so every command of a
// test runs on the same connection, and no retries, so errors are seen as
// they come.
func newClient(t testing.TB, addr string, proto int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{
		Addr:       addr,
		Protocol:   proto,
		Password:   password,
		PoolSize:   1,
		MaxRetries: -1,
	}))
	t.Cleanup(func() { c.Close() })
	return c
}

// mustIncr runs INCR tag and fails the test on error.
func mustIncr(t *testing.T, c *redis.Client, tag string) int64 {
	t.Helper()
	id, err := c.Incr(context.Background(), tag).Result()
	if err != nil {
		t.Fatalf("INCR %s: %v", tag, err)
	}
	return id
}

// wantErr runs a command and checks its error reply exactly.
func wantErr(t *testing.T, c *redis.Client, want string, args ...any) {
	t.Helper()
	err := c.Do(context.Background(), args...).Err()
	if err == nil {
		t.Fatalf("%v: no error, want %q", args, want)
	}
	if err.Error() != want {
		t.Fatalf("%v:\n got %q\nwant %q", args, err.Error(), want)
	}
}

// rawConn is a plain socket to the server, for exact bytes.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	// A safety net against a hung test, not an assertion on timing.
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.nc, s); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// cmd encodes args as a RESP array.
func cmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// expect reads exactly len(want) bytes and compares them.
func (rc *rawConn) expect(want string) {
	rc.t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(rc.r, got); err != nil {
		rc.t.Fatalf("read (want %q): %v (got %q)", want, err, got)
	}
	if string(got) != want {
		rc.t.Fatalf("reply:\n got %q\nwant %q", got, want)
	}
}

// line reads one CRLF-terminated line.
func (rc *rawConn) line() string {
	rc.t.Helper()
	s, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read line: %v (got %q)", err, s)
	}
	return s
}

// expectEOF checks that the server closed the connection with nothing
// more to read.
func (rc *rawConn) expectEOF() {
	rc.t.Helper()
	b, err := rc.r.ReadByte()
	if err == nil {
		rest, _ := rc.r.Peek(rc.r.Buffered())
		rc.t.Fatalf("want EOF, got %q", append([]byte{b}, rest...))
	}
	if err != io.EOF {
		rc.t.Fatalf("want EOF, got %v", err)
	}
}

// bulk is the RESP2 bulk string of s.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// helloReply is the exact reply to HELLO on a connection with that id:
// a RESP3 map after HELLO 3, the flat array Redis sends in RESP2.
func helloReply(proto int, id int64) string {
	head := "*14\r\n"
	if proto == 3 {
		head = "%7\r\n"
	}
	return head + bulk("server") + bulk("redis") + bulk("version") + bulk("7.0.0") +
		bulk("proto") + fmt.Sprintf(":%d\r\n", proto) + bulk("id") + fmt.Sprintf(":%d\r\n", id) +
		bulk("mode") + bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n"
}
