// Package cluster keeps the leaf servers that share one store in step,
// through the store's registry (persist.Registry): it registers this
// server with a lease and renews it with a heartbeat, applies the floors
// and steps set through other servers, has every live server confirm a
// change before the command that made it answers, and leases the worker id
// of the Snowflake generator. No other coordinator is needed: every
// backend keeps the registry in its own tables or keys.
//
// # Floors everywhere
//
// After LEAF.FLOOR or SET answers OK, no live server hands out an ID at or
// below the floor. The command raises max_id in the store, applies the
// floor on its own server, appends the change to the store's log
// (Announce), and waits up to cluster.ack_timeout until every live server
// has confirmed it; otherwise it answers an error naming the servers that
// did not (the floor is set in the store all the same). Each server reads
// the log at every heartbeat, right after renewing its lease, skips its
// cached IDs at or below a new floor (a range loading meanwhile that ends
// below it is refused), and confirms with its next renewal, at once.
//
// A server whose lease expired is not waited for, so it must not serve
// what a floor set meanwhile forbids. It cannot know (it could not reach
// the store), so it stops serving every cached segment ID when it has not
// renewed for cluster.lease less a margin of a tenth, measured on its own
// monotonic clock from before the renewal was sent (Hold): that is before
// the store, measuring the lease from when the renewal arrived, lets it
// expire. It serves again once a renewal succeeds and it has read and
// applied the log up to then; a server that missed changes the log no
// longer holds drops everything it had cached. The log is read only after
// the renewal is committed: a command that saw the lease expired knows the
// server will read its change before it serves again, and one that saw it
// live waits for its confirmation.
//
// So segment serving depends on the registry only through the lease: a
// server keeps serving its cached IDs through a store outage for
// cluster.lease (30s by default), not longer; it never asks the store per
// ID, and waits for nothing unless an administrative change is pending.
//
// # Snowflake
//
// The Snowflake generator (package snowflake) issues only under a worker id
// leased from the same registry, renewed with the node's lease: unique
// among live servers, recycled once a lease has expired. Each renewal
// records a bound, this server's clock plus the lease, and the generator
// issues in no later time unit; the id's next holder starts after it. On a
// lapse the generator is revoked (TRYAGAIN) with the segment tags, and a
// worker id taken meanwhile by another server is replaced by a new one.
package cluster
