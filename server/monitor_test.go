package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// bothTransports are the two ways a connection is served: an event loop
// and a goroutine of its own (EventLoops -1).
var bothTransports = []struct {
	name  string
	loops int
}{{"event loop", 0}, {"goroutine", -1}}

// monitorLineRe is a MONITOR line: the time, the database and the
// client's address, then the arguments.
var monitorLineRe = regexp.MustCompile(`^\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] (.*)\r\n$`)

// TestMonitorLikeRedis: a MONITOR connection on leaf and on redis-server
// see the same lines for the same commands from another connection:
// Redis's format and quoting, passwords redacted, administrative and
// refused commands left out; on both transports.
func TestMonitorLikeRedis(t *testing.T) {
	raddr := redistest.Start(t)
	traffic := [][]string{
		{"INCR", "a"},
		{"PING", "a b\"c\\d"},
		{"ECHO", "\x01\x7f\n\t\xff"},
		{"AUTH", "secret"},               // an error here, shown redacted
		{"CONFIG", "GET", "maxmemory"},   // administrative: not shown
		{"SLOWLOG", "LEN"},               // administrative: not shown
		{"INCR"},                         // refused: not shown
		{"NOSUCH"},                       // unknown: not shown
		{"CLIENT", "SETNAME", "watched"}, // shown
		{"INCRBY", "a", "x"},             // ran and failed: shown
		{"ECHO", "done"},
	}
	watch := func(t *testing.T, addr string) []string {
		t.Helper()
		mon := rawresp.Dial(t, addr)
		mon.Send(rawresp.Cmd("MONITOR"))
		mon.Expect("+OK\r\n")
		c := rawresp.Dial(t, addr)
		for _, args := range traffic {
			c.Send(rawresp.Cmd(args...))
			c.Line() // every reply here is one line
		}
		var got []string
		for {
			line := mon.Line()
			m := monitorLineRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("MONITOR line %q", line)
			}
			got = append(got, m[1])
			if m[1] == `"ECHO" "done"` {
				return got
			}
		}
	}
	for _, tr := range bothTransports {
		t.Run(tr.name, func(t *testing.T) {
			in := servertest.Start(t, servertest.Options{Server: server.Options{Conn: resp.Options{EventLoops: tr.loops}}})
			leaf, rds := watch(t, in.Addr), watch(t, raddr)
			if strings.Join(leaf, "\n") != strings.Join(rds, "\n") {
				t.Fatalf("MONITOR lines:\n leaf  %q\n Redis %q", leaf, rds)
			}
		})
	}
}

// TestMonitorBounded: a monitor that reads nothing costs the server at
// most its bound: once that much waits for it, it is disconnected (and
// the log says so), while the clients whose commands it watched are
// answered all along, and a monitor that reads keeps its stream.
func TestMonitorBounded(t *testing.T) {
	for _, tr := range bothTransports {
		t.Run(tr.name, func(t *testing.T) {
			var log logbuf.Buffer
			in := servertest.Start(t, servertest.Options{Server: server.Options{
				Conn:   resp.Options{EventLoops: tr.loops},
				Logger: slog.New(slog.NewTextHandler(&log, nil)),
			}})
			// The stalled monitor: the smallest receive buffer, never read.
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				var err error
				rc.Control(func(fd uintptr) {
					err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 0)
				})
				return err
			}}
			stalled, err := d.Dial("tcp", in.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stalled.Close() })
			stalled.SetDeadline(time.Now().Add(time.Minute)) // a safety net
			io.WriteString(stalled, rawresp.Cmd("MONITOR"))
			ok := make([]byte, 5)
			if _, err := io.ReadFull(stalled, ok); err != nil || string(ok) != "+OK\r\n" {
				t.Fatalf("MONITOR: %q, %v", ok, err)
			}
			// A monitor that reads, counting its lines.
			reader := rawresp.Dial(t, in.Addr)
			reader.Send(rawresp.Cmd("MONITOR"))
			reader.Expect("+OK\r\n")
			lines := make(chan int, 1)
			go func() {
				n := 0
				for {
					s, err := reader.R.ReadString('\n')
					if err != nil {
						lines <- -1
						return
					}
					if n++; strings.Contains(s, `"ECHO" "last"`) {
						lines <- n
						return
					}
				}
			}()
			// Traffic until the stalled monitor is dropped: each pipeline
			// of 1000 INCRs makes about 50 KB of lines per monitor.
			c := rawresp.Dial(t, in.Addr)
			batch := strings.Repeat(rawresp.Cmd("INCR", "m"), 1000)
			sent := 0
			for !strings.Contains(log.String(), "closing a MONITOR client") {
				if sent > 200_000 {
					t.Fatalf("the stalled monitor still connected after %d commands", sent)
				}
				c.Send(batch)
				for range 1000 {
					if line := c.Line(); !strings.HasPrefix(line, ":") {
						t.Fatalf("INCR answered %q", line)
					}
				}
				sent += 1000
			}
			c.Send(rawresp.Cmd("ECHO", "last"))
			c.Expect("$4\r\nlast\r\n")
			if n := <-lines; n != sent+1 {
				t.Fatalf("the reading monitor saw %d lines, want %d", n, sent+1)
			}
			// The stalled one is closed: what it can still read ends.
			stalled.(*net.TCPConn).SetReadBuffer(1 << 20)
			if _, err := io.Copy(io.Discard, stalled); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the stalled monitor: %v, want the end", err)
			}
			info, err := newClient(t, in.Addr, 2, "").Info(context.Background(), "clients").Result()
			if err != nil {
				t.Fatal(err)
			}
			// The reading monitor, the traffic's connection, this one.
			if !strings.Contains(info, "connected_clients:3\r\n") {
				t.Fatalf("INFO clients after the drop:\n%s", info)
			}
			t.Logf("stalled monitor dropped after %s commands", strconv.Itoa(sent))
		})
	}
}
