package server_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server/servertest"
)

// forEachProtocol runs f as a subtest per protocol go-redis speaks to leaf:
// its default handshake (HELLO 3) and Protocol 2 (HELLO 2).
func forEachProtocol(t *testing.T, f func(t *testing.T, proto int)) {
	t.Helper()
	for _, p := range []int{3, 2} {
		t.Run("resp"+strconv.Itoa(p), func(t *testing.T) { f(t, p) })
	}
}

// start starts a default server.
func start(t testing.TB) *servertest.Instance {
	t.Helper()
	return servertest.Start(t, servertest.Options{})
}

// newClient is a go-redis client with one connection, so every command of a
// test runs on the same connection, and no retries, so errors are seen as
// they come.
func newClient(t testing.TB, addr string, proto int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{
		Addr:       addr,
		Protocol:   proto,
		Password:   password,
		PoolSize:   1,
		MaxRetries: -1,
	}))
	t.Cleanup(func() { c.Close() })
	return c
}

// wantErr runs a command and checks its error reply exactly.
func wantErr(t *testing.T, c *redis.Client, want string, args ...any) {
	t.Helper()
	err := c.Do(context.Background(), args...).Err()
	if err == nil {
		t.Fatalf("%v: no error, want %q", args, want)
	}
	if err.Error() != want {
		t.Fatalf("%v:\n got %q\nwant %q", args, err.Error(), want)
	}
}

// bulk is the RESP2 bulk string of s.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// helloReply is the exact reply to HELLO on a connection with that id:
// a RESP3 map after HELLO 3, the flat array Redis sends in RESP2.
func helloReply(proto int, id int64) string {
	head := "*14\r\n"
	if proto == 3 {
		head = "%7\r\n"
	}
	return head + bulk("server") + bulk("redis") + bulk("version") + bulk("7.0.0") +
		bulk("proto") + fmt.Sprintf(":%d\r\n", proto) + bulk("id") + fmt.Sprintf(":%d\r\n", id) +
		bulk("mode") + bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n"
}
