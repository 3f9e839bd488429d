package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
)

// TestLeafTags: one entry per tag, sorted by name, in both protocols.
func TestLeafTags(t *testing.T) {
	so := segment.DefaultOptions()
	so.DefaultStep = 10
	so.PrefetchAt = 1 // no background load: the state is exact
	in := servertest.Start(t, servertest.Options{Segment: &so})
	ctx := context.Background()
	forEachProtocol(t, func(t *testing.T, proto int) {
		c := newClient(t, in.Addr, proto, "")
		if proto == 3 { // first run: make the tags
			redistest.Incr(t, c, "b")
			if err := c.IncrBy(ctx, "a", 4).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.Do(ctx, "LEAF.TAGS").Slice()
		if err != nil {
			t.Fatal(err)
		}
		// [tag, step, runway_ids, runway_seconds, issued, loads, failures, init, next_ready, vanished]
		want := []string{
			"[a 10 6 %s 4 1 0 1 0 0]",
			"[b 10 9 %s 1 1 0 1 0 0]",
		}
		if len(got) != len(want) {
			t.Fatalf("%d entries %v, want %d", len(got), got, len(want))
		}
		for i, e := range got {
			row, ok := e.([]any)
			if !ok || len(row) != 10 {
				t.Fatalf("entry %d: %#v", i, e)
			}
			// runway_seconds depends on the clock: a double in RESP3, a
			// bulk string in RESP2.
			var secs string
			switch v := row[3].(type) {
			case float64:
				secs = "S"
			case string:
				if v == "inf" || strings.Contains(v, ".") {
					secs = "S"
				}
			}
			if s := fmt.Sprint(row); s != fmt.Sprintf(want[i], fmt.Sprint(row[3])) || secs != "S" {
				t.Errorf("entry %d: %s, want %s", i, s, fmt.Sprintf(want[i], "<seconds>"))
			}
		}
	})
	t.Run("arity", func(t *testing.T) {
		c := newClient(t, in.Addr, 2, "")
		wantErr(t, c, "ERR wrong number of arguments for 'leaf.tags' command", "LEAF.TAGS", "x")
	})
}

// TestInfoTagSummary: INFO's Leaf section sums the tags, and Keyspace has
// Redis's db0 line (keys are the tags) and leaf's summary.
func TestInfoTagSummary(t *testing.T) {
	so := segment.DefaultOptions()
	so.DefaultStep = 10
	so.PrefetchAt = 1
	in := servertest.Start(t, servertest.Options{Segment: &so})
	c := newClient(t, in.Addr, 2, "")
	ctx := context.Background()

	empty, err := c.Info(ctx, "keyspace").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(empty, "db0:") || !strings.Contains(empty, "leaf:tags=0,cached_ids=0,min_runway_seconds=inf\r\n") {
		t.Fatalf("INFO keyspace without tags:\n%s", empty)
	}

	redistest.Incr(t, c, "a")
	redistest.Incr(t, c, "b")
	redistest.Incr(t, c, "b")
	info, err := c.Info(ctx, "leaf", "keyspace").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Leaf\r\n",
		"tags:2\r\n",
		"tags_in_use:2\r\n",
		"ids_issued:3\r\n",
		"ids_skipped:0\r\n",
		"segment_loads:2\r\n",
		"cached_ids:17\r\n",
		"min_runway_seconds:",
		"tags_without_runway:0\r\n",
		"vanished_tags:0\r\n",
		"# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\nleaf:tags=2,cached_ids=17,min_runway_seconds=",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(info)
	}
}
