// Package client hands out IDs in-process at the speed of an atomic add,
// from ranges it leases from a leaf server, or from Redis, with
// INCRBY tag n: the reply r means the caller owns [r-n+1, r].
//
// A Generator serves one tag on a go-redis redis.UniversalClient:
//
//	gen, err := client.New(rdb, "order", client.Options{})
//	...
//	id, err := gen.Next(ctx)        // one atomic add while the lease lasts
//	last, err := gen.NextN(ctx, 10) // owns [last-9, last]
//
// # Leases
//
// A generator holds two leases, as leaf holds two segments. Next takes an
// ID from the current one with one atomic add: no lock, no allocation, no
// network. Once Options.PrefetchAt of it is handed out, one background
// INCRBY leases the next range, so the switch usually costs nothing. A call
// that finds no ID left waits for the lease under way (or asks for one),
// up to its context's end: no spinning, no sleeping, and never more than
// one lease request at a time.
//
// The lease size adapts to the rate, as leaf's step does: a lease that
// lasted less than Options.LeaseDuration doubles the next one, up to
// Options.MaxLease (leaf's max_batch, 100,000, by default); one that
// lasted more than twice as long halves it, down to Options.MinLease.
//
// # Guarantees and costs
//
// IDs are unique as long as the server's are: leaf's across restarts and
// crashes; Redis's as long as the key is neither lowered nor lost. A
// generator's IDs increase: a later call gets a higher ID (a lease that
// comes back below what it handed out, because the key was lowered or the
// client reaches several leaf servers whose ranges interleave, is cut to
// the IDs above, or refused with ErrBadLease). IDs of different generators
// and processes interleave: they are unique, not ordered.
//
// The IDs a generator leased and did not hand out are lost when it is
// closed or its process exits: at most two leases, the gap in the
// sequence. Where every ID must be used, or IDs must follow each other
// across processes, call INCR on the server for each ID instead.
//
// # Errors
//
// Failures wrap a sentinel to branch on: ErrUnavailable (no lease in time:
// the context ended, the network failed, or the server said TRYAGAIN;
// retry later), ErrRefused (the server answered an error that waiting will
// not fix, such as NOAUTH or a Redis key of another type; errors.As with a
// redis.Error gives the reply), ErrBadLease, ErrBadCount and ErrClosed.
package client
