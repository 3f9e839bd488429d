package segment

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// SegmentInfo describes one of a tag's two segments, as Leaf's /cache shows
// it: Value is the next ID it would hand out, Max its exclusive end, Step
// its size. A slot with no segment is all zero.
type SegmentInfo struct {
	Value, Max, Step int64
}

// TagInfo is a snapshot of one tag's state.
type TagInfo struct {
	Name      string
	Mode      string         // "" for segments, persist.ModeSnowflake
	Init      bool           // a first segment was loaded
	Pos       int            // slot of the current segment in Segments
	NextReady bool           // the other slot holds a loaded segment
	Loading   bool           // a load is queued or running
	Step      int64          // adaptive step of the last load
	MinStep   int64          // the table's step
	Segments  [2]SegmentInfo // indexed by slot
	Loads     int64          // successful loads
	Failures  int64          // failed loads and dedicated takes
	LastLoad  time.Time      // zero before the first load
	LastError string         // of the last failure, "" when none
	Issued    int64          // IDs handed out by this process
	// Skipped counts the cached IDs a floor (LEAF.FLOOR, SET) skipped:
	// reserved, never handed out, not in Issued.
	Skipped int64
	// Floor is the highest floor applied on this server (LEAF.FLOOR,
	// SET, or read from another server): no ID at or below it is served.
	Floor int64
	// RunwayIDs is how many IDs are cached (rest of the current segment
	// plus the next); RunwaySeconds how long they last at the recent rate,
	// +Inf when the tag is idle.
	RunwayIDs     int64
	RunwaySeconds float64
	GuardHigh     int64 // IDs below this are reserved; the database must answer above
	GuardTrips    int64 // ranges refused because the database went below GuardHigh
	GuardRepairs  int64 // ranges the store's persistent guard (leaf_guard) moved up above IDs handed out
	Vanished      bool  // the row was missing at the last sync or load
	// Retries counts the times the database rolled a Take of the tag back
	// and it ran again (serialization failures, deadlocks, lock waits);
	// Ambiguous the Takes whose commit was left unknown, never served.
	Retries, Ambiguous int64
}

// Info returns the state of a known tag; ErrUnknownTag when this server has
// not seen it.
func (a *Allocator) Info(name string) (TagInfo, error) {
	t := a.tags.get(name)
	if t == nil {
		return TagInfo{}, fmt.Errorf("%w: %q", ErrUnknownTag, name)
	}
	return t.Info(), nil
}

// Tags returns the state of every known tag, sorted by name.
func (a *Allocator) Tags() []TagInfo {
	tags := a.tags.all()
	out := make([]TagInfo, len(tags))
	for i, t := range tags {
		out[i] = t.Info()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Info returns a snapshot of the tag's state.
func (t *Tag) Info() TagInfo {
	if t.gen != nil {
		// No segments (so no runway: not Init, as a tag that never
		// loaded one); the generator makes the IDs.
		return TagInfo{Name: t.name, Mode: t.mode, Issued: t.genIssued.Load(),
			RunwaySeconds: math.Inf(1), Vanished: t.vanished.Load()}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.a.nowNanos()
	cur := t.cur.Load()
	in := TagInfo{
		Name:         t.name,
		Init:         t.init,
		Pos:          t.pos,
		NextReady:    t.next != nil,
		Loading:      t.inflight != nil,
		Step:         t.step,
		MinStep:      t.minStep,
		Loads:        t.loads,
		Failures:     t.loadFailures,
		GuardHigh:    t.high,
		GuardTrips:   t.guardTrips,
		GuardRepairs: t.guardRepairs,
		Retries:      t.retries,
		Ambiguous:    t.ambiguous,
		Vanished:     t.vanished.Load(),
	}
	if t.lastLoad > 0 {
		in.LastLoad = time.Unix(0, t.lastLoad)
	}
	if t.lastErr != nil {
		in.LastError = t.lastErr.Error()
	}
	used := int64(0)
	if t.init && cur.size > 0 {
		first := cur.firstUnissued()
		used = cur.issued()
		in.Segments[t.pos] = SegmentInfo{Value: first, Max: cur.end(), Step: cur.size}
		in.RunwayIDs = cur.end() - first
	}
	if n := t.next; n != nil {
		in.Segments[1-t.pos] = SegmentInfo{Value: n.firstUnissued(), Max: n.end(), Step: n.size}
		in.RunwayIDs += n.size
	}
	in.Issued = t.issued + used
	in.Skipped = t.skipped
	in.Floor = t.floor
	r := t.prevRate
	if used > 0 && t.switchedAt > 0 {
		r = rate(used, now-t.switchedAt)
	}
	in.RunwaySeconds = math.Inf(1)
	if r > 0 {
		in.RunwaySeconds = float64(in.RunwayIDs) / r
	}
	return in
}

// Stats are the allocator's totals.
type Stats struct {
	Tags  int
	Waits int64 // requests that waited on the database
	// WaitedLoads counts the store calls at least one of those requests
	// waited for: segment loads (however many requests waited for one)
	// and dedicated ranges (INCRBY beyond a segment). It is how often the
	// database's latency reached clients, whatever their number.
	WaitedLoads  int64
	LoadFailures int64
	GuardTrips   int64
	GuardRepairs int64 // ranges the store's persistent guard repaired
	Retries      int64 // Takes the database rolled back and that ran again
	Ambiguous    int64 // Takes whose commit was left unknown (never served)
	QueuedLoads  int
	// LoadRounds is the store round trips that took segments: a round
	// trip takes every load queued at once (group commit), so under many
	// first touches it is far below the loads.
	LoadRounds int64
	GuardTable bool // the store keeps the persistent guard (leaf_guard)
	// StoreOK is false while the store is away: from a failed database
	// call until one succeeds. Requests that need the database then
	// answer at once (Refused) while one probe at a time tests it.
	StoreOK      bool
	AwaySince    time.Time // start of the current episode; zero when StoreOK
	Outages      int64     // episodes of the store being away
	Probes       int64     // calls made to learn whether the store is back
	Refused      int64     // requests answered at once because the store was away
	StoreError   string    // the last database error, "" when none
	StoreErrorAt time.Time // when it happened
}

// Stats returns the allocator's totals.
func (a *Allocator) Stats() Stats {
	s := Stats{
		Tags:         a.tags.len(),
		Waits:        a.waits.Load(),
		WaitedLoads:  a.waitedLoads.Load(),
		LoadFailures: a.loadFailures.Load(),
		GuardTrips:   a.guardTrips.Load(),
		GuardRepairs: a.guardRepairs.Load(),
		Retries:      a.retries.Load(),
		Ambiguous:    a.ambiguous.Load(),
		QueuedLoads:  a.pool.pending(),
		LoadRounds:   a.loadRounds.Load(),
		Outages:      a.h.outages.Load(),
		Probes:       a.h.probes.Load(),
		Refused:      a.h.refused.Load(),
	}
	st := a.h.state.Load()
	s.StoreOK, s.AwaySince = !st.away, st.since
	if g, ok := a.store.(persist.Guarded); ok {
		s.GuardTable = g.GuardEnabled()
	}
	if e := a.h.lastErr.Load(); e != nil {
		s.StoreError = e.err.Error()
		s.StoreErrorAt = e.at
	}
	return s
}

// rate is IDs per second over a window of nanos, taken as at least a second
// so that a burst right after a switch does not read as a sustained rate.
func rate(ids, nanos int64) float64 {
	return float64(ids) / max(float64(nanos)/1e9, 1)
}
