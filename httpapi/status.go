package httpapi

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/segment"
)

// The status page (GET /) and Leaf's /cache table, server-rendered with
// html/template from templates embedded in the binary: no front-end build,
// no script, no external asset. The page reloads itself with a meta
// refresh and reads on a phone (viewport meta; below 720px each tag row
// becomes a card of labelled fields).

//go:embed templates/*.html
var templateFS embed.FS

// parseTemplates parses the embedded templates; a broken one is a bug the
// package's tests catch, so it panics.
func parseTemplates() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"runway": formatRunway,
		"when":   formatWhen,
		"ms":     func(d time.Duration) int64 { return d.Milliseconds() },
	}).ParseFS(templateFS, "templates/*.html"))
}

// statusPage is the data of templates/status.html.
type statusPage struct {
	Version   string
	Now       time.Time
	Uptime    time.Duration
	Refresh   int // seconds
	Ready     readyState
	Store     segment.Stats
	HasServer bool
	Clients   int
	TagCount  int      // every tag this server holds
	Tags      []tagRow // this page's, of those matching Query
	CachedIDs int64    // over every tag
	Issued    int64    // over every tag
	PProf     bool
	Cluster   *clusterView // nil without the cluster registry
	// Replication is the durability check's last result; nil without it.
	Replication *durability.Replication

	Query            string // ?q=: tags whose name contains it
	Matching         int    // tags matching Query
	First, Last      int    // 1-based positions of this page's rows
	Page, Pages      int
	PrevURL, NextURL string // "" on the first / last page
}

// tagRow is one tag of the status page.
type tagRow struct {
	segment.TagInfo
	Slots [2]slotView
}

// slotView is one of a tag's two segments.
type slotView struct {
	Current bool  // the segment IDs come from now
	Loaded  bool  // the slot holds a segment
	Left    int64 // IDs not handed out yet
	segment.SegmentInfo
}

// status: GET / -> the status page. It reads the tags one at a time for
// the totals and only its page's in full, so its memory does not grow
// with the tag count.
func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	st := h.alloc.Stats()
	p := statusPage{
		Version: h.opts.Version,
		Now:     now,
		Uptime:  now.Sub(h.started).Round(time.Second),
		Refresh: max(1, int(h.opts.Refresh/time.Second)),
		Ready:   readiness(st, h.eachTag),
		Store:   st,
		PProf:   h.opts.PProf,
		Cluster: h.clusterView(r.Context()),

		Query: r.URL.Query().Get("q"),
	}
	if h.opts.Replication != nil {
		r := h.opts.Replication()
		p.Replication = &r
	}
	if h.opts.Server != nil {
		p.HasServer = true
		p.Clients = h.opts.Server.ConnectedClients()
	}
	h.eachTag(func(in segment.TagInfo) bool {
		p.TagCount++
		p.CachedIDs += in.RunwayIDs
		p.Issued += in.Issued
		return true
	})
	// The page number first, from the count of matching tags.
	_, matching := h.alloc.TagPage(p.Query, 0, 0)
	p.paginate(matching, h.opts.PageSize, r.URL.Query().Get("page"))
	var match []segment.TagInfo
	if p.Matching > 0 {
		match, _ = h.alloc.TagPage(p.Query, p.First-1, p.Last-p.First+1)
	}
	p.Tags = make([]tagRow, len(match))
	for i, in := range match {
		row := tagRow{TagInfo: in}
		for s, sg := range in.Segments {
			row.Slots[s] = slotView{
				Current:     in.Init && s == in.Pos,
				Loaded:      sg.Step > 0,
				Left:        max(sg.Max-sg.Value, 0),
				SegmentInfo: sg,
			}
		}
		p.Tags[i] = row
	}
	h.render(w, r, "status.html", p)
}

// paginate picks the page asked for (1-based; a bad or too large number
// shows the nearest page) of n matching tags, size per page, and the links
// to its neighbours.
func (p *statusPage) paginate(n, size int, asked string) {
	p.Matching = n
	p.Pages = max(1, (n+size-1)/size)
	page, err := strconv.Atoi(asked)
	if err != nil {
		page = 1
	}
	p.Page = min(max(page, 1), p.Pages)
	if n > 0 {
		p.First = (p.Page-1)*size + 1
		p.Last = min(p.Page*size, n)
	}
	link := func(page int) string {
		v := url.Values{}
		if p.Query != "" {
			v.Set("q", p.Query)
		}
		v.Set("page", strconv.Itoa(page))
		return "?" + v.Encode()
	}
	if p.Page > 1 {
		p.PrevURL = link(p.Page - 1)
	}
	if p.Page < p.Pages {
		p.NextURL = link(p.Page + 1)
	}
}

// render executes a template into a buffer first, so a failure answers a
// clean 500 instead of half a page, and the render slot is free before the
// page is written.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var b bytes.Buffer
	err := h.tmpl.ExecuteTemplate(&b, name, data)
	releaseSlot(r)
	if err != nil {
		h.log.Error("rendering "+name, "err", err)
		writeText(w, http.StatusInternalServerError, "rendering failed\n")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = b.WriteTo(w)
}

// formatWhen prints a time for the page: "never" when zero.
func formatWhen(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
