package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leaf-id/leaf/snowflake"
)

// Leaf's Snowflake API, as Meituan Leaf's leaf-server answers it
// (LeafController, LeafMonitorController, SnowflakeIDGenImpl):
//
//   - /api/snowflake/get/{key}: 200 and the ID as text. Leaf ignores the
//     key, and so does leaf: the ID comes from this server's Snowflake
//     generator, the one every Snowflake tag uses, so IDs are unique
//     across keys and tags, as in Leaf. Errors answer as the segment API's
//     do, with Leaf's codes: -3 for a clock behind the last ID by more
//     than cluster.max_clock_back (Leaf's code for a clock back by more
//     than 5ms), -1 when the server cannot issue at all (no worker id, a
//     lease not renewed in time, shutting down).
//   - /decodeSnowflakeId?snowflakeId=: the ID taken apart, as a JSON object
//     of strings in the order Leaf's HashMap gives them: workerId,
//     sequenceId, then timestamp as "<unix ms>(<yyyy-MM-dd HH:mm:ss.SSS>)"
//     in the server's time zone. Leaf decodes with its layout's constants;
//     leaf with its own layout, which by default is Leaf's. A value that is
//     not a long answers {"errorMsg": ...} as Leaf does; a missing one, 400
//     as Spring does.
//
// Leaf maps both with @RequestMapping and no method: any method works.

// Snowflake is the generator the API serves (*snowflake.Generator).
type Snowflake interface {
	NextN(ctx context.Context, n int64) (int64, error)
	Layout() snowflake.Layout
}

var _ Snowflake = (*snowflake.Generator)(nil)

// Leaf's codes of SnowflakeIDGenImpl.get.
const (
	leafSnowflakeBack = -3 // the clock went back by more than it waits for
)

// leafDecodeError is Leaf's errorMsg for a snowflakeId that is not a long.
const leafDecodeError = "snowflake Id反解析发生异常!"

// snowflakeGet: /api/snowflake/get/{key} -> the next Snowflake ID.
func (h *handler) snowflakeGet(w http.ResponseWriter, r *http.Request) {
	if h.opts.Snowflake == nil {
		writeText(w, http.StatusNotFound, "this server makes no Snowflake IDs\n")
		return
	}
	id, err := h.opts.Snowflake.NextN(r.Context(), 1)
	if err != nil {
		code := leafInitFalse
		if errors.Is(err, snowflake.ErrClockBack) {
			code = leafSnowflakeBack
		}
		h.leafErrorCode(w, r, code, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	_, _ = w.Write(strconv.AppendInt(nil, id, 10))
}

// decodeSnowflake: /decodeSnowflakeId?snowflakeId= -> the ID's parts.
func (h *handler) decodeSnowflake(w http.ResponseWriter, r *http.Request) {
	l := snowflake.DefaultLayout()
	if h.opts.Snowflake != nil {
		l = h.opts.Snowflake.Layout()
	}
	q := r.URL.Query()
	if _, ok := q["snowflakeId"]; !ok {
		h.springError(w, r, http.StatusBadRequest, "Bad Request",
			"org.springframework.web.bind.MissingServletRequestParameterException",
			"Required String parameter 'snowflakeId' is not present")
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	id, ok := parseJavaLong(q.Get("snowflakeId"))
	if !ok {
		_, _ = w.Write(jsonObject("errorMsg", leafDecodeError))
		return
	}
	// Leaf's arithmetic, with the layout's shifts and epoch.
	shift := l.WorkerBits + l.SeqBits
	ts := (id>>shift)*l.Unit.Milliseconds() + l.Epoch.UnixMilli()
	worker := (id >> l.SeqBits) ^ (id >> shift << l.WorkerBits)
	seq := id ^ (id >> l.SeqBits << l.SeqBits)
	at := time.UnixMilli(ts).In(time.Local).Format("2006-01-02 15:04:05.000")
	_, _ = w.Write(jsonObject(
		"workerId", strconv.FormatInt(worker, 10),
		"sequenceId", strconv.FormatInt(seq, 10),
		"timestamp", strconv.FormatInt(ts, 10)+"("+at+")",
	))
}

// parseJavaLong parses s as Java's Long.parseLong does: one optional sign,
// then decimal digits (no underscore, no space), within the int64 range.
func parseJavaLong(s string) (int64, bool) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if len(s)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// jsonObject writes a JSON object of string values, keys in the order
// given (encoding/json sorts a map's).
func jsonObject(kv ...string) []byte {
	b := []byte{'{'}
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, kv[i])
		b = append(b, ':')
		b = appendJSONString(b, kv[i+1])
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string, non-ASCII as it is (UTF-8),
// as Jackson writes it.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&0xf])
		default:
			b = append(b, string(r)...)
		}
	}
	return append(b, '"')
}
