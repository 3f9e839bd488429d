package server

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTransportBackpressure: a client that sends a long pipeline before
// reading gets every reply, with small socket buffers on both sides: the
// server's writes find the socket full, it stops reading while its replies
// wait for room, and resumes.
func TestTransportBackpressure(t *testing.T) {
	const n = 50_000
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, _ := newAlloc(t, "", bigStepOptions(), nil)
			s := New(a, Options{EventLoops: tr.loops})
			nc := dialTest(t, serve(t, s))
			nc.(*net.TCPConn).SetReadBuffer(32 << 10)
			io.WriteString(nc, resp("PING"))
			if _, err := io.ReadFull(nc, make([]byte, 7)); err != nil {
				t.Fatal(err)
			}
			for _, c := range s.snapshotClients() { // the one connection
				if c.cn.nc != nil {
					c.cn.nc.(*net.TCPConn).SetWriteBuffer(8 << 10)
				} else if err := syscall.SetsockoptInt(c.cn.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8<<10); err != nil {
					t.Fatal(err)
				}
			}
			sent := make(chan error, 1)
			go func() {
				_, err := io.WriteString(nc, strings.Repeat(resp("INCR", "bp"), n))
				sent <- err
			}()
			time.Sleep(50 * time.Millisecond) // let the replies pile up
			var want []byte
			for id := int64(1); id <= n; id++ {
				want = append(strconv.AppendInt(append(want, ':'), id, 10), '\r', '\n')
			}
			got := make([]byte, len(want))
			if _, err := io.ReadFull(nc, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && got[i] == want[i] {
					i++
				}
				t.Fatalf("replies differ at byte %d: %q", i, got[max(0, i-20):min(len(got), i+20)])
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}
