package postgrestest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Cut says where an armed Proxy breaks the connection of the next
// transaction that commits. Either way the client has sent its commit and
// never hears the answer: the outcome is unknown to it.
type Cut int

const (
	// AfterCommit lets the server commit (a COMMIT, or a write in no
	// transaction) and drops its answer: the transaction took effect.
	AfterCommit Cut = iota + 1
	// BeforeCommit drops the client's COMMIT before the server sees it:
	// the server rolls the transaction back when the connection closes.
	BeforeCommit
)

// Proxy forwards TCP connections to a PostgreSQL server, reading the
// protocol's messages as they pass so that, when armed, it can break the
// connection at the one moment where a client cannot tell whether its
// transaction committed.
type Proxy struct {
	ln     net.Listener
	target string
	cuts   chan Cut // one value per connection cut

	mu    sync.Mutex
	armed Cut // 0: forward everything
	conns []net.Conn
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port). It is closed at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, cuts: make(chan Cut, 16)}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Arm makes the proxy cut the next transaction that commits, on whichever
// connection it comes, where c says. It fires once.
func (p *Proxy) Arm(c Cut) {
	p.mu.Lock()
	p.armed = c
	p.mu.Unlock()
}

// Cuts receives a value each time the proxy cuts a connection.
func (p *Proxy) Cuts() <-chan Cut { return p.cuts }

// fire disarms the proxy and reports whether it was armed for c.
func (p *Proxy) fire(c Cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != c {
		return false
	}
	p.armed = 0
	return true
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) serve(client net.Conn) {
	p.track(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(server)
	cut := func(c Cut) {
		client.Close()
		server.Close()
		p.cuts <- c
	}
	go func() {
		p.fromServer(client, server, cut)
		client.Close()
	}()
	p.fromClient(server, client, cut)
	server.Close()
}

// fromClient forwards the client's messages: the startup message (no type
// byte), then typed messages, dropping a COMMIT when armed BeforeCommit.
func (p *Proxy) fromClient(dst, src net.Conn, cut func(Cut)) {
	r := bufio.NewReader(src)
	startup := true
	for {
		msg, err := readMessage(r, !startup)
		if err != nil {
			return
		}
		if startup {
			// An SSL or GSS encryption request is answered by one byte,
			// which the server side would misread: not spoken here.
			if len(msg) >= 8 && binary.BigEndian.Uint32(msg[4:8]) != 196608 {
				return
			}
			startup = false
		} else if msg[0] == 'Q' && bytes.EqualFold(bytes.TrimRight(msg[5:], "\x00; "), []byte("commit")) && p.fire(BeforeCommit) {
			cut(BeforeCommit)
			return
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

// fromServer forwards the server's messages. Armed AfterCommit, it holds
// what follows a write's CommandComplete until ReadyForQuery: when that
// says the session is out of any transaction (the write committed), it
// drops the lot and cuts the connection.
func (p *Proxy) fromServer(dst, src net.Conn, cut func(Cut)) {
	r, w := bufio.NewReader(src), bufio.NewWriter(dst)
	holding := false
	for {
		msg, err := readMessage(r, true)
		if err != nil {
			_ = w.Flush()
			return
		}
		switch msg[0] {
		case 'C':
			tag := msg[5:]
			for _, write := range []string{"COMMIT", "UPDATE ", "INSERT ", "DELETE ", "SELECT "} {
				// A SELECT that returned rows may have written: its
				// WITH holds an UPDATE (the one-statement Take).
				if bytes.HasPrefix(tag, []byte(write)) && !bytes.HasPrefix(tag, []byte("SELECT 0\x00")) {
					holding = holding || p.armedFor(AfterCommit)
				}
			}
		case 'Z':
			if holding && len(msg) > 5 && msg[5] == 'I' && p.fire(AfterCommit) {
				cut(AfterCommit)
				return
			}
			holding = false
		}
		if _, err := w.Write(msg); err != nil {
			return
		}
		if !holding && w.Flush() != nil {
			return
		}
	}
}

func (p *Proxy) armedFor(c Cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed == c
}

// readMessage reads one message: a type byte when typed, then a length
// that counts itself, then the body. It returns the message whole.
func readMessage(r *bufio.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:]))
	if n < 4 || n > 64<<20 {
		return nil, errors.New("postgrestest: bad message length")
	}
	msg = append(msg, make([]byte, n-4)...)
	if _, err := io.ReadFull(r, msg[head:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
