package mysql_test

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
)

// commitCut is a proxy that breaks the connection that sends a batch
// ending in COMMIT (the second round trip of a Take with the guard):
// before the server sees it (after false), or once the server has run
// it, dropping its answer (after true).
type commitCut struct {
	ln     net.Listener
	target string
	after  bool
	cut    chan struct{} // closed when the connection is broken
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
}

func newCommitCut(t *testing.T, target string, after bool) *commitCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCut{ln: ln, target: target, after: after, cut: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *commitCut) accept() {
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
		var mute sync.Once // the server's answers stop once the batch went through
		muted := make(chan struct{})
		go func() { // server to client, until muted
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				select {
				case <-muted:
					// The batch's answer: the client never gets
					// it; the server finishes the batch, COMMIT
					// included, on its side of the proxy.
					c.Close()
					return
				default:
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					c.Close()
					return
				}
			}
		}()
		go func() { // client to server, packet by packet
			defer s.Close()
			for {
				pkt, err := readPacket(c)
				if err != nil {
					return
				}
				if len(pkt) > 5 && pkt[4] == 0x03 && bytes.HasSuffix(pkt[5:], []byte("; COMMIT")) {
					if p.after {
						mute.Do(func() { close(muted) })
						_, _ = s.Write(pkt)
					}
					p.once.Do(func() { close(p.cut) })
					if !p.after {
						c.Close()
						return
					}
					continue
				}
				if _, err := s.Write(pkt); err != nil {
					return
				}
			}
		}()
	}
}

// readPacket reads one client packet whole: a 3-byte length, a sequence
// byte, the payload.
func readPacket(r io.Reader) ([]byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(append(head[:3:3], 0)))
	pkt := make([]byte, 4+n)
	copy(pkt, head)
	_, err := io.ReadFull(r, pkt[4:])
	return pkt, err
}

// TestBatchedTakeLostCommit: the batch that raises the guard and commits
// is lost before the server runs it, or its answer is lost after: the
// Take fails with ErrAmbiguous (and ErrUnavailable), is not run again,
// and the next Take starts above whatever the lost one may have taken.
func TestBatchedTakeLostCommit(t *testing.T) {
	tests := []struct {
		name      string
		after     bool
		wantMaxID int64 // committed max_id after the lost Take of [11, 21)
	}{
		{"BeforeServer", false, 11},
		{"AfterServer", true, 21},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := mysqltest.DSN(t)
			s, err := mysql.Open(t.Context(), dsn, persist.Options{CreateSchema: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
				t.Fatal(err)
			}
			if r, err := s.Take(t.Context(), "t", 0); err != nil || r != (persist.Range{Start: 1, End: 11, Step: 10}) {
				t.Fatalf("first Take = %+v, %v", r, err)
			}

			p := newCommitCut(t, dsnAddr(t, dsn), tc.after)
			cut, err := mysql.Open(t.Context(), viaAddr(t, dsn, p.ln.Addr().String()), persist.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cut.Close() })
			_, err = cut.Take(t.Context(), "t", 0)
			if !errors.Is(err, persist.ErrAmbiguous) || !errors.Is(err, persist.ErrUnavailable) {
				t.Fatalf("Take across a cut connection: err = %v, want ErrAmbiguous and ErrUnavailable", err)
			}
			select {
			case <-p.cut:
			default:
				t.Fatal("the proxy cut no connection")
			}
			// The next Take waits for the row until the server has
			// committed the lost batch or rolled it back.
			want := persist.Range{Start: tc.wantMaxID, End: tc.wantMaxID + 10, Step: 10}
			if r, err := s.Take(t.Context(), "t", 0); err != nil || r != want {
				t.Fatalf("next Take = %+v, %v; want %+v", r, err, want)
			}
			raw, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			var high int64
			if err := raw.QueryRowContext(t.Context(), `SELECT high FROM leaf_guard WHERE biz_tag = 't'`).Scan(&high); err != nil || high != want.End {
				t.Fatalf("guard = %d, %v; want %d", high, err, want.End)
			}
		})
	}
}
