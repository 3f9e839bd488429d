package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// Helpers of the Redis Cluster and Sentinel face tests: whole raw replies
// read off a connection, so that leaf's bytes are compared with
// redis-server's once what must differ (ports, node ids, times) is
// replaced by placeholders.

// respConn is a raw connection on which whole replies are read.
type respConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

// dialRESP connects to addr, switching to RESP3 when proto is 3.
func dialRESP(t testing.TB, addr string, proto int) *respConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(time.Minute)) // a safety net, not an assertion on time
	c := &respConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	if proto == 3 {
		c.do("HELLO", "3")
	}
	return c
}

// do sends one command and returns its whole raw reply.
func (c *respConn) do(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return c.reply()
}

// send writes one command.
func (c *respConn) send(args ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, rawresp.Cmd(args...)); err != nil {
		c.t.Fatalf("write %v: %v", args, err)
	}
}

// reply reads one whole reply, as its raw bytes.
func (c *respConn) reply() string {
	c.t.Helper()
	var b strings.Builder
	if err := readReply(c.r, &b); err != nil {
		c.t.Fatalf("read reply: %v (so far %q)", err, b.String())
	}
	return b.String()
}

// readReply copies one RESP2 or RESP3 reply from r to b.
func readReply(r *bufio.Reader, b *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	b.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
	switch line[0] {
	case '$', '=', '!':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		b.Write(buf)
	case '*', '~', '>':
		for range n {
			if err := readReply(r, b); err != nil {
				return err
			}
		}
	case '%', '|':
		for range 2 * n {
			if err := readReply(r, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// hex40 is a Redis node or run id.
var hex40 = regexp.MustCompile(`[0-9a-f]{40}`)

// placeholders replaces the parts of a reply that differ between two
// servers of the same shape: each's port (as an integer reply, a bulk
// string or after a colon), node ids, and the length prefixes that
// change with them.
func placeholders(reply, port string) string {
	reply = hex40.ReplaceAllString(reply, "<id>")
	reply = strings.ReplaceAll(reply, ":"+port+"\r\n", ":<port>\r\n")
	reply = strings.ReplaceAll(reply, "\r\n"+port+"\r\n", "\r\n<port>\r\n")
	reply = strings.ReplaceAll(reply, ":"+port+"@", ":<port>@")
	return reply
}

// portOf is addr's port.
func portOf(t testing.TB, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// lengths blanks the lengths of bulk and verbatim strings, which change
// when a placeholder replaced a value of another length.
var lengths = regexp.MustCompile(`(?m)^([$=])\d+\r$`)

func noLengths(s string) string { return lengths.ReplaceAllString(s, "${1}n\r") }
