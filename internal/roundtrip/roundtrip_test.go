package roundtrip

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// startEcho is a TCP server on a loopback port that sends back whatever
// it reads, closed at cleanup.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// dial connects to p, closed at cleanup.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDelayAndTrips: each exchange with an echo server through the proxy
// takes at least twice the delay (there and back), comes back as it was
// sent, and counts one round trip, with or without a delay.
func TestDelayAndTrips(t *testing.T) {
	for _, d := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprintf("delay=%s", d), func(t *testing.T) {
			p := StartDelayed(t, startEcho(t), d)
			c := dial(t, p)
			const exchanges = 5
			for i := range exchanges {
				msg := fmt.Appendf(nil, "exchange %d of %d", i+1, exchanges)
				start := time.Now()
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took < 2*d {
					t.Errorf("exchange %d took %s, want at least %s (the delay each way)", i+1, took, 2*d)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("echo %q, want %q", got, msg)
				}
			}
			if n := p.Trips(); n != exchanges {
				t.Errorf("%d round trips counted, want %d", n, exchanges)
			}
		})
	}
}

// TestDelayKeepsOrder: a stream written in many small pieces, read back
// while it is still being written, comes back whole and in order.
func TestDelayKeepsOrder(t *testing.T) {
	p := StartDelayed(t, startEcho(t), 5*time.Millisecond)
	c := dial(t, p)
	var want bytes.Buffer
	for i := range 20_000 {
		fmt.Fprintf(&want, "%d,", i)
	}
	werr := make(chan error, 1)
	go func() {
		b := want.Bytes()
		for len(b) > 0 {
			n := min(len(b), 37) // pieces that do not line up with the numbers
			if _, err := c.Write(b[:n]); err != nil {
				werr <- err
				return
			}
			b = b[n:]
		}
		werr <- nil
	}()
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < len(got) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("the stream came back changed from byte %d: %.40q, want %.40q", i, got[i:], want.Bytes()[i:])
	}
}

// TestDelayDoesNotSerialise: while one chunk waits out its delay, the
// proxy goes on reading what follows it; a proxy that slept after each
// read would read nothing more, and a burst of statements would cost a
// delay each.
func TestDelayDoesNotSerialise(t *testing.T) {
	held := make(chan time.Time)
	release, stop := make(chan struct{}), make(chan struct{})
	p, err := listen("127.0.0.1:0", startEcho(t), time.Hour, func(due time.Time) bool {
		select {
		case held <- due:
		case <-release: // from then on every chunk goes at once
			return true
		case <-stop:
			return false
		}
		select {
		case <-release:
			return true
		case <-stop:
			return false
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	t.Cleanup(func() { close(stop) }) // first: a test that failed holds no chunk
	c := dial(t, p)
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	<-held // "a" waits out its delay
	if _, err := c.Write([]byte("bc")); err != nil {
		t.Fatal(err)
	}
	// A proxy that stops reading while "a" is held never reads "bc": a
	// minute bounds the hang, it is no timed assertion.
	deadline := time.Now().Add(time.Minute)
	for p.received.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy read %d bytes while a chunk waited out its delay, want 3", p.received.Load())
		}
		runtime.Gosched()
	}
	close(release)
	got := make([]byte, 3)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "abc" {
		t.Fatalf("echo %q, want %q", got, "abc")
	}
}
