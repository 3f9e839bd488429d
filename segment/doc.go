// Package segment is leaf's allocator: it hands out IDs from ranges
// ("segments") reserved in the database, the Leaf-segment design.
//
// # The double buffer
//
// Every tag holds two segments. The current one serves IDs with a single
// atomic add: no lock, no allocation, no database. Once prefetch_at (10%) of
// it is used, one background load reserves the next segment, so by the time
// the current one runs out the next is usually ready and the switch costs a
// pointer swap under the tag's mutex. Only when both are empty does a
// request wait, and then on the load already in flight (never a spin, never
// a sleep), up to load_timeout.
//
// Loads run on a fixed pool of workers fed by a queue that holds each tag at
// most once, so goroutines and database connections stay bounded whatever
// the number of tags, and at most one load per tag is ever in flight.
//
// # Many tags at once
//
// A worker takes every load queued when it looks, up to MaxLoadBatch, and
// takes their ranges in one store round trip (persist.Store.TakeBatch: one
// transaction, one synced commit): the first touches of many tags, or the
// first loads after a restart, cost a few round trips instead of one
// each. Each tag gets its own answer; one tag's failure is its own.
// Prepare lets a caller that is about to serve many tags (a pipeline)
// queue their lookups and loads before it waits for the first; the lookup
// of an unknown name it starts is the tag's first load, which creates the
// row in the same round trip when auto-create is on.
//
// # Sizes and order
//
// The step adapts as in Meituan Leaf: a segment that lasted less than
// segment_duration doubles the next one (up to max_step), one that lasted
// more than twice that halves it (never below the table's step). Beyond
// Leaf, a load doubles it as many times as needed at once when the part
// of a segment after its prefetch point would not last twice the time a
// load takes at the rate the current segment is used (step.go): a burst
// on a slow database meets one or two loads, not one per doubling.
// INCRBY n takes n consecutive IDs from the current segment when they fit,
// else from the next, else from a dedicated range of exactly n taken from
// the database, after which both cached segments are retired so later IDs
// stay higher.
//
// # Callers that must not wait
//
// Known and TryNextN answer from memory or not at all: the tag
// if this allocator holds it, n IDs if they fit in the current segment.
// They never call the database nor wait, so a caller that serves many
// clients on one goroutine (leaf's event loops) uses them first and calls
// Lookup and NextN elsewhere only when they say no.
//
// # Guards
//
// Each tag remembers the highest range end it accepted. A database answer
// below it (a deleted and re-created row, a restored backup) is refused and
// counted; IDs already reserved keep being served. A tag whose row vanishes
// keeps serving what it has reserved. On Close, unused IDs are given back
// top-down with one compare-and-set per segment, so a clean restart resumes
// at the next ID.
//
// # A database that is away
//
// The database's health is kept per store, not per tag: a hung database
// hangs every tag, so once one call has failed, a request that needs the
// database answers at once instead of spending its own load_timeout on it.
// The store is away from the first failed call (a load, a lookup, a tag
// sync; not an answer about one tag, such as a missing row or a range the
// guard refuses) until one succeeds. While it is away:
//
//   - cached IDs are served as always and prefetches start as always, but
//     no load reaches the database: the tag is parked until it is back;
//   - a request that needs the database (no cached IDs, a dedicated INCRBY
//     range, an unknown tag) fails at once with ErrStoreAway, and requests
//     already waiting on a load are released with it;
//   - one probe at a time tests the database, RetryBackoff after the
//     failure, then at intervals doubling up to MaxRetryBackoff: the load
//     of a parked tag (a write, as every load), else the lookup of a name
//     refused meanwhile, else a read of the tag list.
//
// The first call that succeeds, probe or not, ends the episode: requests
// go to the database again, and the parked tags are reloaded in the
// background, behind the loads requests wait for, on at most half the
// loaders. A failure while the database answers other calls (a slow
// database, one row locked) is that call's failure, not an outage.
//
// # Other modes, and other servers
//
// A tag created in Snowflake mode (persist.Tag.Mode) has no segments: its
// IDs come from the Generator that Options.Modes makes for it, with no
// store call, behind the same Next, NextN and TryNextN. Floors and steps
// apply to segment tags only.
//
// Package cluster keeps the servers sharing a store in step: it applies the
// floors and steps set through other servers (SkipTo, ApplyStep; a range
// on its way meanwhile that is not above a floor is refused, as for a
// local floor, on every path: a load, a dedicated INCRBY range, the first
// load of a name not yet known), lets the segment tags serve under its
// lease (Serve), which the request path checks (Admit, lease.go: a floor
// may have been set meanwhile that it has not read), drops every cached ID
// when it missed changes it can no longer read (DropCached), and guards
// the give-backs of Close (Fence), which never go below a floor it has not
// applied.
//
// # Where the code is
//
// Each file holds one flow, or one type: allocator.go the options, the
// start and the tag sync, and the entry points by name; tag.go a tag
// serving IDs; loader.go the load of a segment, run by the workers of
// pool.go; lookup.go the names the tag map does not hold; health.go a
// database that is away; lease.go and cluster.go what package cluster asks
// of the allocator; shutdown.go Close and its give-back; step.go the
// adaptive step; segment.go and tagmap.go a range and the map of tags;
// admin.go, create.go, mode.go and namespace.go the operator's changes,
// tag creation, Snowflake tags, tag names and databases; info.go and
// page.go what the allocator reports.
package segment
