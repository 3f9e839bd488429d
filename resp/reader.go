package resp

import (
	"fmt"
	"io"
	"math"
	"sync/atomic"
)

// Buffer sizes of a connection's reader. A command never needs more than
// its own size; a bigger buffer only saves read calls on deep pipelines.
const (
	readBufMin = 4 << 10  // first buffer, and what an emptied oversized one shrinks to
	readBufMax = 64 << 10 // grown to on full reads; larger only for one big command
)

// protoError is a malformed request. The connection answers
// "-ERR <text>" and is closed, as redcon and Redis do. The texts are in
// errors.go.
type protoError struct{ text string }

func (e *protoError) Error() string { return e.text }

var (
	errUnbalancedQuotes       = &protoError{errProtoUnbalancedQuotes}
	errTooBigInline           = &protoError{errProtoTooBigInline}
	errTooBigMultiBulk        = &protoError{errProtoTooBigMultiBulk}
	errInvalidMultiBulkLength = &protoError{errProtoMultiBulkLength}
	errUnauthMultiBulk        = &protoError{errProtoUnauthMultiBulk}
	errTooBigBulkCount        = &protoError{errProtoTooBigBulkCount}
	errInvalidBulkLength      = &protoError{errProtoBulkLength}
	errUnauthBulkLength       = &protoError{errProtoUnauthBulkLength}
)

// Redis's caps on a client that has not authenticated while a password is
// set (networking.c, processMultibulkBuffer): a stranger cannot make the
// server hold a large request.
const (
	unauthMaxArgs = 10
	unauthMaxBulk = 16384
)

// minArgBytes is the size of the smallest argument, "$0\r\n\r\n": a count
// of n arguments announces at least n times this many bytes.
const minArgBytes = 6

// reader parses commands in place from a connection's read buffer, with
// redcon's semantics: a request starting with '*' is a RESP multibulk, any
// other is an inline command (telnet, redis-cli's inline mode) split on
// spaces, an argument in double or single quotes being unescaped. The
// arguments it returns point into its buffer: they are valid until the
// next fill, so a handler that keeps one must copy it. Parsing a RESP
// command allocates nothing.
//
// The buffer grows to fit the largest command, and maxLen bounds a
// command: a request is refused as soon as what has been read (a count, a
// length, a line without its end) shows it cannot fit in maxLen bytes,
// before its body is read. An incomplete command therefore always holds
// fewer than maxLen bytes, so the buffer never grows beyond maxLen (or
// readBufMax, which deep pipelines grow it to).
type reader struct {
	rd         io.Reader
	count      *atomic.Int64 // when set, counts the bytes read
	buf        []byte
	start, end int // buf[start:end] is read and not yet parsed
	prev       int // start of the command next returned last (unread)
	ahead      int // end of the commands already previewed (Conn.preview)

	// Limits, set by setLimits (a zero reader refuses everything): the
	// largest request in bytes, argument count and argument length, and
	// whether Redis's caps before AUTH apply.
	maxLen, maxCount, maxBulk int
	unauth                    bool

	args   [][]byte // the last command's arguments, reused
	marks  []int    // argument bounds within buf, reused
	inline []byte   // unquoted inline arguments, reused
}

// setLimits bounds a request to max bytes (0: no bound) and, when unauth,
// to Redis's caps for a client not yet authenticated.
func (r *reader) setLimits(max int, unauth bool) {
	if max <= 0 {
		max = math.MaxInt
	}
	r.maxLen, r.maxCount, r.maxBulk, r.unauth = max, max/minArgBytes, max, unauth
	if unauth {
		r.maxCount, r.maxBulk = min(r.maxCount, unauthMaxArgs), min(max, unauthMaxBulk)
	}
}

// next parses the next command from the buffer. It returns nil args and a
// nil error when the buffer holds no complete command (call fill), and a
// *protoError for a malformed one. Inline lines that hold no argument are
// skipped, as Redis does.
func (r *reader) next() ([][]byte, error) {
	for r.start < r.end {
		b := r.buf[r.start:r.end]
		var n int
		var err error
		if b[0] == '*' {
			n, err = r.multibulk(b)
		} else {
			n, err = r.inlineCmd(b)
		}
		if err != nil || n == 0 {
			return nil, err
		}
		r.prev = r.start
		r.start += n
		if len(r.args) > 0 {
			return r.args, nil
		}
	}
	return nil, nil
}

// unread puts back the command next returned last, which is valid until
// the next fill: the next call of next returns it again.
func (r *reader) unread() { r.start = r.prev }

// buffered reports whether unparsed bytes remain.
func (r *reader) buffered() bool { return r.start < r.end }

// discard drops every buffered byte (QUIT drops the rest of a pipeline).
func (r *reader) discard() { r.start, r.end, r.ahead = 0, 0, 0 }

// fill reads more bytes: at least one, or an error. It first makes room:
// a partial command moves to the front, and the buffer grows when one
// command fills it.
func (r *reader) fill() error {
	switch {
	case r.buf == nil:
		r.buf = make([]byte, readBufMin)
	case r.start == r.end:
		r.start, r.end, r.ahead = 0, 0, 0
		if len(r.buf) > readBufMax {
			// Grown for one big command: give it back.
			r.buf = make([]byte, readBufMin)
		}
	case r.start > 0:
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.ahead = max(r.ahead-r.start, 0)
		r.start = 0
	}
	if r.end == len(r.buf) {
		// One command larger than the buffer. It holds fewer than
		// maxLen bytes (see reader), so maxLen bytes are enough room.
		n := 2 * len(r.buf)
		n = min(n, max(r.maxLen, readBufMin))
		r.grow(n)
	}
	n, err := r.rd.Read(r.buf[r.end:])
	r.end += n
	if n > 0 && r.count != nil {
		r.count.Add(int64(n))
	}
	if n > 0 {
		// Bytes and an error (EOF) together: the bytes are served first
		// and the next fill returns the error again.
		if r.end == len(r.buf) && len(r.buf) < readBufMax {
			// A full read: a deep pipeline; read more at a time.
			r.grow(min(2*len(r.buf), readBufMax))
		}
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// grow replaces the buffer by one of size n holding the same bytes.
func (r *reader) grow(n int) {
	nb := make([]byte, n)
	copy(nb, r.buf[:r.end])
	r.buf = nb
}

// multibulk parses "*<count>\r\n" then count "$<len>\r\n<bytes>\r\n" at the
// start of b. It returns the bytes used, 0 when b is incomplete.
//
// A request is refused once it is known to exceed the limits: a count or
// a length over them; a count or length line still without its end at
// maxLen bytes; an argument not all read yet whose length, with the
// smallest arguments still to come, takes the request beyond maxLen, or
// arguments to come that cannot fit. So an incomplete command is always
// shorter than maxLen, and a body beyond it is never read. A complete
// command (read at once) is checked as a whole, which keeps the common
// path to three comparisons.
func (r *reader) multibulk(b []byte) (int, error) {
	i := indexLF(b, 1)
	if i < 0 {
		if len(b) >= r.maxLen {
			return 0, errTooBigMultiBulk
		}
		return 0, nil
	}
	if b[i-1] != '\r' {
		return 0, errInvalidMultiBulkLength
	}
	count, ok := atoi(b[1 : i-1])
	if !ok || count <= 0 {
		return 0, errInvalidMultiBulkLength
	}
	if count > r.maxCount {
		if r.unauth && count > unauthMaxArgs {
			return 0, errUnauthMultiBulk
		}
		return 0, errInvalidMultiBulkLength
	}
	r.marks = r.marks[:0]
	for k := range count {
		i++
		if i >= len(b) {
			if i > r.maxLen-(count-k)*minArgBytes { // count-k arguments to come
				if k == 0 {
					return 0, errInvalidMultiBulkLength // the count is too big
				}
				return 0, errInvalidBulkLength
			}
			return 0, nil
		}
		if b[i] != '$' {
			return 0, &protoError{fmt.Sprintf(errProtoExpectedDollar, rune(b[i]))}
		}
		si := i
		if i = indexLF(b, si+1); i < 0 {
			if len(b) >= r.maxLen {
				return 0, errTooBigBulkCount
			}
			return 0, nil
		}
		if b[i-1] != '\r' {
			return 0, errInvalidBulkLength
		}
		size, ok := atoi(b[si+1 : i-1])
		if !ok || size < 0 {
			return 0, errInvalidBulkLength
		}
		if size > r.maxBulk {
			if r.unauth && size > unauthMaxBulk {
				return 0, errUnauthBulkLength
			}
			return 0, errInvalidBulkLength
		}
		if size >= len(b)-i-2 { // i+size+2 >= len(b), without overflow
			// Not all read: this argument ends at i+size+3, and
			// count-k-1 more follow.
			if size > r.maxLen-i-3-(count-k-1)*minArgBytes {
				return 0, errInvalidBulkLength
			}
			return 0, nil
		}
		if b[i+size+1] != '\r' || b[i+size+2] != '\n' {
			return 0, errInvalidBulkLength
		}
		r.marks = append(r.marks, i+1, i+1+size)
		i += size + 2
	}
	if i >= r.maxLen { // the command is i+1 bytes
		return 0, errInvalidBulkLength
	}
	r.args = r.args[:0]
	for h := 0; h < len(r.marks); h += 2 {
		r.args = append(r.args, b[r.marks[h]:r.marks[h+1]:r.marks[h+1]])
	}
	return i + 1, nil
}

// inlineCmd parses one inline line at the start of b, exactly as redcon:
// arguments are separated by spaces; one that starts with a quote runs to
// the matching quote, with \n, \r and \t (and \ before any other byte)
// unescaped, and must be followed by a space or the end. It returns the
// bytes used (0 when the line is incomplete); r.args is empty for a blank
// line.
func (r *reader) inlineCmd(b []byte) (int, error) {
	i := indexLF(b, 0)
	if i < 0 {
		if len(b) >= r.maxLen {
			return 0, errTooBigInline
		}
		return 0, nil
	}
	if i >= r.maxLen { // the line and its '\n' exceed maxLen
		return 0, errTooBigInline
	}
	line := b[:i]
	if i > 0 && b[i-1] == '\r' {
		line = b[:i-1]
	}
	// Unquoted arguments point into the line; quoted ones are unescaped
	// into r.inline and sliced out once it stops growing.
	r.args = r.args[:0]
	r.marks = r.marks[:0] // for quoted arguments: index in args, start, end in inline
	r.inline = r.inline[:0]
	for len(line) > 0 {
		if line[0] == ' ' {
			line = line[1:]
			continue
		}
		if q := line[0]; q == '"' || q == '\'' {
			start := len(r.inline)
			escape, closed := false, false
			j := 1
			for ; j < len(line); j++ {
				c := line[j]
				if escape {
					escape = false
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					}
				} else if c == q {
					closed = true
					break
				} else if c == '\\' {
					escape = true
					continue
				}
				r.inline = append(r.inline, c)
			}
			if !closed {
				return 0, errUnbalancedQuotes
			}
			line = line[j+1:]
			if len(line) > 0 && line[0] != ' ' {
				return 0, errUnbalancedQuotes
			}
			r.marks = append(r.marks, len(r.args), start, len(r.inline))
			r.args = append(r.args, nil)
			continue
		}
		j := 0
		for j < len(line) && line[j] != ' ' {
			if line[j] == '"' || line[j] == '\'' {
				return 0, errUnbalancedQuotes // a quote inside an argument
			}
			j++
		}
		r.args = append(r.args, line[:j:j])
		line = line[j:]
	}
	for h := 0; h < len(r.marks); h += 3 {
		r.args[r.marks[h]] = r.inline[r.marks[h+1]:r.marks[h+2]:r.marks[h+2]]
	}
	return i + 1, nil
}

// indexLF is the index of the first '\n' in b at or after from, or -1.
func indexLF(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] == '\n' {
			return i
		}
	}
	return -1
}

// atoi parses a decimal int as strconv.Atoi does (an optional sign, then
// digits, leading zeros allowed) without allocating: redcon's rule for
// counts and lengths.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	const cutoff = 1 << 63 / 10
	var n uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		if n > cutoff {
			return 0, false
		}
		n = n*10 + uint64(d)
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int(n), true // n == 1<<63 wraps to MinInt64, as Atoi allows
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int(n), true
}
