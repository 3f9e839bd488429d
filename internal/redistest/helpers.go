package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Incr runs INCR tag and fails the test on an error.
func Incr(tb testing.TB, c *redis.Client, tag string) int64 {
	tb.Helper()
	id, err := c.Incr(context.Background(), tag).Result()
	if err != nil {
		tb.Fatalf("INCR %s: %v", tag, err)
	}
	return id
}

// LeafInfo runs LEAF.INFO tag and returns its field/value pairs, whatever
// the protocol: integers as int64, text as string.
func LeafInfo(tb testing.TB, c *redis.Client, tag string) map[string]any {
	tb.Helper()
	v, err := c.Do(context.Background(), "LEAF.INFO", tag).Result()
	if err != nil {
		tb.Fatalf("LEAF.INFO %s: %v", tag, err)
	}
	return Pairs(tb, v)
}

// Pairs reads a map reply as go-redis gives it: a map in RESP3, a flat
// array of names and values in RESP2. It fails the test on anything else.
func Pairs(tb testing.TB, v any) map[string]any {
	tb.Helper()
	out := map[string]any{}
	put := func(k, val any) {
		name, ok := k.(string)
		if !ok {
			tb.Fatalf("map reply with a key of type %T: %v", k, k)
		}
		out[name] = val
	}
	switch v := v.(type) {
	case map[any]any:
		for k, val := range v {
			put(k, val)
		}
	case []any:
		if len(v)%2 != 0 {
			tb.Fatalf("odd array of %d as a map", len(v))
		}
		for i := 0; i < len(v); i += 2 {
			put(v[i], v[i+1])
		}
	default:
		tb.Fatalf("map reply of type %T", v)
	}
	return out
}

// WaitFor polls cond until it holds, and fails the test after a minute:
// it waits for an event that has no signal of its own (a count, a state
// another goroutine reaches), a safety net against a hung test, never an
// assertion on time.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
