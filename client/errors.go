package client

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors, matched with errors.Is. The errors a Generator returns
// wrap one of them, with the tag and the cause (the server's error reply,
// the network error, the context's error); errors.As reaches the cause, e.g.
// a redis.Error for the server's exact reply.
var (
	// ErrClosed: the generator was closed.
	ErrClosed = errors.New("client: generator is closed")
	// ErrBadCount: NextN was asked for fewer than 1 or more than
	// Options.MaxLease IDs.
	ErrBadCount = errors.New("client: count out of range")
	// ErrUnavailable: no ID was cached and no lease arrived in time: the
	// context ended while the lease was in flight, the server could not be
	// reached, or it answered that it may serve later (leaf's TRYAGAIN,
	// Redis's LOADING, ...). Worth retrying.
	ErrUnavailable = errors.New("client: no cached IDs and no lease from the server")
	// ErrRefused: the server answered the lease with an error that waiting
	// will not fix: a missing or wrong password (NOAUTH, WRONGPASS), a key
	// of another type or value on plain Redis (WRONGTYPE, "not an
	// integer"), an unknown tag, a lease above leaf's max_batch.
	ErrRefused = errors.New("client: the server refused the lease")
	// ErrBadLease: the server answered a range the generator cannot use:
	// wholly at or below IDs it already handed out (the key was lowered,
	// or the client reaches several leaf servers whose ranges interleave),
	// or at the end of the 64-bit range.
	ErrBadLease = errors.New("client: unusable lease")
)

// leaseError classifies the failure of INCRBY tag n.
func leaseError(tag string, n int64, err error) error {
	var reply redis.Error
	switch {
	case redis.IsTryAgainError(err), redis.IsLoadingError(err), redis.IsClusterDownError(err),
		redis.IsMasterDownError(err), redis.IsMaxClientsError(err):
		return fmt.Errorf("%w: INCRBY %q %d: %w", ErrUnavailable, tag, n, err)
	case errors.As(err, &reply):
		return fmt.Errorf("%w: INCRBY %q %d: %w", ErrRefused, tag, n, err)
	default: // the network, a timeout, a closed redis client
		return fmt.Errorf("%w: INCRBY %q %d: %w", ErrUnavailable, tag, n, err)
	}
}
