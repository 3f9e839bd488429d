package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// TestShutdownManyTags: a server holding many tags gives back every one's
// unused IDs at SIGTERM, in batched transactions, within its shutdown
// deadline: a restart on the same file continues each tag at exactly the
// next ID (nothing repeated, nothing lost). 20,000 tags in make test;
// 200,000 with LEAF_TEST_LONG=1.
func TestShutdownManyTags(t *testing.T) {
	// Not parallel (see harness_test.go): the give-back must end within
	// the shutdown's deadline (15 s), and takes 5 to 7 s of it alone on a
	// busy machine.
	n := 20_000
	if os.Getenv("LEAF_TEST_LONG") != "" {
		n = 200_000
	}
	dir := t.TempDir()
	env := []string{
		"LEAF_STORE_DSN=" + filepath.Join(dir, "leaf.db"),
		"LEAF_STORE_CREATE_DATABASE=true",
		"LEAF_SEGMENT_CREATE_RATE=0",
		// Creating the tags is not what this tests: a busy machine may
		// take its time.
		"LEAF_SEGMENT_LOAD_TIMEOUT=1m",
		"LEAF_LOG_LEVEL=info",
	}
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("gb:%06d", i)
	}
	p := startLeaf(t, dir, env...)
	start := time.Now()
	first := incrAll(t, p.Addr, tags)
	t.Logf("%d tags created and loaded in %v", n, time.Since(start))
	start = time.Now()
	p.Stop(syscall.SIGTERM)
	t.Logf("SIGTERM to exit, giving back %d tags: %v", n, time.Since(start)) // a figure, not an assertion
	if log := p.Log(); strings.Contains(log, "could not be") || !strings.Contains(log, "shutting down") {
		t.Fatalf("the give-back did not complete:\n%s", tail(log, 20))
	}
	q := startLeaf(t, dir, env...)
	next := incrAll(t, q.Addr, tags)
	for i, tag := range tags {
		if next[i] != first[i]+1 {
			t.Fatalf("%s: %d after the restart, %d before: want exactly the next ID", tag, next[i], first[i])
		}
	}
	q.Stop(syscall.SIGTERM)
}

// incrAll INCRs each tag once over a few pipelined connections and returns
// the IDs, in the order of tags.
func incrAll(t *testing.T, addr string, tags []string) []int64 {
	t.Helper()
	const conns, pipe = 4, 1000
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: addr, PoolSize: conns, MaxRetries: -1,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute}))
	defer c.Close()
	ids := make([]int64, len(tags))
	work := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range work {
				to := min(from+pipe, len(tags))
				cmds, err := c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
					for _, tag := range tags[from:to] {
						p.Incr(context.Background(), tag)
					}
					return nil
				})
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					continue
				}
				for k, cmd := range cmds {
					ids[from+k] = cmd.(*redis.IntCmd).Val()
				}
			}
		}()
	}
	for from := 0; from < len(tags); from += pipe {
		work <- from
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	return ids
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
