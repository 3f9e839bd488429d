package resp

import (
	"math"
	"strconv"

	"github.com/tidwall/redcon"
)

// Writer appends replies to a connection's output, in the protocol the
// connection speaks: RESP2, or RESP3 once a command (HELLO 3) called
// SetProtocol(3). Scalars and arrays are the same in both and written
// with redcon's encoders; maps, sets, nulls, doubles and verbatim strings
// are RESP3 types that have a RESP2 form, which Redis sends to RESP2
// clients, and so does Writer. Nothing it writes allocates but the output
// buffer's growth.
type Writer struct {
	out   []byte
	proto int // 2 or 3; 0 is 2
}

// Protocol is the RESP version replies are written in: 2 or 3.
func (w *Writer) Protocol() int {
	if w.proto == 3 {
		return 3
	}
	return 2
}

// SetProtocol switches the replies that follow to RESP version v (2 or 3).
func (w *Writer) SetProtocol(v int) { w.proto = v }

// Bytes returns the replies written and not yet sent.
func (w *Writer) Bytes() []byte { return w.out }

// Reset drops the replies not yet sent.
func (w *Writer) Reset() { w.out = w.out[:0] }

// WriteError writes an error reply: msg, its first word the error code
// ("ERR", "NOAUTH", ...). A CR or LF in msg becomes a space, so text from
// a client cannot end the reply early.
func (w *Writer) WriteError(msg string) { w.out = redcon.AppendError(w.out, msg) }

// WriteString writes a simple string (CR and LF become spaces).
func (w *Writer) WriteString(s string) { w.out = redcon.AppendString(w.out, s) }

// WriteBulk writes a bulk string.
func (w *Writer) WriteBulk(b []byte) { w.out = redcon.AppendBulk(w.out, b) }

// WriteBulkString writes a bulk string.
func (w *Writer) WriteBulkString(s string) { w.out = redcon.AppendBulkString(w.out, s) }

// WriteInt writes an integer.
func (w *Writer) WriteInt(n int) { w.out = redcon.AppendInt(w.out, int64(n)) }

// WriteInt64 writes an integer.
func (w *Writer) WriteInt64(n int64) { w.out = redcon.AppendInt(w.out, n) }

// WriteArray writes the header of an array of n elements, which follow.
func (w *Writer) WriteArray(n int) { w.out = redcon.AppendArray(w.out, n) }

// WriteNull writes nil: _ in RESP3, the null bulk string in RESP2.
func (w *Writer) WriteNull() {
	if w.proto == 3 {
		w.out = append(w.out, "_\r\n"...)
		return
	}
	w.out = redcon.AppendNull(w.out)
}

// WriteNullArray writes the nil array (an aborted EXEC, a timed-out
// blocking pop): _ in RESP3, *-1 in RESP2, as Redis does.
func (w *Writer) WriteNullArray() {
	if w.proto == 3 {
		w.out = append(w.out, "_\r\n"...)
		return
	}
	w.out = append(w.out, "*-1\r\n"...)
}

// WriteMap writes the header of a map of n pairs, whose keys and values
// follow: %n in RESP3, a flat array of 2n elements in RESP2.
func (w *Writer) WriteMap(n int) {
	if w.proto == 3 {
		w.header('%', n)
		return
	}
	w.WriteArray(2 * n)
}

// WriteSet writes the header of a set of n elements: ~n in RESP3, an
// array in RESP2.
func (w *Writer) WriteSet(n int) {
	if w.proto == 3 {
		w.header('~', n)
		return
	}
	w.WriteArray(n)
}

// WritePush writes the header of an out-of-band message of n elements,
// whose elements follow: >n in RESP3, an array in RESP2 (Pub/Sub's
// subscription replies and messages).
func (w *Writer) WritePush(n int) {
	if w.proto == 3 {
		w.header('>', n)
		return
	}
	w.WriteArray(n)
}

// WriteDouble writes f with millisecond precision, "inf", "-inf" or "nan"
// as Redis spells them: a RESP3 double, or a bulk string in RESP2.
func (w *Writer) WriteDouble(f float64) {
	var num [32]byte
	var b []byte
	switch {
	case math.IsInf(f, 1):
		b = append(num[:0], "inf"...)
	case math.IsInf(f, -1):
		b = append(num[:0], "-inf"...)
	case math.IsNaN(f):
		b = append(num[:0], "nan"...)
	default:
		b = strconv.AppendFloat(num[:0], f, 'f', 3, 64)
	}
	if w.proto == 3 {
		w.out = append(append(append(w.out, ','), b...), '\r', '\n')
		return
	}
	w.WriteBulk(b)
}

// WriteVerbatim writes text as a RESP3 verbatim string of format txt, or
// a bulk string in RESP2, as Redis answers INFO and CLIENT INFO.
func (w *Writer) WriteVerbatim(text string) {
	if w.proto == 3 {
		w.header('=', len(text)+4)
		w.out = append(append(append(w.out, "txt:"...), text...), '\r', '\n')
		return
	}
	w.WriteBulkString(text)
}

// header writes a RESP3 aggregate header: prefix, n, CRLF.
func (w *Writer) header(prefix byte, n int) {
	w.out = append(strconv.AppendInt(append(w.out, prefix), int64(n), 10), '\r', '\n')
}
