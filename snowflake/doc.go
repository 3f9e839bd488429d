// Package snowflake makes time-ordered 64-bit IDs with no store call per ID,
// for the tags created in Snowflake mode: the time in units since an epoch,
// then the server's worker id, then a sequence within the time unit, laid
// out by a Layout (Meituan Leaf's by default: milliseconds since 2010 in
// 41 bits, 10 bits of worker id, 12 bits of sequence). IDs are positive
// int64s and increase on one server.
//
// The package holds no store: the worker id comes from package cluster,
// which leases it from the store and hands it to the Generator (Grant),
// renews its bound (Extend) and takes it away when the lease cannot be
// renewed in time (Revoke). What makes IDs unique:
//
//   - A worker id is leased to one live server at a time, and recycled
//     once its lease has expired, so restarts with new addresses never use
//     them all up.
//   - The lease records a bound, a time up to which its holder may issue;
//     the holder never issues in a later time unit, and raises the bound
//     only through a renewal the store accepted. Whoever holds the id next
//     starts in a time unit after the bound, whatever its own clock says:
//     safe with clocks that disagree between servers, and across a
//     restart with the clock set back, where recording only the last unit
//     issued would not be (the holder may have issued after recording).
//   - A server that cannot renew stops issuing before its lease could pass
//     to another (package cluster revokes the lease on its own monotonic
//     clock, with a margin), and the bound stops it in any case.
//   - A clock behind the last ID issued is waited for up to MaxClockBack (a
//     few milliseconds); beyond that requests are refused with ErrClockBack
//     and counted, and the generator never goes back to a time unit it has
//     left.
//
// INCRBY n takes n consecutive IDs of one time unit, so n is at most the
// sequence's capacity (4,096 by default). As in Leaf, each time unit's
// sequence starts at a random number below 100, so that IDs of a quiet
// server are not all multiples of 4,096.
package snowflake
