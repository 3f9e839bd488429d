package segment

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// fakeStore is an in-memory Store whose Take can be made to block, fail or
// report each call, so tests force every branch of the allocator on cue;
// setDown and setHung make every call that serves requests (Take, Tags,
// Tag, Create) fail at once or hang, as a database that is away.
type fakeStore struct {
	mu     sync.Mutex
	rows   map[string]*persist.Tag
	guard  map[string]int64                                        // the persistent guard, as persist keeps it; nil: off
	onTake func(ctx context.Context, tag string, size int64) error // runs before a Take applies
	// onAnswer runs once a Take has applied (committed), before it
	// answers: it may hold the answer, or lose it (an error).
	onAnswer func(ctx context.Context, tag string, r persist.Range) error
	down     error         // every call fails with it at once
	hung     chan struct{} // every call waits until it is closed or its context ends
	calls    int           // Take, Tags, Tag and Create calls
	takes    int
	sizes    []int64
	backs    int
	lookups  int   // Tag calls, and Take requests that found no row
	batches  []int // the size of each TakeBatch
	denyNew  error // when set, TakeBatch fails with it the requests that would create a row
}

var (
	_ persist.Store = (*fakeStore)(nil)
)

func newFakeStore(tags map[string]int64) *fakeStore {
	s := &fakeStore{rows: map[string]*persist.Tag{}}
	for name, step := range tags {
		s.rows[name] = &persist.Tag{Name: name, MaxID: 1, Step: step}
	}
	return s
}

func (s *fakeStore) hook() func(context.Context, string, int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.onTake
}

func (s *fakeStore) setHook(h func(context.Context, string, int64) error) {
	s.mu.Lock()
	s.onTake = h
	s.mu.Unlock()
}

// setDown makes every call fail at once with err wrapped in
// persist.ErrUnavailable; nil brings the store back.
func (s *fakeStore) setDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", persist.ErrUnavailable, err)
	}
	s.down = err
}

// setHung makes every call wait until its context ends (a hung database:
// only the deadline ends a call) or until the returned function is called,
// which ends the waits with the deadline's error and brings the store back.
func (s *fakeStore) setHung() (cut func()) {
	hung := make(chan struct{})
	s.mu.Lock()
	s.hung = hung
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.hung == hung {
			s.hung = nil
		}
		s.mu.Unlock()
		close(hung)
	}
}

// fault counts a call and applies setDown or setHung to it.
func (s *fakeStore) fault(ctx context.Context) error {
	s.mu.Lock()
	s.calls++
	down, hung := s.down, s.hung
	s.mu.Unlock()
	if down != nil {
		return down
	}
	if hung != nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", persist.ErrUnavailable, ctx.Err())
		case <-hung:
			return fmt.Errorf("%w: %w", persist.ErrUnavailable, context.DeadlineExceeded)
		}
	}
	return nil
}

// callCount is the number of Take, Tags, Tag and Create calls so far.
func (s *fakeStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *fakeStore) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	if err := s.fault(ctx); err != nil {
		return persist.Range{}, err
	}
	if h := s.hook(); h != nil {
		if err := h(ctx, tag, size); err != nil {
			return persist.Range{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return persist.Range{}, fmt.Errorf("%w: %w", persist.ErrUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[tag]
	if !ok {
		s.lookups++
		return persist.Range{}, fmt.Errorf("%w: %q", persist.ErrNotFound, tag)
	}
	if size <= 0 {
		size = r.Step
	}
	if r.MaxID > math.MaxInt64-size {
		return persist.Range{}, persist.ErrOverflow
	}
	r.MaxID += size
	s.takes++
	s.sizes = append(s.sizes, size)
	got := persist.Range{Start: r.MaxID - size, End: r.MaxID, Step: r.Step}
	if s.guard != nil {
		if high := s.guard[tag]; got.Start < high {
			got = persist.Range{Start: high, End: high + size, Step: r.Step, Repaired: true, Answered: got.Start}
			r.MaxID = got.End
		}
		s.guard[tag] = got.End
	}
	if h := s.onAnswer; h != nil {
		s.mu.Unlock()
		err := h(ctx, tag, got)
		s.mu.Lock()
		if err != nil {
			return persist.Range{}, err
		}
	}
	return got, nil
}

// setAnswerHook sets onAnswer.
func (s *fakeStore) setAnswerHook(h func(context.Context, string, persist.Range) error) {
	s.mu.Lock()
	s.onAnswer = h
	s.mu.Unlock()
}

// TakeBatch answers each request as Create (when it asks to create a
// missing row) then Take would, in order.
func (s *fakeStore) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	s.mu.Lock()
	s.batches = append(s.batches, len(reqs))
	deny := s.denyNew
	s.mu.Unlock()
	res := make([]persist.TakeResult, len(reqs))
	for i, q := range reqs {
		if q.Create > 0 {
			s.mu.Lock()
			_, ok := s.rows[q.Tag]
			if !ok && deny != nil {
				s.lookups++
			}
			s.mu.Unlock()
			if !ok && deny != nil {
				res[i].Err = deny
				continue
			}
			if !ok {
				created, err := s.Create(ctx, q.Tag, q.Create, "")
				if err != nil {
					res[i].Err = err
					continue
				}
				res[i].Created = created
			}
		}
		res[i].Range, res[i].Err = s.Take(ctx, q.Tag, q.Size)
	}
	return res
}

// batchSizes is the size of each TakeBatch so far.
func (s *fakeStore) batchSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

// withGuard turns the persistent guard on, as persist's backends keep it
// with the leaf_guard table.
func (s *fakeStore) withGuard() *fakeStore {
	s.guard = map[string]int64{}
	return s
}

func (s *fakeStore) Tags(ctx context.Context) ([]persist.Tag, error) {
	if err := s.fault(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]persist.Tag, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, *r)
	}
	return out, nil
}

func (s *fakeStore) Tag(ctx context.Context, name string) (persist.Tag, error) {
	if err := s.fault(ctx); err != nil {
		return persist.Tag{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	r, ok := s.rows[name]
	if !ok {
		return persist.Tag{}, fmt.Errorf("%w: %q", persist.ErrNotFound, name)
	}
	return *r, nil
}

func (s *fakeStore) Create(ctx context.Context, name string, step int64, desc string) (bool, error) {
	if err := s.fault(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rows[name]; ok {
		return false, nil
	}
	s.rows[name] = &persist.Tag{Name: name, MaxID: 1, Step: step, Description: desc}
	return true, nil
}

func (s *fakeStore) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[tag]
	if !ok || r.MaxID != from {
		return false, nil
	}
	r.MaxID = to
	if s.guard != nil && s.guard[tag] == from {
		s.guard[tag] = to
	}
	s.backs++
	return true, nil
}

func (s *fakeStore) Close() error { return nil }

// maxID reads a row's max_id.
func (s *fakeStore) maxID(tag string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[tag].MaxID
}

func (s *fakeStore) setMaxID(tag string, v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[tag].MaxID = v
}

func (s *fakeStore) remove(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rows, tag)
}

// sizeOf is the size the i-th Take (from 0) asked for.
func (s *fakeStore) sizeOf(i int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sizes[i]
}

func (s *fakeStore) takeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takes
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

var _ persist.Admin = (*fakeStore)(nil)

func (s *fakeStore) SetStep(ctx context.Context, tag string, step int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[tag]
	if !ok {
		return persist.ErrNotFound
	}
	r.Step = step
	return nil
}

func (s *fakeStore) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[tag]
	if !ok {
		return persist.Tag{}, false, persist.ErrNotFound
	}
	if r.MaxID >= floor+1 {
		return *r, false, nil
	}
	r.MaxID = floor + 1
	return *r, true, nil
}
