// Package rawresp speaks raw RESP to a server for tests: the exact bytes a
// test writes go out, and the exact replies it expects are checked.
package rawresp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cmd encodes args as a RESP multibulk request.
func Cmd(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// Conn is a test's connection to a server. T is the test its failures go
// to (a subtest may set its own).
type Conn struct {
	T  testing.TB
	NC net.Conn
	R  *bufio.Reader
}

// Dial connects to addr, closed at the test's cleanup, with a deadline of
// a minute as a safety net against a hung test (not an assertion on
// time).
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(time.Minute))
	return &Conn{T: t, NC: nc, R: bufio.NewReader(nc)}
}

// Send writes s.
func (c *Conn) Send(s string) {
	c.T.Helper()
	if _, err := io.WriteString(c.NC, s); err != nil {
		c.T.Fatalf("write: %v", err)
	}
}

// Expect reads exactly len(want) bytes and compares them with want.
func (c *Conn) Expect(want string) {
	c.T.Helper()
	got := make([]byte, len(want))
	if n, err := io.ReadFull(c.R, got); err != nil {
		c.T.Fatalf("read (want %q): %v (got %q)", want, err, got[:n])
	}
	if string(got) != want {
		c.T.Fatalf("reply:\n got %q\nwant %q", got, want)
	}
}

// Line reads one line, its CRLF included.
func (c *Conn) Line() string {
	c.T.Helper()
	s, err := c.R.ReadString('\n')
	if err != nil {
		c.T.Fatalf("read line: %v (got %q)", err, s)
	}
	return s
}

// ExpectClosed reads until the server closes the connection and checks
// that nothing more came.
func (c *Conn) ExpectClosed() {
	c.T.Helper()
	rest, err := io.ReadAll(c.R)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.T.Fatalf("want the connection closed, got %v", err)
	}
	if len(rest) > 0 {
		c.T.Fatalf("want the connection closed, got %q", rest)
	}
}
