package segment

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/persist"
)

// fakeStore is the allocator tests' database: faultstore's in-memory one
// (db, which the tests also change by hand), behind the faults a test
// sets on the Store.
type fakeStore struct {
	*faultstore.Store
	db *faultstore.Memory
}

// newFakeStore is a fakeStore with a row of each tag of steps.
func newFakeStore(steps map[string]int64) *fakeStore {
	return fakeOn(faultstore.NewMemory(steps))
}

// fakeOn is a fakeStore on db.
func fakeOn(db *faultstore.Memory) *fakeStore {
	return &fakeStore{Store: faultstore.New(db), db: db}
}

// unavailable is a database error as the backends report one.
func unavailable(cause string) error {
	return fmt.Errorf("%w: %s", persist.ErrUnavailable, cause)
}

// clock is an injected clock that only moves when told. Its AfterFunc,
// given as Options.AfterFunc, runs f when Add moves the clock past d.
type clock struct {
	mu     sync.Mutex
	set    sync.Cond // broadcast when a timer is set
	now    time.Time
	timers []*fakeTimer // pending, in the order they were set
}

type fakeTimer struct {
	at time.Time
	d  time.Duration
	f  func()
}

func newClock() *clock {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	c.set.L = &c.mu
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d, then runs the timers that fell due, earliest
// first, on the caller's goroutine: when Add returns, they have run.
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	left := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			left = append(left, tm)
		} else {
			due = append(due, tm)
		}
	}
	c.timers = left
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, tm := range due {
		tm.f()
	}
}

// AfterFunc is Options.AfterFunc on the clock.
func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.now.Add(d), d: d, f: f}
	c.timers = append(c.timers, tm)
	c.set.Broadcast()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, p := range c.timers {
			if p == tm {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// waitTimer blocks until a timer is pending: the allocator's first probe
// is set once a failure has made the store away.
func (c *clock) waitTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) == 0 {
		c.set.Wait()
	}
}

// pending is the delays of the timers not yet run, as they were set.
func (c *clock) pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, tm := range c.timers {
		out = append(out, tm.d)
	}
	return out
}

// testOptions are small, fast options for unit tests.
func testOptions(c *clock) Options {
	o := DefaultOptions()
	o.DefaultStep = 100
	o.MaxStep = 1600
	// Far beyond any load of a busy machine: tests of the deadline set
	// their own.
	o.LoadTimeout = time.Minute
	o.RetryBackoff = time.Millisecond
	o.MaxRetryBackoff = time.Millisecond
	if c != nil {
		o.Now = c.Now
	}
	return o
}

// newTestAllocator starts an allocator over store and closes it at cleanup.
func newTestAllocator(t *testing.T, store persist.Store, o Options) *Allocator {
	t.Helper()
	a := New(store, o)
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

// waitReady blocks until the tag's load in flight ends.
func waitLoad(t *testing.T, tag *Tag) {
	t.Helper()
	tag.mu.Lock()
	l := tag.inflight
	tag.mu.Unlock()
	if l != nil {
		<-l.done
	}
}

func mustNext(t *testing.T, tag *Tag) int64 {
	t.Helper()
	id, err := tag.Next(context.Background())
	if err != nil {
		t.Fatalf("next %q: %v", tag.name, err)
	}
	return id
}

func mustNextN(t *testing.T, tag *Tag, n int64) int64 {
	t.Helper()
	id, err := tag.NextN(context.Background(), n)
	if err != nil {
		t.Fatalf("nextN %q %d: %v", tag.name, n, err)
	}
	return id
}

func mustLookup(t *testing.T, a *Allocator, name string) *Tag {
	t.Helper()
	tag, err := a.Lookup(context.Background(), []byte(name))
	if err != nil {
		t.Fatalf("lookup %q: %v", name, err)
	}
	return tag
}
