package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/leaf-id/leaf/segment"
)

// healthz: 200 "ok" while the process is up (liveness).
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, "ok\n")
}

// readyz: 200 while leaf can hand out IDs, 503 with the reason otherwise
// (readiness, for load balancers). See readiness.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	rd := readiness(h.alloc.Stats(), h.alloc.Tags())
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	writeText(w, status, rd.Reason+"\n")
}

// maxNamed bounds the tag names a readiness reason lists.
const maxNamed = 10

// readyState is whether leaf can hand out IDs, and why (readyz, the
// status page).
type readyState struct {
	Ready  bool
	Reason string // "ok" when the store answers, else what is wrong or what still works
}

// readiness decides from the allocator's snapshot. Leaf is ready when the
// last database call succeeded, or, with the database away, while it still
// serves from memory: some IDs are cached and no tag in use (one that
// loaded a segment) has run dry. The store's state is the allocator's view:
// the last load, lookup or sync (every segment.sync_interval) that reached it.
func readiness(st segment.Stats, tags []segment.TagInfo) readyState {
	if st.StoreOK {
		return readyState{Ready: true, Reason: "ok"}
	}
	store := "store unavailable"
	if st.StoreError != "" {
		store += fmt.Sprintf(" since %s: %s", st.StoreErrorAt.UTC().Format(time.RFC3339), st.StoreError)
	}
	var dry []string
	cached := int64(0)
	shortest, shortestTag := math.Inf(1), ""
	for _, in := range tags {
		cached += in.RunwayIDs
		if !in.Init {
			continue
		}
		if in.RunwayIDs == 0 {
			dry = append(dry, in.Name)
			continue
		}
		if in.RunwaySeconds < shortest || shortestTag == "" {
			shortest, shortestTag = in.RunwaySeconds, in.Name
		}
	}
	switch {
	case len(dry) > 0:
		return readyState{Reason: fmt.Sprintf("not ready: %s; %d tag(s) have no cached IDs left: %s",
			store, len(dry), nameList(dry))}
	case cached == 0:
		return readyState{Reason: fmt.Sprintf("not ready: %s; no IDs are cached", store)}
	default:
		return readyState{Ready: true, Reason: fmt.Sprintf("ok: serving %d cached IDs; shortest runway %s (tag %q); %s",
			cached, formatRunway(shortest), shortestTag, store)}
	}
}

// nameList joins names, the first maxNamed of them.
func nameList(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(", and %d more", len(names)-maxNamed)
}

// formatRunway prints runway seconds for people: "idle" for +Inf, else a
// duration rounded to the second.
func formatRunway(sec float64) string {
	if math.IsInf(sec, 1) || sec > float64(math.MaxInt64/int64(time.Second)) {
		return "idle"
	}
	d := time.Duration(sec * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
