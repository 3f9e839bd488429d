package server

import (
	"fmt"
	"math"
	"strconv"

	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// LEAF.TAGS: every tag this server knows with its state, and the tag
// summary INFO prints in its Leaf and Keyspace sections.

func registerTags(t table) {
	t.add(&command{
		name: "leaf.tags", arity: 1, fn: cmdLeafTags,
		flags: []string{"readonly", "loading", "stale"}, acl: []string{"read", "slow"},
		summary: "Lists every tag with its step, runway, IDs issued and loads",
		since:   "1.0.0", group: "server", complex: "O(N) where N is the number of tags",
	})
}

// leafTagsLen is the number of elements of each LEAF.TAGS entry.
const leafTagsLen = 10

// cmdLeafTags: LEAF.TAGS -> one array per tag known to this server, sorted
// by name: [tag, step, runway_ids, runway_seconds, issued, loads, failures,
// init, next_ready, vanished]. runway_seconds is a double
// (a bulk string in RESP2), inf when the tag is idle; the last three are
// 0/1 integers. LEAF.INFO tag has the full state of one tag.
func cmdLeafTags(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	tags := s.alloc.Tags()
	conn.WriteArray(len(tags))
	for _, in := range tags {
		conn.WriteArray(leafTagsLen)
		conn.WriteBulkString(in.Name)
		conn.WriteInt64(in.Step)
		conn.WriteInt64(in.RunwayIDs)
		conn.WriteDouble(in.RunwaySeconds)
		conn.WriteInt64(in.Issued)
		conn.WriteInt64(in.Loads)
		conn.WriteInt64(in.Failures)
		writeBool(conn, in.Init)
		writeBool(conn, in.NextReady)
		writeBool(conn, in.Vanished)
	}
}

// tagSummary sums the state of every tag, for INFO.
type tagSummary struct {
	tags        int
	issued      int64   // IDs handed out by this process
	skipped     int64   // cached IDs floors skipped, never handed out
	loads       int64   // segments loaded
	cachedIDs   int64   // IDs cached in memory (runway_ids of every tag)
	minRunway   float64 // seconds, over the tags that loaded a segment; +Inf when none is in use
	dry         int     // tags that loaded a segment and have no cached ID left
	vanished    int     // tags whose row is gone from the table
	initialized int     // tags that loaded a segment
}

// summarize reads every tag's state once.
func summarize(tags []segment.TagInfo) tagSummary {
	sum := tagSummary{tags: len(tags), minRunway: math.Inf(1)}
	for _, in := range tags {
		sum.issued += in.Issued
		sum.skipped += in.Skipped
		sum.loads += in.Loads
		sum.cachedIDs += in.RunwayIDs
		if in.Vanished {
			sum.vanished++
		}
		if !in.Init {
			continue
		}
		sum.initialized++
		if in.RunwayIDs == 0 {
			sum.dry++
		}
		sum.minRunway = min(sum.minRunway, in.RunwaySeconds)
	}
	return sum
}

// formatSeconds prints runway seconds as INFO does: milliseconds, "inf"
// when idle.
func formatSeconds(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	return strconv.FormatFloat(f, 'f', 3, 64)
}

// infoLeafTags writes the tag totals of INFO's Leaf section.
func (s *Server) infoLeafTags(line func(k string, v any)) {
	sum := summarize(s.alloc.Tags())
	line("tags_in_use", sum.initialized)
	line("ids_issued", sum.issued)
	line("ids_skipped", sum.skipped)
	line("segment_loads", sum.loads)
	line("cached_ids", sum.cachedIDs)
	line("min_runway_seconds", formatSeconds(sum.minRunway))
	line("tags_without_runway", sum.dry)
	line("vanished_tags", sum.vanished)
}

// infoKeyspace writes INFO's Keyspace section: Redis's dbN lines, where
// the keys are the tags (tools that count keys see the tags; Redis omits
// a database without keys), and leaf's summary on a line of its own
// (keeping the db lines in Redis's exact shape for the tools that parse
// them).
func (s *Server) infoKeyspace(line func(k string, v any)) {
	sum := summarize(s.alloc.Tags())
	for _, db := range s.keyspaceDBs(sum.tags) {
		line("db"+strconv.Itoa(db.db), fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", db.keys))
	}
	line("leaf", fmt.Sprintf("tags=%d,cached_ids=%d,min_runway_seconds=%s",
		sum.tags, sum.cachedIDs, formatSeconds(sum.minRunway)))
}
