package redistest

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout bounds a test client's dial, each read and each write: a safety
// net against a hung test, not an assertion on time. go-redis waits 3 s
// for a reply by default, which a command under -race, on a loaded
// machine, behind a database, can take; a test asserts what a client
// gets, never how soon.
const Timeout = time.Minute

// Options returns o with Timeout for every timeout o leaves at its
// default.
func Options(o *redis.Options) *redis.Options {
	if o.DialTimeout == 0 {
		o.DialTimeout = Timeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = Timeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = Timeout
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = Timeout
	}
	return o
}
