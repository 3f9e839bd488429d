package httpapi_test

import (
	"context"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
)

// TestMetricsMoveWithTraffic: 100 IDs by INCR and 100 by the Leaf API move
// leaf_ids_issued_total by exactly 100 each, and the command counters by
// the commands sent, errors apart.
func TestMetricsMoveWithTraffic(t *testing.T) {
	e := start(t, setup{})
	c := e.client(t)
	ctx := context.Background()
	redistest.Incr(t, c, "order") // the tag exists before the first scrape

	const issued = `leaf_ids_issued_total{tag="order"}`
	const incrOK = `leaf_commands_total{command="incr",result="ok"}`
	before := metrics(t, e.URL)
	for range 100 {
		redistest.Incr(t, c, "order")
	}
	if err := c.Do(ctx, "INCRBY", "order", "0").Err(); err == nil {
		t.Fatal("INCRBY order 0: no error")
	}
	if err := c.Do(ctx, "NOSUCH").Err(); err == nil {
		t.Fatal("NOSUCH: no error")
	}
	after := metrics(t, e.URL)
	for _, tc := range []struct {
		series string
		delta  float64
	}{
		{issued, 100},
		{incrOK, 100},
		{`leaf_commands_total{command="incr",result="error"}`, 0},
		{`leaf_commands_total{command="incrby",result="error"}`, 1},
		{`leaf_commands_total{command="incrby",result="ok"}`, 0},
		{`leaf_commands_total{command="unknown",result="error"}`, 1},
	} {
		t.Run(tc.series, func(t *testing.T) {
			if got := after[tc.series] - before[tc.series]; got != tc.delta {
				t.Fatalf("moved by %v, want %v (before %v, after %v)", got, tc.delta, before[tc.series], after[tc.series])
			}
		})
	}

	t.Run("leaf api counts", func(t *testing.T) {
		before := metrics(t, e.URL)
		for range 100 {
			leafID(t, e.URL, "order")
		}
		after := metrics(t, e.URL)
		if got := after[issued] - before[issued]; got != 100 {
			t.Fatalf("%s moved by %v, want 100", issued, got)
		}
		if got := after[incrOK] - before[incrOK]; got != 0 {
			t.Fatalf("%s moved by %v for HTTP traffic, want 0", incrOK, got)
		}
	})

	t.Run("gauges and store", func(t *testing.T) {
		m := metrics(t, e.URL)
		for _, tc := range []struct {
			series string
			ok     func(float64) bool
			want   string
		}{
			{`leaf_connected_clients`, func(v float64) bool { return v >= 1 }, ">= 1"},
			{`leaf_segment_loads_total{result="ok",tag="order"}`, func(v float64) bool { return v >= 1 }, ">= 1"},
			{`leaf_segment_loads_total{result="error",tag="order"}`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_segment_step{tag="order"}`, func(v float64) bool { return v >= 1000 }, ">= 1000 (the default step)"},
			{`leaf_runway_ids{tag="order"}`, func(v float64) bool { return v > 0 }, "> 0"},
			{`leaf_runway_seconds{tag="order"}`, func(v float64) bool { return v > 0 || math.IsInf(v, 1) }, "> 0"},
			{`leaf_guard_trips_total{tag="order"}`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_guard_repairs_total{tag="order"}`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_waits_total`, func(v float64) bool { return v >= 1 }, ">= 1 (the first INCR waited for the first load)"},
			{`leaf_store_up`, func(v float64) bool { return v == 1 }, "1"},
			{`leaf_store_away_since_seconds`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_outages_total`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_probes_total`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_refused_total`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_retries_total`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_store_ambiguous_total`, func(v float64) bool { return v == 0 }, "0"},
			{`leaf_tags`, func(v float64) bool { return v == 1 }, "1"},
			{`leaf_store_latency_seconds_count{result="ok"}`, func(v float64) bool { return v >= 1 }, ">= 1"},
			{`leaf_build_info{goversion="` + runtime.Version() + `",revision="0123abc",version="test"}`, func(v float64) bool { return v == 1 }, "1"},
			{`go_goroutines`, func(v float64) bool { return v > 0 }, "> 0"},
			{`process_start_time_seconds`, func(v float64) bool { return v > 0 }, "> 0"},
		} {
			v, ok := m[tc.series]
			if !ok {
				t.Errorf("%s: missing", tc.series)
				continue
			}
			if !tc.ok(v) {
				t.Errorf("%s = %v, want %s", tc.series, v, tc.want)
			}
		}
	})
}

// TestMetricsTagCap: beyond metrics_max_tags, tags are summed under
// tag="_other", and a tag keeps its own series once it has one, so no
// counter goes down when tags come and go.
func TestMetricsTagCap(t *testing.T) {
	e := start(t, setup{maxTags: 2})
	c := e.client(t)
	issue := func(tag string, n int) {
		t.Helper()
		for range n {
			redistest.Incr(t, c, tag)
		}
	}
	issue("b", 1)
	issue("c", 2)
	issue("d", 3)
	issue("e", 4)
	m := metrics(t, e.URL)
	// The first scrape gives the places by name: b and c.
	checkIssued(t, "first", m, []issuedSeries{
		{"b", 1, true},
		{"c", 2, true},
		{"d", 0, false},
		{"e", 0, false},
		{"_other", 7, true},
	})
	// "a" sorts first but comes later: it joins _other, b and c keep theirs.
	issue("a", 5)
	issue("b", 1)
	m = metrics(t, e.URL)
	checkIssued(t, "later", m, []issuedSeries{
		{"a", 0, false},
		{"b", 2, true},
		{"c", 2, true},
		{"_other", 12, true},
	})
	series := 0
	for k := range m {
		if strings.HasPrefix(k, "leaf_runway_ids{") {
			series++
		}
	}
	if series != 3 {
		t.Fatalf("%d leaf_runway_ids series, want 3 (two tags and _other)", series)
	}
}

// issuedSeries is the leaf_ids_issued_total series expected for a tag:
// its value, or has false when the tag must have no series of its own.
type issuedSeries struct {
	tag  string
	want float64
	has  bool
}

// checkIssued asserts each expected series of scrape m, a subtest each.
func checkIssued(t *testing.T, name string, m map[string]float64, want []issuedSeries) {
	t.Helper()
	for _, tc := range want {
		t.Run(name+"/"+tc.tag, func(t *testing.T) {
			v, ok := m[`leaf_ids_issued_total{tag="`+tc.tag+`"}`]
			if ok != tc.has || v != tc.want {
				t.Fatalf("issued{tag=%q} = %v (present %v), want %v (present %v)", tc.tag, v, ok, tc.want, tc.has)
			}
		})
	}
}
