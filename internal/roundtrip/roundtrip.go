// Package roundtrip is a TCP proxy for tests that counts the round trips
// between a database client and its server: the times the server answered
// after the client had sent something. Tests assert with it how many
// round trips an operation costs, which is what a distant database makes
// the operation wait.
//
// It can also make the database distant: with a delay, each byte read
// from either side is written to the other that much later, in order, as
// over a long link. The delay is a latency, not a bandwidth limit: bytes
// read meanwhile queue behind it and keep flowing.
package roundtrip

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queueLen bounds the chunks one direction holds while they wait out the
// delay; a reader facing a full queue stops reading, as a sender facing a
// full TCP window does.
const queueLen = 4096

// Proxy forwards every connection made to Addr to the target address.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	// wait blocks until due, or until the proxy closes (false); tests of
	// the package replace it to hold chunks on cue.
	wait func(due time.Time) bool
	// received counts the bytes read from either side, delivered or not.
	received atomic.Int64
	trips    atomic.Int64
	done     chan struct{} // closed by Close
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// Start listens on a free loopback port and forwards to target; t.Cleanup
// closes it and every connection through it.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	return StartDelayed(tb, target, 0)
}

// StartDelayed is Start with every byte delayed by d in each direction:
// a round trip through it takes at least 2*d more. Connecting is not
// delayed; the server's first bytes are.
func StartDelayed(tb testing.TB, target string, d time.Duration) *Proxy {
	tb.Helper()
	p, err := listen("127.0.0.1:0", target, d, nil)
	if err != nil {
		tb.Fatalf("roundtrip: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Listen is StartDelayed for a program (a benchmark's proxy process):
// it listens on addr, and Close stops it.
func Listen(addr, target string, d time.Duration) (*Proxy, error) {
	return listen(addr, target, d, nil)
}

// listen starts a proxy; wait nil is the real clock's.
func listen(addr, target string, d time.Duration, wait func(time.Time) bool) (*Proxy, error) {
	if d < 0 {
		return nil, fmt.Errorf("negative delay %s", d)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, delay: d, wait: wait, done: make(chan struct{})}
	if p.wait == nil {
		p.wait = p.sleepUntil
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
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

// chunk is what one read got, and when it is due at the other side.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from src to dst, noting in spoke that side sent; answers
// counts a round trip when src (the server) speaks after the client.
// With a delay, a goroutine of its own writes what pipe reads once it is
// due, so that reading goes on meanwhile. The count is taken as bytes are
// read: a server cannot answer bytes it has not been sent yet, so the
// delay does not change it.
func (p *Proxy) pipe(dst, src net.Conn, spoke *atomic.Int32, side int32, answers bool) {
	defer p.wg.Done()
	var q chan chunk
	var stopped chan struct{} // closed when deliver gives up
	if p.delay > 0 {
		q, stopped = make(chan chunk, queueLen), make(chan struct{})
		p.wg.Add(1)
		go p.deliver(dst, src, q, stopped)
		defer close(q) // deliver writes what is queued, then closes both ends
	} else {
		defer src.Close()
		defer dst.Close()
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.received.Add(int64(n))
			if prev := spoke.Swap(side); answers && prev == 1 {
				p.trips.Add(1)
			}
			if q == nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			} else {
				select {
				case q <- chunk{b: bytes.Clone(buf[:n]), due: time.Now().Add(p.delay)}:
				case <-stopped:
					return
				}
			}
		}
		if err != nil {
			return // io.EOF or a closed connection: close both ends
		}
	}
}

// deliver writes each chunk of q to dst once it is due, until q is closed
// and drained, dst fails, or the proxy closes; then it closes both ends.
func (p *Proxy) deliver(dst, src net.Conn, q <-chan chunk, stopped chan<- struct{}) {
	defer p.wg.Done()
	defer close(stopped)
	defer src.Close()
	defer dst.Close()
	for c := range q {
		if !p.wait(c.due) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// sleepUntil waits for due on the real clock; false when the proxy
// closed first.
func (p *Proxy) sleepUntil(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}

// Close stops listening and closes every connection through the proxy,
// dropping what was still delayed; it returns once every goroutine of the
// proxy has ended.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		close(p.done)
		p.ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
	return nil
}
