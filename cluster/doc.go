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
// After LEAF.FLOOR or SET answers OK, no request that arrives afterwards
// at any server gets an ID at or below the floor. The invariant behind
// it, and behind uniqueness (segment/lease.go states it in full): an ID
// is served only if it lies above every floor acknowledged before the
// request arrived, and the server's right to serve from its cache was
// current when the request arrived.
//
// The command raises max_id in the store, applies the floor on its own
// server, appends the change to the store's log (Announce; the append
// raises max_id again in its own transaction, so a floor is in effect in
// the store from the moment it is in the log), and waits up to
// cluster.ack_timeout until every live server has confirmed it; otherwise
// it answers an error naming the servers that did not (the floor is set
// in the store all the same). Each server reads the log at every
// heartbeat, right after renewing its lease, skips its cached IDs at or
// below a new floor (a range on its way meanwhile that is not above it is
// refused, whichever path it takes), and confirms with its next renewal,
// at once.
//
// A server whose lease expired is not waited for, so it must not serve
// what a floor set meanwhile forbids. It cannot know (it could not reach
// the store, or it was stopped), so it serves its cached segment IDs only
// to requests that arrived before its lease less a margin of a tenth,
// measured from before the renewal was sent: that is before the store,
// measuring the lease from when the renewal arrived, lets it expire. The
// allocator checks this on the request path (segment.Allocator.Serve and
// Admit), against a clock reading taken after the requests were read, so
// that a process woken from SIGSTOP or a machine from suspension refuses
// before any timer has run; a timer marks the lapse too (Hold), for the
// Snowflake generator, the status and the log. It serves again once a
// renewal succeeds and it has read and applied the log up to then; a
// server that missed changes the log no longer holds drops everything it
// had cached. The log is read only after the renewal is committed: a
// command that saw the lease expired knows the server will read its
// change before it serves again, and one that saw it live waits for its
// confirmation.
//
// A server that shuts down gives its unused IDs back while it is still
// registered (publishers keep waiting for it), through the node (Node is
// the allocator's segment.Fence): each give-back is refused in the
// store's transaction when a floor of the tag at or above where it would
// lower max_id was published after the changes the server applied. So a
// shutdown never lowers max_id below a floor, and a server that starts
// later finds every floor of the log in effect in the store.
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
// Leave frees only the worker id the node knows it holds, with the later
// of the bound it had when leased and the time of the node's last ID
// (read once the generator is stopped): never below what any holder
// issued. An id the node holds without knowing (a lease whose answer was
// lost) keeps the bound the store recorded and expires with its lease.
package cluster
