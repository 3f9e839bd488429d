package resp

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// TestAuthTimeout: a connection that has not authenticated within
// AuthTimeout is closed; one that authenticated first, opened earlier,
// stays (so it would have been closed first). Both transports.
func TestAuthTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			h := newTestHandler()
			h.password = "pw"
			// Short, so the test is quick, yet long enough for AUTH to come
			// first on a busy machine; nothing is asserted about time.
			s, addr := start(t, h, Options{EventLoops: tr.loops, AuthTimeout: 500 * time.Millisecond})
			authed := dial(t, addr)
			ar := bufio.NewReader(authed)
			io.WriteString(authed, rawresp.Cmd("AUTH", "pw"))
			if line, err := ar.ReadString('\n'); err != nil || line != "+OK\r\n" {
				t.Fatalf("AUTH: %q, %v", line, err)
			}
			stranger := dial(t, addr)
			io.WriteString(stranger, rawresp.Cmd("PING"))
			got, err := io.ReadAll(stranger) // until the server closes it
			if err != nil || string(got) != "-NOAUTH Authentication required.\r\n" {
				t.Fatalf("the stranger read %q, %v; want its NOAUTH, then the end", got, err)
			}
			if n := s.Stats().AuthTimeouts; n != 1 {
				t.Fatalf("AuthTimeouts = %d, want 1", n)
			}
			io.WriteString(authed, rawresp.Cmd("PING"))
			if line, err := ar.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				t.Fatalf("the authenticated connection after the stranger's end: %q, %v", line, err)
			}
		})
	}
}

func TestSweepPlan(t *testing.T) {
	for _, tc := range []struct {
		idle, auth   time.Duration
		period       time.Duration
		idleT, authT int64
	}{
		{0, 0, 0, 0, 0},
		{10 * time.Second, 0, time.Second, 11, 0},
		{0, 10 * time.Second, time.Second, 0, 11},
		{time.Minute, 2 * time.Second, 500 * time.Millisecond, 121, 5},
	} {
		p, i, a := sweepPlan(tc.idle, tc.auth)
		if p != tc.period || i != tc.idleT || a != tc.authT {
			t.Errorf("sweepPlan(%s, %s) = %s, %d, %d; want %s, %d, %d", tc.idle, tc.auth, p, i, a, tc.period, tc.idleT, tc.authT)
		}
	}
}
