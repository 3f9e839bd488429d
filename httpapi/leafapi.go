package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/segment"
)

// Meituan Leaf's HTTP API, so that Leaf's callers switch without a change.
// What a Leaf caller sees, from Leaf's leaf-server (LeafController,
// SegmentIDGenImpl, exception/*.java, on Spring Boot 1.5):
//
//   - success: 200, the ID as text (text/plain;charset=UTF-8), nothing else;
//   - an error: SegmentIDGenImpl.get returns Result{id, EXCEPTION} with
//     id -1 (cache not initialised), -2 (key not in the table) or -3 (both
//     segments empty: the database did not deliver); LeafController throws
//     LeafServerException(result.toString()), annotated with
//     @ResponseStatus(INTERNAL_SERVER_ERROR), and Spring Boot's error
//     controller answers 500 with its JSON: timestamp (epoch ms), status,
//     error, exception, message ("Result{id=-2, status=EXCEPTION}"), path.
//
// leaf answers the same status and body; its own reason is in the header
// X-Leaf-Error. Its errors map onto Leaf's codes as the situations match:
// an unknown tag (auto-create off), an invalid name or a tag whose row was
// deleted is -2 (Leaf drops deleted tags from its cache), a server shutting
// down is -1, and no cached IDs with the database unavailable, or any other
// failure to get a segment, is -3.
//
// Leaf's Snowflake API is in snowflake.go.

// Leaf's exception codes (SegmentIDGenImpl).
const (
	leafInitFalse   = -1 // EXCEPTION_ID_IDCACHE_INIT_FALSE
	leafKeyNotExist = -2 // EXCEPTION_ID_KEY_NOT_EXISTS
	leafTwoSegsNull = -3 // EXCEPTION_ID_TWO_SEGMENTS_ARE_NULL
)

// leafException is the class Spring Boot names in the error body.
const leafException = "com.sankuai.inf.leaf.server.exception.LeafServerException"

// springError is Spring Boot 1.5's error body, fields in its order.
type springError struct {
	Timestamp int64  `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Exception string `json:"exception"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

// segmentGet: /api/segment/get/{key} -> the tag's next ID, from the same
// allocator as INCR.
func (h *handler) segmentGet(w http.ResponseWriter, r *http.Request) {
	id, err := h.alloc.Next(h.cr.context(r), segment.DBName(0, r.PathValue("key")))
	if err != nil {
		h.leafError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	_, _ = w.Write(strconv.AppendInt(nil, id, 10))
}

// leafCode is Leaf's exception code for an allocator error.
func leafCode(err error) int {
	switch {
	case errors.Is(err, segment.ErrUnknownTag), errors.Is(err, segment.ErrCreateRefused),
		errors.Is(err, segment.ErrBadTag), errors.Is(err, segment.ErrTagGone):
		return leafKeyNotExist
	case errors.Is(err, segment.ErrClosed):
		return leafInitFalse
	default:
		return leafTwoSegsNull
	}
}

// leafError answers err as Leaf does: 500 and Spring Boot's JSON.
func (h *handler) leafError(w http.ResponseWriter, r *http.Request, err error) {
	h.leafErrorCode(w, r, leafCode(err), err)
}

// leafErrorCode answers Leaf's exception with code, leaf's reason err in
// the X-Leaf-Error header.
func (h *handler) leafErrorCode(w http.ResponseWriter, r *http.Request, code int, err error) {
	w.Header().Set("X-Leaf-Error", headerSafe(err.Error()))
	h.springError(w, r, http.StatusInternalServerError, "Internal Server Error", leafException,
		"Result{id="+strconv.Itoa(code)+", status=EXCEPTION}")
}

// springError answers Spring Boot 1.5's error body.
func (h *handler) springError(w http.ResponseWriter, r *http.Request, status int, reason, exception, message string) {
	body, _ := json.Marshal(springError{
		Timestamp: h.now().UnixMilli(),
		Status:    status,
		Error:     reason,
		Exception: exception,
		Message:   message,
		Path:      r.URL.EscapedPath(), // as the request wrote it, as Spring does
	})
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// headerSafe keeps a header value on one line of printable characters.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// segmentBufferView is one tag of Leaf's /cache, named as Leaf's
// SegmentBufferView serialises: value is the next ID a segment hands out,
// max its exclusive end; an empty slot is all zero.
type segmentBufferView struct {
	Key       string `json:"key"`
	Value0    int64  `json:"value0"`
	Step0     int64  `json:"step0"`
	Max0      int64  `json:"max0"`
	Value1    int64  `json:"value1"`
	Step1     int64  `json:"step1"`
	Max1      int64  `json:"max1"`
	Pos       int    `json:"pos"`
	NextReady bool   `json:"nextReady"`
	InitOk    bool   `json:"initOk"`
}

func bufferView(in segment.TagInfo) segmentBufferView {
	return segmentBufferView{
		Key:    in.Name,
		Value0: in.Segments[0].Value, Step0: in.Segments[0].Step, Max0: in.Segments[0].Max,
		Value1: in.Segments[1].Value, Step1: in.Segments[1].Step, Max1: in.Segments[1].Max,
		Pos: in.Pos, NextReady: in.NextReady, InitOk: in.Init,
	}
}

// cache: GET /cache -> Leaf's monitor of the tags' SegmentBuffers. Leaf
// renders it as an HTML table (segment.ftlh); browsers get the same table
// here, other clients a JSON object of the same fields keyed by tag. Leaf
// shows every tag at once; leaf shows a page of them, sorted by name
// (?page=, 1-based; ?q= keeps the tags whose name contains it), so one
// request holds the same memory with a million tags as with ten. The
// headers say where the page is: X-Total-Count (matching tags), X-Page,
// X-Pages, and a Link to the next and previous pages.
func (h *handler) cache(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	size := h.opts.CachePageSize
	_, matching := h.alloc.TagPage(q.Get("q"), 0, 0)
	pages := max(1, (matching+size-1)/size)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil {
		page = 1
	}
	page = min(max(page, 1), pages)
	tags, _ := h.alloc.TagPage(q.Get("q"), (page-1)*size, size)
	views := make([]segmentBufferView, len(tags))
	for i, in := range tags {
		views[i] = bufferView(in)
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(matching))
	w.Header().Set("X-Page", strconv.Itoa(page))
	w.Header().Set("X-Pages", strconv.Itoa(pages))
	link := func(p int) string {
		v := url.Values{}
		if s := q.Get("q"); s != "" {
			v.Set("q", s)
		}
		v.Set("page", strconv.Itoa(p))
		return "/cache?" + v.Encode()
	}
	var links []string
	view := cachePage{Tags: views, Page: page, Pages: pages, Total: matching}
	if page < pages {
		view.Next = link(page + 1)
		links = append(links, "<"+view.Next+`>; rel="next"`)
	}
	if page > 1 {
		view.Prev = link(page - 1)
		links = append(links, "<"+view.Prev+`>; rel="prev"`)
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	if wantsHTML(r) {
		h.render(w, r, "cache.html", view)
		return
	}
	byKey := make(map[string]segmentBufferView, len(views))
	for _, v := range views {
		byKey[v.Key] = v
	}
	body, err := json.Marshal(byKey)
	releaseSlot(r)
	if err != nil {
		h.log.Error("cache: encoding", "err", err)
		writeText(w, http.StatusInternalServerError, "encoding failed\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// cachePage is the data of templates/cache.html.
type cachePage struct {
	Tags               []segmentBufferView
	Page, Pages, Total int
	Prev, Next         string // links, "" on the first / last page
}

// wantsHTML reports whether the client asks for HTML (a browser).
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
