package httpapi

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/segment"
)

// TestReadiness: the decision of /readyz, case by case.
func TestReadiness(t *testing.T) {
	down := segment.Stats{StoreError: "dial tcp: refused", AwaySince: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Probes: 3}
	tag := func(name string, init bool, ids int64, secs float64) segment.TagInfo {
		return segment.TagInfo{Name: name, Init: init, RunwayIDs: ids, RunwaySeconds: secs}
	}
	var many []segment.TagInfo
	for i := range 12 {
		many = append(many, tag(fmt.Sprintf("t%02d", i), true, 0, math.Inf(1)))
	}
	for _, tc := range []struct {
		name    string
		st      segment.Stats
		tags    []segment.TagInfo
		ready   bool
		verdict string
		reason  string
	}{
		{"store ok, no tags", segment.Stats{StoreOK: true}, nil, true, "ready", "ok"},
		{"store ok, a dry tag", segment.Stats{StoreOK: true}, []segment.TagInfo{tag("a", true, 0, 0)}, true, "ready", "ok"},
		{"store away, nothing cached", down, nil, false, "not ready",
			"database away since 2026-01-02T03:04:05Z (3 probes): dial tcp: refused; no IDs are cached"},
		{"store away, runway left", down, []segment.TagInfo{tag("a", true, 5, 90), tag("b", true, 7, 30), tag("c", false, 0, math.Inf(1))}, true,
			"partially ready", `database away since 2026-01-02T03:04:05Z (3 probes): dial tcp: refused; serving 12 cached IDs, shortest runway 30s (tag "b"); new tags answer TRYAGAIN`},
		{"store away, idle tags", down, []segment.TagInfo{tag("a", true, 5, math.Inf(1))}, true,
			"partially ready", `shortest runway idle (tag "a")`},
		{"store away, one tag dry", down, []segment.TagInfo{tag("a", true, 5, 90), tag("b", true, 0, 0)}, false,
			"not ready", "1 tag(s) have no cached IDs left: b"},
		{"store away, many dry", down, many, false,
			"not ready", "12 tag(s) have no cached IDs left: t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, and 2 more"},
		{"store away, no error text", segment.Stats{}, nil, false, "not ready", "database away (0 probes); no IDs are cached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readiness(tc.st, func(fn func(segment.TagInfo) bool) {
				for i := len(tc.tags) - 1; i >= 0; i-- { // any order
					if !fn(tc.tags[i]) {
						return
					}
				}
			})
			if got.Ready != tc.ready || got.Verdict != tc.verdict || !strings.Contains(got.Reason, tc.reason) {
				t.Fatalf("got %+v, want ready %v, %s and %q", got, tc.ready, tc.verdict, tc.reason)
			}
			// /readyz's text names no tag and quotes no database error.
			for _, in := range tc.tags {
				if len(in.Name) > 2 && strings.Contains(got.Public, in.Name) {
					t.Errorf("Public %q names tag %q", got.Public, in.Name)
				}
			}
			if tc.st.StoreError != "" && strings.Contains(got.Public, tc.st.StoreError) {
				t.Errorf("Public %q quotes the store's error", got.Public)
			}
		})
	}
}

func TestFormatRunway(t *testing.T) {
	for _, tc := range []struct {
		sec  float64
		want string
	}{
		{math.Inf(1), "idle"},
		{1e300, "idle"},
		{0, "0s"},
		{0.2504, "250ms"},
		{59.6, "1m0s"},
		{3725, "1h2m5s"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := formatRunway(tc.sec); got != tc.want {
				t.Fatalf("formatRunway(%v) = %q, want %q", tc.sec, got, tc.want)
			}
		})
	}
}
