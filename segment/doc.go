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
// # Sizes and order
//
// The step adapts as in Meituan Leaf: a segment that lasted less than
// segment_duration doubles the next one (up to max_step), one that lasted
// more than twice that halves it (never below the table's step).
// INCRBY n takes n consecutive IDs from the current segment when they fit,
// else from the next, else from a dedicated range of exactly n taken from
// the database, after which both cached segments are retired so later IDs
// stay higher.
//
// # Guards
//
// Each tag remembers the highest range end it accepted. A database answer
// below it (a deleted and re-created row, a restored backup) is refused and
// counted; IDs already reserved keep being served. A tag whose row vanishes
// keeps serving what it has reserved. On Close, unused IDs are given back
// top-down with one compare-and-set per segment, so a clean restart resumes
// at the next ID.
package segment
