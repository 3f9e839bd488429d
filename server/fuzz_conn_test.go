package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// FuzzConnection sends arbitrary bytes to live servers, one per transport,
// as one client, then closes its side. Whatever it sent, the server
// answers with well-formed RESP values (a protocol error being the last
// of them) and closes the connection, never hangs or crashes, and still
// answers PING on a fresh connection. The servers have a small request
// limit and pipeline batch, so the limits' paths are fuzzed too. Seeds:
// testdata/fuzz/FuzzConnection (protocol edge cases) and those below.
func FuzzConnection(f *testing.F) {
	for _, s := range []string{
		rawresp.Cmd("INCR", "a") + rawresp.Cmd("INCRBY", "a", "5") + rawresp.Cmd("PING"),
		"PING\r\nINCR a\r\nECHO \"x y\"\r\n",
		"*1\r\n$4\r\nPING", // incomplete at EOF
	} {
		f.Add([]byte(s))
	}
	var addrs []string
	for _, tr := range transports {
		a, _ := newAlloc(f, "", segment.DefaultOptions(), nil)
		s := New(a, Options{Conn: resp.Options{EventLoops: tr.loops, MaxRequestBytes: 1024, MaxPipeline: 4}})
		addrs = append(addrs, serve(f, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, addr := range addrs {
			got, reset := exchange(t, addr, data)
			if err := checkReplies(got, reset); err != nil {
				t.Fatalf("%s: sent %q, got %q: %v", addr, data, got, err)
			}
			if got, _ := exchange(t, addr, []byte("PING\r\nQUIT\r\n")); string(got) != "+PONG\r\n+OK\r\n" {
				t.Fatalf("%s: after %q, a fresh connection got %q", addr, data, got)
			}
		}
	})
}

// exchange sends data on a new connection, closes the sending side, and
// reads until the server closes; reset reports a connection reset (the
// server closed with bytes of the client unread, so the last replies may
// be lost).
func exchange(t *testing.T, addr string, data []byte) (got []byte, reset bool) {
	t.Helper()
	nc, err := dialSpread(addr)
	if err != nil {
		t.Fatal(err)
	}
	// Once the server has closed first (QUIT, a protocol error), a reset
	// rather than a FIN spares its side TIME_WAIT too.
	nc.SetLinger(0)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net, not an assertion on time
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := nc.Write(data); err == nil {
			nc.CloseWrite()
		}
	}()
	got, err = io.ReadAll(nc)
	<-wrote
	var ne net.Error
	switch {
	case err == nil:
		return got, false
	case errors.Is(err, syscall.ECONNRESET):
		return got, true
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("sent %q: the server neither answered nor closed: got %q", data, got)
	}
	t.Fatalf("sent %q: %v after %q", data, err, got)
	return nil, false
}

// dialSpread connects to addr (on 127.0.0.1) from a random loopback
// address. The client closes its sending side first, so each connection
// leaves a socket in TIME_WAIT for a minute; from one source address, a
// fuzz run of ten seconds would take most of the ephemeral ports to the
// server's. 127.0.0.0/8 is all loopback on Linux; elsewhere, or if that
// fails, it dials from the default address.
func dialSpread(addr string) (*net.TCPConn, error) {
	if runtime.GOOS == "linux" {
		src := &net.TCPAddr{IP: net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))}
		if nc, err := (&net.Dialer{LocalAddr: src}).Dial("tcp", addr); err == nil {
			return nc.(*net.TCPConn), nil
		}
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return nc.(*net.TCPConn), nil
}

// errIncomplete is a reply cut short.
var errIncomplete = errors.New("incomplete reply")

// checkReplies checks that b is a sequence of well-formed RESP2/RESP3
// values, with a protocol error only as the last one. When the connection
// was reset, the last value may be cut short.
func checkReplies(b []byte, reset bool) error {
	for i := 0; i < len(b); {
		next, err := respValue(b, i, 0)
		if errors.Is(err, errIncomplete) && reset {
			return nil
		}
		if err != nil {
			return fmt.Errorf("at byte %d: %w", i, err)
		}
		if bytes.HasPrefix(b[i:], []byte("-ERR Protocol error:")) && next != len(b) {
			return fmt.Errorf("replies after a protocol error: %q", b[next:])
		}
		i = next
	}
	return nil
}

// respLine returns the line at b[i:] without its CRLF and the index after
// it. A line has no CR or LF inside.
func respLine(b []byte, i int) ([]byte, int, error) {
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '\r':
			if j+1 >= len(b) {
				return nil, 0, errIncomplete
			}
			if b[j+1] != '\n' {
				return nil, 0, fmt.Errorf("CR without LF in %q", b[i:j+2])
			}
			return b[i:j], j + 2, nil
		case '\n':
			return nil, 0, fmt.Errorf("LF without CR in %q", b[i:j+1])
		}
	}
	return nil, 0, errIncomplete
}

// respValue checks the value at b[i:] and returns the index after it.
func respValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errIncomplete
	}
	if depth > 16 {
		return 0, errors.New("nested too deep")
	}
	kind := b[i]
	line, next, err := respLine(b, i+1)
	if err != nil {
		return 0, err
	}
	number := func() (int64, error) {
		n, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%c with %q: %w", kind, line, err)
		}
		return n, nil
	}
	switch kind {
	case '+', '-':
		return next, nil
	case ':', '(':
		_, err := number()
		return next, err
	case ',':
		if _, err := strconv.ParseFloat(string(line), 64); err != nil {
			return 0, fmt.Errorf("double %q", line)
		}
		return next, nil
	case '#':
		if string(line) != "t" && string(line) != "f" {
			return 0, fmt.Errorf("boolean %q", line)
		}
		return next, nil
	case '_':
		if len(line) != 0 {
			return 0, fmt.Errorf("null %q", line)
		}
		return next, nil
	case '$', '=', '!':
		n, err := number()
		if err != nil {
			return 0, err
		}
		if n == -1 && kind == '$' {
			return next, nil
		}
		if n < 0 {
			return 0, fmt.Errorf("%c length %d", kind, n)
		}
		end := int64(next) + n
		if end+2 > int64(len(b)) {
			return 0, errIncomplete
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			return 0, fmt.Errorf("%c%d not followed by CRLF", kind, n)
		}
		return int(end) + 2, nil
	case '*', '~', '>', '%', '|':
		n, err := number()
		if err != nil {
			return 0, err
		}
		if n == -1 && kind == '*' {
			return next, nil
		}
		if n < 0 {
			return 0, fmt.Errorf("%c count %d", kind, n)
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		for range n {
			if next, err = respValue(b, next, depth+1); err != nil {
				return 0, err
			}
		}
		if kind == '|' { // an attribute precedes the value it describes
			return respValue(b, next, depth+1)
		}
		return next, nil
	}
	return 0, fmt.Errorf("unknown type %q", kind)
}

func TestCheckReplies(t *testing.T) {
	for _, tc := range []struct {
		in    string
		reset bool
		ok    bool
	}{
		{"", false, true},
		{"+OK\r\n:1\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n*2\r\n:1\r\n$0\r\n\r\n", false, true},
		{"%1\r\n+a\r\n~1\r\n_\r\n,1.5\r\n#t\r\n=7\r\ntxt:abc\r\n(12\r\n", false, true},
		{"-ERR x\r\n-ERR Protocol error: invalid bulk length\r\n", false, true},
		{"-ERR Protocol error: x\r\n+OK\r\n", false, false},
		{"$3\r\nab\r\n", false, false},
		{"+OK\r\n:1", false, false},
		{"+OK\r\n:1", true, true},
		{"+O\nK\r\n", false, false},
		{":x\r\n", false, false},
		{"*2\r\n:1\r\n", false, false},
		{"?\r\n", false, false},
	} {
		err := checkReplies([]byte(tc.in), tc.reset)
		if (err == nil) != tc.ok {
			t.Errorf("checkReplies(%q, %v) = %v, want ok=%v", tc.in, tc.reset, err, tc.ok)
		}
	}
}
