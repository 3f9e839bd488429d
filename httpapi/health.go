package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/leaf-id/leaf/segment"
)

// healthz: 200 "ok" while the process is up (liveness).
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, "ok\n")
}

// readyz: 200 while leaf can hand out IDs to the tags in use, 503 with the
// reason otherwise (readiness, for load balancers). The body is "ok" when
// the database answers, else the verdict and why, without tag names or the
// database's error (which may name its address): /readyz needs no
// password, and the status page has the details. See readiness.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	rd := readiness(h.alloc.Stats(), h.eachTag)
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	body := rd.Public
	if rd.Verdict != verdictReady {
		body = rd.Verdict + ": " + rd.Public
	}
	writeText(w, status, body+"\n")
}

// eachTag reads every tag one at a time (readiness's source).
func (h *handler) eachTag(fn func(segment.TagInfo) bool) { h.alloc.EachTag(false, fn) }

// maxNamed bounds the tag names a readiness reason lists.
const maxNamed = 10

// Readiness verdicts.
const (
	verdictReady   = "ready"
	verdictPartial = "partially ready"
	verdictNot     = "not ready"
)

// readyState is whether leaf can hand out IDs, and why (readyz, the
// status page).
type readyState struct {
	Ready   bool   // /readyz answers 200
	Verdict string // ready, partially ready (200: the database is away), not ready (503)
	Reason  string // "ok" when ready, else what is wrong and what still works
	Public  string // Reason without tag names and the database's error, for /readyz
}

// readiness decides from the allocator's snapshot and its tags, read one
// at a time by each. Leaf is ready while the database is not away. While
// it is away leaf is partially ready, and still answers 200, as long as it
// serves every tag in use from memory: some IDs are cached and no tag that
// loaded a segment has run dry. New tags and dry ones get TRYAGAIN then,
// at once, but every server on that database is in the same state, so
// taking this one out of rotation would only take its cached IDs away from
// the clients. Once a tag in use has run dry (or nothing is cached) it is
// not ready: 503.
func readiness(st segment.Stats, each func(func(segment.TagInfo) bool)) readyState {
	if st.StoreOK {
		return readyState{Ready: true, Verdict: verdictReady, Reason: "ok", Public: "ok"}
	}
	store := "database away"
	if !st.AwaySince.IsZero() {
		store += " since " + st.AwaySince.UTC().Format(time.RFC3339)
	}
	store += fmt.Sprintf(" (%d probes)", st.Probes)
	public := store
	if st.StoreError != "" {
		store += ": " + st.StoreError
	}
	var dry []string
	dryCount := 0
	cached := int64(0)
	shortest, shortestTag := math.Inf(1), ""
	each(func(in segment.TagInfo) bool {
		cached += in.RunwayIDs
		if !in.Init {
			return true
		}
		if in.RunwayIDs == 0 {
			// The first maxNamed names in order, whatever order they come in.
			dryCount++
			if dry = append(dry, in.Name); len(dry) > maxNamed {
				slices.Sort(dry)
				dry = dry[:maxNamed]
			}
			return true
		}
		if in.RunwaySeconds < shortest || shortestTag == "" || in.RunwaySeconds == shortest && in.Name < shortestTag {
			shortest, shortestTag = in.RunwaySeconds, in.Name
		}
		return true
	})
	slices.Sort(dry)
	switch {
	case dryCount > 0:
		return readyState{Verdict: verdictNot,
			Reason: fmt.Sprintf("%s; %d tag(s) have no cached IDs left: %s", store, dryCount, nameList(dry, dryCount)),
			Public: fmt.Sprintf("%s; %d tag(s) have no cached IDs left", public, dryCount)}
	case cached == 0:
		return readyState{Verdict: verdictNot, Reason: store + "; no IDs are cached", Public: public + "; no IDs are cached"}
	default:
		return readyState{Ready: true, Verdict: verdictPartial,
			Reason: fmt.Sprintf("%s; serving %d cached IDs, shortest runway %s (tag %q); new tags answer TRYAGAIN until it is back",
				store, cached, formatRunway(shortest), shortestTag),
			Public: fmt.Sprintf("%s; serving %d cached IDs, shortest runway %s; new tags answer TRYAGAIN until it is back",
				public, cached, formatRunway(shortest))}
	}
}

// nameList joins names, the first of total (at most maxNamed).
func nameList(names []string, total int) string {
	if total <= len(names) {
		return strings.Join(names, ", ")
	}
	return strings.Join(names, ", ") + fmt.Sprintf(", and %d more", total-len(names))
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
