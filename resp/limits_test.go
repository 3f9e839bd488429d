package resp

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/rawresp"
)

// Tests of the limits on what one client can cost: the reader's bound on
// a request, Redis's caps before AUTH, MaxPipeline and the reply buffer's
// bound per turn, the idle sweep.

// parsed is what a reader made of a stream: the commands, the size in
// bytes of each as sent, and the error that ended it (nil at a clean EOF).
type parsed struct {
	cmds  [][]string
	sizes []int
	err   error
	// maxBuf is the largest the read buffer grew to.
	maxBuf int
}

// readLimited parses data read chunk bytes at a time by a reader with the
// given limit (0: none) and Redis's caps before AUTH when unauth.
func readLimited(data string, chunk, limit int, unauth bool) parsed {
	r := reader{rd: &chunkReader{data: []byte(data), n: chunk}}
	r.setLimits(limit, unauth)
	var p parsed
	for {
		args, err := r.next()
		p.maxBuf = max(p.maxBuf, len(r.buf))
		if err != nil {
			p.err = err
			return p
		}
		if args == nil {
			if err := r.fill(); err != nil {
				p.maxBuf = max(p.maxBuf, len(r.buf))
				if err != io.EOF {
					p.err = err
				}
				return p
			}
			continue
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		p.cmds = append(p.cmds, cmd)
		p.sizes = append(p.sizes, r.start-r.prev)
	}
}

// padTo is a RESP ECHO whose whole request is exactly n bytes (n >= 24).
func padTo(n int) string {
	// The request is 19 bytes, the length's digits and the k bytes.
	for digits := 1; digits < 20; digits++ {
		if k := n - 19 - digits; k >= 0 && len(strconv.Itoa(k)) == digits {
			return rawresp.Cmd("ECHO", strings.Repeat("x", k))
		}
	}
	panic("padTo: no size fits")
}

// TestReaderLimits: every way a request can be too big is refused with
// Redis's text as soon as it is known, whatever the read sizes; a request
// of exactly the limit passes; the buffer never grows beyond the limit.
func TestReaderLimits(t *testing.T) {
	const limit = 100
	exact, over := padTo(limit), padTo(limit+1)
	for _, tc := range []struct {
		name   string
		in     string
		unauth bool
		cmds   int
		err    string
	}{
		{"exactly the limit", exact + rawresp.Cmd("PING"), false, 2, ""},
		{"one byte over", rawresp.Cmd("PING") + over, false, 1, errProtoBulkLength},
		{"bulk length announcing 1 GB", "*2\r\n$4\r\nINCR\r\n$1073741824\r\n" + strings.Repeat("x", 500), false, 0, errProtoBulkLength},
		{"bulk length beyond int64", "*1\r\n$99999999999999999999\r\n", false, 0, errProtoBulkLength},
		{"later arguments cannot fit", "*14\r\n$70\r\n", false, 0, errProtoBulkLength},
		{"count line without end", "*" + strings.Repeat("1", limit), false, 0, errProtoTooBigMultiBulk},
		{"count line short of the limit waits", "*" + strings.Repeat("1", limit-2), false, 0, ""},
		{"count that cannot fit", "*16\r\n", false, 0, errProtoMultiBulkLength},
		{"count that fits waits", "*15\r\n", false, 0, ""},
		{"huge count", "*1000000000000\r\n", false, 0, errProtoMultiBulkLength},
		{"length line without end", "*1\r\n$" + strings.Repeat("1", limit), false, 0, errProtoTooBigBulkCount},
		{"inline without end", strings.Repeat("a", limit), false, 0, errProtoTooBigInline},
		{"inline line over the limit", "PING " + strings.Repeat("a", limit) + "\r\n", false, 0, errProtoTooBigInline},
		{"inline line of exactly the limit", "ECHO " + strings.Repeat("a", limit-7) + "\r\n", false, 1, ""},
		{"blank line over the limit", strings.Repeat(" ", limit) + "\n", false, 0, errProtoTooBigInline},
		{"unauthenticated: 10 arguments", rawresp.Cmd("A", "1", "2", "3", "4", "5", "6", "7", "8", "9"), true, 1, ""},
		{"unauthenticated: 11 arguments", "*11\r\n", true, 0, errProtoUnauthMultiBulk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 1 << 20} {
				p := readLimited(tc.in, chunk, limit, tc.unauth)
				var got string
				if p.err != nil {
					got = p.err.Error()
				}
				if got != tc.err || len(p.cmds) != tc.cmds {
					t.Fatalf("chunk %d: %d commands, error %q; want %d, %q", chunk, len(p.cmds), got, tc.cmds, tc.err)
				}
				if p.maxBuf > max(limit, readBufMax) {
					t.Fatalf("chunk %d: buffer grew to %d bytes", chunk, p.maxBuf)
				}
			}
		})
	}
	// Redis's caps before AUTH, with leaf's default limit.
	for _, tc := range []struct {
		name string
		in   string
		err  string
	}{
		{"bulk of 16384", "*2\r\n$4\r\nAUTH\r\n$16384\r\n" + strings.Repeat("p", 16384) + "\r\n", ""},
		{"bulk of 16385", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", errProtoUnauthBulkLength},
	} {
		t.Run("unauthenticated: "+tc.name, func(t *testing.T) {
			p := readLimited(tc.in, 1<<20, DefaultMaxRequestBytes, true)
			if (p.err == nil && tc.err != "") || (p.err != nil && p.err.Error() != tc.err) {
				t.Fatalf("error %v, want %q", p.err, tc.err)
			}
		})
	}
	// A stream of commands far larger than the limit, each within it, and
	// a command larger than the buffer but within the limit.
	big := strings.Repeat(rawresp.Cmd("INCR", "a"), 10_000)
	if p := readLimited(big, 1<<20, limit, false); p.err != nil || len(p.cmds) != 10_000 {
		t.Fatalf("pipeline: %d commands, %v", len(p.cmds), p.err)
	}
	large := padTo(3 * readBufMax)
	if p := readLimited(large, 1000, 4*readBufMax, false); p.err != nil || len(p.cmds) != 1 || p.maxBuf > 4*readBufMax {
		t.Fatalf("large command: %d commands, %v, buffer %d", len(p.cmds), p.err, p.maxBuf)
	}
}

// FuzzReaderLimits: with any limit, the reader returns a prefix of the
// commands it returns without one, each within the limit; it stops early
// only with an error; on a stream shorter than the limit it returns the
// same commands, and ends the same way or refuses a count or a length
// announcing more; its buffer never grows beyond the limit (or
// readBufMax).
func FuzzReaderLimits(f *testing.F) {
	for _, s := range []string{
		rawresp.Cmd("INCR", "a") + rawresp.Cmd("PING"), "*2\r\n$4\r\nINCR\r\n$1073741824\r\n", "*99999\r\n", "PING\r\n" + strings.Repeat("x", 300),
		"*1\r\n$" + strings.Repeat("9", 100), "ECHO \"a b\"\r\n", strings.Repeat(" ", 200) + "\n", padTo(64),
	} {
		f.Add([]byte(s), uint16(64), false)
	}
	f.Add([]byte("*11\r\n"), uint16(1000), true)
	f.Fuzz(func(t *testing.T, data []byte, lim uint16, unauth bool) {
		limit := int(lim%2048) + 1
		chunk := 1 + len(data)%13
		free := readLimited(string(data), chunk, 0, unauth)
		got := readLimited(string(data), chunk, limit, unauth)
		if len(got.cmds) > len(free.cmds) {
			t.Fatalf("%q limit %d: %d commands, %d without a limit", data, limit, len(got.cmds), len(free.cmds))
		}
		for i := range got.cmds {
			if strings.Join(got.cmds[i], "\x00|") != strings.Join(free.cmds[i], "\x00|") {
				t.Fatalf("%q limit %d: command %d = %q, without a limit %q", data, limit, i, got.cmds[i], free.cmds[i])
			}
			if got.sizes[i] > limit {
				t.Fatalf("%q limit %d: command %d of %d bytes accepted", data, limit, i, got.sizes[i])
			}
		}
		if len(got.cmds) < len(free.cmds) && got.err == nil {
			t.Fatalf("%q limit %d: stopped after %d of %d commands without an error", data, limit, len(got.cmds), len(free.cmds))
		}
		// On a stream shorter than the limit, every command fits: only a
		// count or a length announcing more may end it differently.
		if len(data) < limit {
			sizeErr := got.err == errInvalidBulkLength || got.err == errInvalidMultiBulkLength
			if len(got.cmds) != len(free.cmds) || (fmt.Sprint(got.err) != fmt.Sprint(free.err) && !sizeErr) {
				t.Fatalf("%q limit %d: %d commands, %v; without a limit %d, %v", data, limit, len(got.cmds), got.err, len(free.cmds), free.err)
			}
		}
		if got.maxBuf > max(limit, readBufMax) {
			t.Fatalf("%q limit %d: buffer grew to %d", data, limit, got.maxBuf)
		}
	})
}

func TestSweepEvery(t *testing.T) {
	for _, tc := range []struct {
		d      time.Duration
		period time.Duration
		ticks  int64
	}{
		{100 * time.Millisecond, 25 * time.Millisecond, 5},
		{time.Second, 250 * time.Millisecond, 5},
		{time.Hour, time.Second, 3601},
		{time.Millisecond, time.Millisecond, 2},
		{1500 * time.Millisecond, 375 * time.Millisecond, 5},
	} {
		period, ticks := sweepEvery(tc.d)
		if period != tc.period || ticks != tc.ticks {
			t.Errorf("sweepEvery(%v) = %v, %d; want %v, %d", tc.d, period, ticks, tc.period, tc.ticks)
		}
		// A connection read just after a tick is closed after at least
		// (ticks-1) periods: never before the timeout.
		if time.Duration(ticks-1)*period < tc.d {
			t.Errorf("sweepEvery(%v): closes after %v", tc.d, time.Duration(ticks-1)*period)
		}
	}
}

func TestPadTo(t *testing.T) {
	for _, n := range []int{24, 100, 101, 1000, 3 * readBufMax} {
		if got := len(padTo(n)); got != n {
			t.Errorf("len(padTo(%d)) = %d", n, got)
		}
	}
}
