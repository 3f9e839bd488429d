package server

import (
	"math"
	"strconv"

	"github.com/tidwall/redcon"
)

// redcon writes RESP2 only. These helpers write the RESP3 types leaf uses
// raw when the connection switched with HELLO 3, and their RESP2 forms
// otherwise, as Redis does.

// header writes a RESP aggregate header: prefix, n, CRLF.
func (c *client) header(conn redcon.Conn, prefix byte, n int) {
	b := append(c.scratch[:0], prefix)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\r', '\n')
	conn.WriteRaw(b)
}

// writeMap writes the header of a map of n pairs: %n in RESP3, a flat array
// of 2n in RESP2.
func (c *client) writeMap(conn redcon.Conn, n int) {
	if c.resp == 3 {
		c.header(conn, '%', n)
		return
	}
	conn.WriteArray(2 * n)
}

// writeSet writes the header of a set: ~n in RESP3, an array in RESP2.
func (c *client) writeSet(conn redcon.Conn, n int) {
	if c.resp == 3 {
		c.header(conn, '~', n)
		return
	}
	conn.WriteArray(n)
}

// writeNull writes nil: _ in RESP3, the null bulk string in RESP2.
func (c *client) writeNull(conn redcon.Conn) {
	if c.resp == 3 {
		conn.WriteRaw([]byte("_\r\n"))
		return
	}
	conn.WriteNull()
}

// writeDouble writes f: a RESP3 double, or a bulk string in RESP2, with
// millisecond precision and "inf" for +Inf as Redis spells it.
func (c *client) writeDouble(conn redcon.Conn, f float64) {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	case math.IsNaN(f):
		s = "nan"
	default:
		s = strconv.FormatFloat(f, 'f', 3, 64)
	}
	if c.resp == 3 {
		conn.WriteRaw([]byte("," + s + "\r\n"))
		return
	}
	conn.WriteBulkString(s)
}

// writeBool writes b as the integer 1 or 0 in both protocols, so clients
// read the same type whichever they speak.
func writeBool(conn redcon.Conn, b bool) {
	if b {
		conn.WriteInt(1)
		return
	}
	conn.WriteInt(0)
}

// writeVerbatim writes text as a RESP3 verbatim string (=len\r\ntxt:...), or
// a bulk string in RESP2, as Redis replies to INFO and CLIENT INFO.
func (c *client) writeVerbatim(conn redcon.Conn, text string) {
	if c.resp == 3 {
		c.header(conn, '=', len(text)+4)
		conn.WriteRaw([]byte("txt:" + text + "\r\n"))
		return
	}
	conn.WriteBulkString(text)
}
