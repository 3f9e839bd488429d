// Package roundtrip is a TCP proxy for tests that counts the round trips
// between a database client and its server: the times the server answered
// after the client had sent something. Tests assert with it how many
// round trips an operation costs, which is what a distant database makes
// the operation wait.
package roundtrip

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards every connection made to Addr to the target address.
type Proxy struct {
	ln     net.Listener
	target string
	trips  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// Start listens on a free loopback port and forwards to target; t.Cleanup
// closes it and every connection through it.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("roundtrip: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Trips is the number of round trips counted since the last Reset.
func (p *Proxy) Trips() int64 { return p.trips.Load() }

// Reset sets the count to zero.
func (p *Proxy) Reset() { p.trips.Store(0) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		// spoke is who sent last on this connection: a server's answer
		// after the client spoke ends a round trip.
		var spoke atomic.Int32
		p.wg.Add(2)
		go p.pipe(s, c, &spoke, 1, false)
		go p.pipe(c, s, &spoke, 2, true)
	}
}

// pipe copies from src to dst, noting in spoke that side sent; answers
// counts a round trip when src (the server) speaks after the client.
func (p *Proxy) pipe(dst, src net.Conn, spoke *atomic.Int32, side int32, answers bool) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if prev := spoke.Swap(side); answers && prev == 1 {
				p.trips.Add(1)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break // io.EOF or a closed connection: close both ends
		}
	}
	dst.Close()
	src.Close()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
