package leaftest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/leaftest"
)

// TestStart: a server on loopback with a fresh store hands out 1, 2, then
// INCRBY's contiguous range, to the client Start gives and to a client of
// the test's own.
func TestStart(t *testing.T) {
	srv := leaftest.Start(t)
	host, _, err := net.SplitHostPort(srv.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q: want 127.0.0.1:port", srv.Addr())
	}
	c := srv.Client()
	if c != srv.Client() {
		t.Error("Client() made a second client")
	}
	if a, b := redistest.Incr(t, c, "order"), redistest.Incr(t, c, "order"); a != 1 || b != 2 {
		t.Fatalf("INCR, INCR = %d, %d; want 1, 2", a, b)
	}
	own := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: leaftest.Timeout})
	defer own.Close()
	if last, err := own.IncrBy(context.Background(), "order", 10).Result(); err != nil || last != 12 {
		t.Fatalf("INCRBY order 10 = %d, %v; want 12", last, err)
	}
	if _, err := os.Stat(srv.Path()); err != nil {
		t.Errorf("Path(): %v", err)
	}
}

// TestOptions: each option changes what the server does.
func TestOptions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		opts  []leaftest.Option
		check func(t *testing.T, srv *leaftest.Server)
	}{
		{"step", []leaftest.Option{leaftest.WithStep(100)}, func(t *testing.T, srv *leaftest.Server) {
			redistest.Incr(t, srv.Client(), "order")
			if step := redistest.LeafInfo(t, srv.Client(), "order")["min_step"]; step != int64(100) {
				t.Errorf("LEAF.INFO order min_step = %v, want 100", step)
			}
		}},
		{"password", []leaftest.Option{leaftest.WithPassword("s3cret")}, func(t *testing.T, srv *leaftest.Server) {
			redistest.Incr(t, srv.Client(), "order") // Client authenticates
			anon := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: leaftest.Timeout})
			defer anon.Close()
			if err := anon.Incr(ctx, "order").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
				t.Errorf("INCR without AUTH: %v, want NOAUTH", err)
			}
		}},
		{"admin password", []leaftest.Option{leaftest.WithAdminPassword("root")}, func(t *testing.T, srv *leaftest.Server) {
			if err := srv.Client().Do(ctx, "LEAF.CREATE", "order").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("LEAF.CREATE as default user: %v, want NOPERM", err)
			}
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "admin", Password: "root", ReadTimeout: leaftest.Timeout})
			defer admin.Close()
			if err := admin.Do(ctx, "LEAF.CREATE", "order").Err(); err != nil {
				t.Errorf("LEAF.CREATE as admin: %v", err)
			}
		}},
		{"snowflake tags", []leaftest.Option{leaftest.WithSnowflakeTags("event")}, func(t *testing.T, srv *leaftest.Server) {
			a, b := redistest.Incr(t, srv.Client(), "event"), redistest.Incr(t, srv.Client(), "event")
			// A Snowflake ID of today has its time far above 2^22.
			if a < 1<<40 || b <= a {
				t.Errorf("Snowflake INCR, INCR = %d, %d: want time-ordered IDs above 2^40", a, b)
			}
			if id := redistest.Incr(t, srv.Client(), "order"); id != 1 {
				t.Errorf("INCR order (a segment tag) = %d, want 1", id)
			}
		}},
		{"without auto-create", []leaftest.Option{leaftest.WithoutAutoCreate()}, func(t *testing.T, srv *leaftest.Server) {
			if err := srv.Client().Incr(ctx, "order").Err(); err == nil {
				t.Error("INCR of a tag never created: no error")
			}
			if err := srv.Client().Do(ctx, "LEAF.CREATE", "order").Err(); err != nil {
				t.Fatal(err)
			}
			if id := redistest.Incr(t, srv.Client(), "order"); id != 1 {
				t.Errorf("INCR after LEAF.CREATE = %d, want 1", id)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, leaftest.Start(t, tt.opts...))
		})
	}
}

// TestRestart: a server started again on the file of one that was closed
// continues at the next ID: the unused IDs were given back.
func TestRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ids.db")
	srv := leaftest.Start(t, leaftest.WithDatabase(path), leaftest.WithSnowflakeTags("event"))
	for want := int64(1); want <= 3; want++ {
		if id := redistest.Incr(t, srv.Client(), "order"); id != want {
			t.Fatalf("INCR = %d, want %d", id, want)
		}
	}
	event := redistest.Incr(t, srv.Client(), "event")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if c, err := net.Dial("tcp", srv.Addr()); err == nil {
		c.Close()
		t.Errorf("%s still accepts after Close", srv.Addr())
	}

	again := leaftest.Start(t, leaftest.WithDatabase(path), leaftest.WithSnowflakeTags("event"))
	if id := redistest.Incr(t, again.Client(), "order"); id != 4 {
		t.Errorf("INCR after a restart = %d, want 4 (no gap after a clean stop)", id)
	}
	if id := redistest.Incr(t, again.Client(), "event"); id <= event {
		t.Errorf("Snowflake INCR after a restart = %d, want above %d", id, event)
	}
}

// TestConcurrent: clients in parallel get IDs that never repeat.
func TestConcurrent(t *testing.T) {
	srv := leaftest.Start(t, leaftest.WithStep(10)) // many loads
	const workers, each = 8, 200
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				id, err := srv.Client().Incr(context.Background(), "order").Result()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				dup := seen[id]
				seen[id] = true
				mu.Unlock()
				if dup {
					errs <- errors.New("repeated ID")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != workers*each {
		t.Fatalf("%d IDs, want %d", len(seen), workers*each)
	}
}

// TestRunError: Run reports a store it cannot open, and leaves nothing
// running.
func TestRunError(t *testing.T) {
	dir := t.TempDir() // a directory is no database file
	if srv, err := leaftest.Run(leaftest.WithDatabase(dir)); err == nil {
		srv.Close()
		t.Fatal("Run on a directory: no error")
	}
}
