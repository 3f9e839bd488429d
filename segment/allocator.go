package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/internal/ratelog"
	"github.com/leaf-id/leaf/persist"
)

// Options configure an Allocator. Zero fields take the defaults of
// DefaultOptions.
type Options struct {
	DefaultStep     int64         // step of auto-created tags
	MaxStep         int64         // ceiling of the adaptive step
	SegmentDuration time.Duration // target lifetime of a segment
	PrefetchAt      float64       // fraction of a segment used before the next is loaded
	Loaders         int           // workers that load segments
	LoadTimeout     time.Duration // bound on a database call and on a request's wait
	SyncInterval    time.Duration // period of the tag list re-sync
	AutoCreate      bool          // create unknown tags with DefaultStep
	MaxTags         int           // tags held at most before creating more is refused; 0: no limit (create.go)
	MaxLoadBatch    int           // most loads one store round trip takes (group commit)
	MaxBatch        int64         // largest n of NextN
	NegativeTTL     time.Duration // how long an unknown tag is remembered as unknown
	RetryBackoff    time.Duration // first delay before a probe of a store away, or before retrying a tag's failed load
	MaxRetryBackoff time.Duration // longest delay between two probes, or two retries (the delay doubles up to it)

	// Now is the clock; tests inject one to force step changes.
	Now func() time.Time
	// AfterFunc runs f after d, as time.AfterFunc, and returns what stops
	// it (reporting whether it did). It schedules probes and retries;
	// tests inject one to fire them on cue.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Logger receives the allocator's events; nil discards them.
	Logger *slog.Logger
	// Observe, when set, is told the duration and outcome of every
	// database call that takes a range (for metrics).
	Observe func(d time.Duration, err error)
	// Modes makes the generators of tags in other modes than segments
	// (Snowflake, mode.go); nil: such tags answer ErrMode.
	Modes Modes
}

// DefaultOptions are the documented defaults (leaf.yaml).
func DefaultOptions() Options {
	return Options{
		DefaultStep:     1000,
		MaxStep:         1_000_000,
		SegmentDuration: 15 * time.Minute,
		PrefetchAt:      0.1,
		Loaders:         8,
		LoadTimeout:     2 * time.Second,
		SyncInterval:    time.Minute,
		AutoCreate:      true,
		MaxTags:         1_000_000,
		MaxLoadBatch:    persist.MaxTakeBatch,
		MaxBatch:        100_000,
		NegativeTTL:     time.Second,
		RetryBackoff:    100 * time.Millisecond,
		MaxRetryBackoff: 10 * time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.DefaultStep <= 0 {
		o.DefaultStep = d.DefaultStep
	}
	if o.MaxStep <= 0 {
		o.MaxStep = d.MaxStep
	}
	if o.SegmentDuration <= 0 {
		o.SegmentDuration = d.SegmentDuration
	}
	if o.PrefetchAt <= 0 || o.PrefetchAt > 1 {
		o.PrefetchAt = d.PrefetchAt
	}
	if o.Loaders <= 0 {
		o.Loaders = d.Loaders
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = d.LoadTimeout
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = d.SyncInterval
	}
	if o.MaxLoadBatch <= 0 {
		o.MaxLoadBatch = d.MaxLoadBatch
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = d.NegativeTTL
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = d.RetryBackoff
	}
	if o.MaxRetryBackoff <= 0 {
		o.MaxRetryBackoff = d.MaxRetryBackoff
	}
	o.RetryBackoff = min(o.RetryBackoff, o.MaxRetryBackoff) // a cap below the first delay lowers it
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AfterFunc == nil {
		o.AfterFunc = timerFunc
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Allocator hands out IDs for every tag of a Store.
type Allocator struct {
	store  persist.Store
	opts   Options
	policy stepPolicy
	log    *slog.Logger
	tags   *tagMap
	pool   *loaderPool
	empty  *segment      // shared by tags before their first load
	lookup chan struct{} // bounds concurrent lookups of unknown tags

	mu       sync.Mutex
	pending  map[string]*lookupCall
	negative map[string]unknownName
	fence    Fence // guards the give-backs of Close; nil: the store's GiveBack
	// giveBackGroup is the tags of one batched give-back (the constant;
	// tests make it smaller).
	giveBackGroup int

	closed       atomic.Bool
	waits        atomic.Int64
	loadFailures atomic.Int64
	guardTrips   atomic.Int64
	guardRepairs atomic.Int64
	retries      atomic.Int64          // Takes the database made run again
	ambiguous    atomic.Int64          // Takes whose outcome was left unknown
	loadRounds   atomic.Int64          // store round trips that took segments
	h            health                // the store's state (health.go)
	held         atomic.Pointer[error] // Hold's error, or a lease's that ran out (lease.go)
	gate         gate                  // the lease (lease.go)
	cr           creates               // tag creations (create.go)
	// loadFailLog logs failed loads: ten a minute, then a count, so a
	// database down under many tags does not flood the log.
	loadFailLog *ratelog.Logger
	drops       atomic.Int64 // DropCached calls: loads across one are refused

	stop     context.CancelFunc
	syncDone chan struct{}
}

// New returns an allocator over store. Call Start to load the tags and begin
// the periodic sync, and Close to give unused IDs back.
func New(store persist.Store, opts Options) *Allocator {
	opts = opts.withDefaults()
	a := &Allocator{
		store:    store,
		opts:     opts,
		policy:   stepPolicy{segmentDuration: opts.SegmentDuration, maxStep: opts.MaxStep},
		log:      opts.Logger,
		tags:     newTagMap(),
		empty:    emptySegment(0),
		lookup:   make(chan struct{}, opts.Loaders),
		pending:  map[string]*lookupCall{},
		negative: map[string]unknownName{},

		giveBackGroup: giveBackGroup,
	}
	a.h.init()
	a.cr.init(a)
	// A real timer ends the window: the injected one paces loads and probes.
	a.loadFailLog = ratelog.New(a.log, slog.LevelWarn, "segment load failed", ratelog.Options{Now: a.opts.Now})
	a.pool = newLoaderPool(opts.Loaders, opts.MaxLoadBatch, a.runLoads)
	return a
}

// Start loads the tag list and starts the periodic sync. A database that
// cannot be reached is not fatal: the error is returned for logging, tags
// are then looked up on first use, and the sync keeps trying.
func (a *Allocator) Start(ctx context.Context) error {
	ctx, a.stop = context.WithCancel(context.WithoutCancel(ctx))
	a.syncDone = make(chan struct{})
	err := a.Sync(ctx)
	go a.syncLoop(ctx)
	return err
}

func (a *Allocator) syncLoop(ctx context.Context) {
	defer close(a.syncDone)
	tick := time.NewTicker(a.opts.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if a.h.state.Load().away {
				continue // the probe is the one call to a store away
			}
			if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("tag sync failed", "err", err)
			}
		}
	}
}

// Sync reads the tag list: new rows become tags (loaded on first use), and
// tags whose row is missing are marked vanished but keep serving the IDs
// they have reserved (Leaf drops them, so a mistaken DELETE breaks callers).
func (a *Allocator) Sync(ctx context.Context) error {
	return a.sync(ctx, max(a.opts.LoadTimeout, 30*time.Second))
}

// sync is Sync with its deadline: a probe allows only load_timeout.
func (a *Allocator) sync(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mark := a.mark()
	// Only the tags known before the read can be judged missing: a tag
	// created while the list is read may not be in it.
	known := a.tags.all()
	rows, err := a.store.Tags(ctx)
	a.noteStore(ctx, err, mark)
	if err != nil {
		return fmt.Errorf("segment: sync: %w", err)
	}
	seen := make(map[string]struct{}, len(rows))
	var fresh []*Tag
	for _, r := range rows {
		seen[r.Name] = struct{}{}
		if a.tags.get(r.Name) == nil && validTag(r.Name) == nil {
			fresh = append(fresh, a.newTagOf(r))
		}
	}
	if len(fresh) > 0 {
		a.tags.add(fresh...)
	}
	for _, t := range known {
		_, ok := seen[t.name]
		if was := t.vanished.Swap(!ok); !ok && !was {
			a.log.Warn("tag row is gone from the database; serving the IDs already reserved", "tag", t.name)
		}
	}
	return nil
}

func (a *Allocator) newTag(name string) *Tag {
	t := &Tag{a: a, name: name}
	t.cur.Store(a.empty)
	return t
}

// Lookup returns the tag named name, looking it up in the database (and
// creating it when auto-create is on) the first time. Known tags are found
// without locks or allocations.
func (a *Allocator) Lookup(ctx context.Context, name []byte) (*Tag, error) {
	if t := a.tags.getBytes(name); t != nil {
		return t, nil
	}
	return a.lookupSlow(ctx, string(name))
}

// Next returns the next ID of a tag. It checks the lease (Admit) on the
// allocator's clock first: it serves callers that no connection layer
// admits (Leaf's HTTP API).
func (a *Allocator) Next(ctx context.Context, tag string) (int64, error) {
	a.admitNow()
	t := a.tags.get(tag)
	if t == nil {
		var err error
		if t, err = a.lookupSlow(ctx, tag); err != nil {
			return 0, err
		}
	}
	return t.Next(ctx)
}

// NextN reserves n consecutive IDs of a tag and returns the last one,
// checking the lease first as Next does.
func (a *Allocator) NextN(ctx context.Context, tag string, n int64) (int64, error) {
	a.admitNow()
	t := a.tags.get(tag)
	if t == nil {
		var err error
		if t, err = a.lookupSlow(ctx, tag); err != nil {
			return 0, err
		}
	}
	return t.NextN(ctx, n)
}

// prepare queues the load of the next segment if the current one is spent
// and none is held or coming.
func (t *Tag) prepare() {
	if t.gen != nil {
		return
	}
	if s := t.cur.Load(); s.value.Load() < s.last {
		return
	}
	t.mu.Lock()
	if t.next == nil && t.inflight == nil {
		t.startLoadLocked()
	}
	t.mu.Unlock()
}

func (a *Allocator) nowNanos() int64 { return a.opts.Now().UnixNano() }

// Close stops the loaders and the sync, then gives back what was reserved
// and never handed out (DESIGN.md §4): per tag, the prefetched next segment
// whole, then, only if that matched, the unused tail of the current one,
// each with one compare-and-set that matches only when no other server took
// a range above it. The server must have stopped calling Next before.
// Each tag's give-back is bounded by LoadTimeout as well as by ctx.
func (a *Allocator) Close(ctx context.Context) error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	if a.stop != nil {
		a.stop()
		<-a.syncDone
	}
	a.stopProbes()
	for _, t := range a.pool.close() {
		t.mu.Lock()
		if l := t.inflight; l != nil {
			t.inflight = nil
			l.err = ErrClosed
			close(l.done)
		}
		c := t.lookup
		t.lookup = nil
		t.mu.Unlock()
		if c != nil {
			a.endLookup(c, t, ErrClosed)
		}
	}
	a.mu.Lock()
	fence := a.fence
	a.mu.Unlock()
	// Read once, before any tag's segments are weighed: every floor up to
	// seen was applied to them (skipTo takes the tag's lock) before seen
	// moved. A floor published later refuses the give-back it forbids.
	var seen int64
	if fence != nil {
		seen = fence.Seen()
	}
	var reqs []persist.GiveBackRequest
	for _, t := range a.tags.all() {
		if r, ok := t.giveBackRequest(); ok {
			reqs = append(reqs, r)
		}
	}
	// In the order of the table's key: each group's rows lie together (an
	// SQLite file reads a few pages per group, not a page per tag), and
	// groups running at once lock rows in one order.
	slices.SortFunc(reqs, func(x, y persist.GiveBackRequest) int { return strings.Compare(x.Tag, y.Tag) })
	return a.giveBack(ctx, reqs, fence, seen)
}

// giveBackGroup is how many tags one give-back transaction takes, when
// the store gives back in batches (persist.BatchGiver). Large: SQLite
// writes each page a transaction changed once, and rows of tags created
// in no particular order share few pages, so a group of 500 costs more
// than twice as much a tag as one of 5,000; a networked database runs
// several groups at once.
const giveBackGroup = 5000

// giveBack returns the unused IDs of reqs to the database, by the
// Loaders workers: in transactions of giveBackGroup tags where the store
// can, else tag by tag. Each transaction is bounded by LoadTimeout as well
// as by ctx, so that a hung database cannot hold the shutdown for the
// whole of ctx (which may have no end). What could not be given back stays
// a gap; the error sums it up in one line.
func (a *Allocator) giveBack(ctx context.Context, reqs []persist.GiveBackRequest, fence Fence, seen int64) error {
	batch := a.batchGiver(fence, seen)
	group := a.giveBackGroup
	if batch == nil {
		group = 1
	}
	work := make(chan []persist.GiveBackRequest)
	var (
		mu                  sync.Mutex
		given, kept, failed int
		firstErr            error
	)
	count := func(g []persist.GiveBackRequest, matched []bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed += len(g)
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		for i, m := range matched {
			if m {
				given++
				a.log.Debug("gave back unused IDs", "tag", g[i].Tag, "from", g[i].To, "to", g[i].From)
			} else {
				kept++
			}
		}
	}
	var wg sync.WaitGroup
	for range a.opts.Loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				tctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
				var matched []bool
				err := errors.ErrUnsupported
				if batch != nil {
					matched, err = batch(tctx, g)
				}
				if errors.Is(err, errors.ErrUnsupported) {
					matched, err = a.giveBackEach(tctx, g, fence, seen)
				}
				cancel()
				count(g, matched, err)
			}
		}()
	}
	for len(reqs) > 0 {
		n := min(group, len(reqs))
		work <- reqs[:n]
		reqs = reqs[n:]
	}
	close(work)
	wg.Wait()
	if kept > 0 {
		a.log.Info("kept unused IDs of some tags: another server allocated above them, or a floor was set since",
			"tags", kept, "given_back", given)
	}
	if failed > 0 {
		return fmt.Errorf("segment: gave back the unused IDs of %d tags; %d could not be (their IDs stay a gap): %w",
			given, failed, firstErr) // firstErr names the operation and the tag
	}
	return nil
}

// batchGiver is the store's batched give-back, through the fence when
// there is one; nil when the store gives back tag by tag only.
func (a *Allocator) batchGiver(fence Fence, seen int64) func(context.Context, []persist.GiveBackRequest) ([]bool, error) {
	if fence != nil {
		if f, ok := fence.(BatchFence); ok {
			return func(ctx context.Context, g []persist.GiveBackRequest) ([]bool, error) {
				return f.GiveBackBatch(ctx, g, seen)
			}
		}
		return nil
	}
	if b, ok := a.store.(persist.BatchGiver); ok {
		return b.GiveBackBatch
	}
	return nil
}

// giveBackEach gives g back one tag at a time; a tag whose row is gone
// has nothing to give back to.
func (a *Allocator) giveBackEach(ctx context.Context, g []persist.GiveBackRequest, fence Fence, seen int64) ([]bool, error) {
	matched := make([]bool, len(g))
	for i, r := range g {
		var ok bool
		var err error
		if fence != nil {
			ok, err = fence.GiveBack(ctx, r.Tag, r.From, r.To, seen)
		} else {
			ok, err = a.store.GiveBack(ctx, r.Tag, r.From, r.To)
		}
		if err != nil && !errors.Is(err, persist.ErrNotFound) {
			return nil, err
		}
		matched[i] = ok
	}
	return matched, nil
}

// Fence guards the give-backs of Close on a store that servers share
// (package cluster's node is one): a give-back lowers max_id, and must not
// lower it below a floor this server has not applied yet, which another
// server may have acknowledged already.
type Fence interface {
	// Seen is how far this server has applied the changes published
	// through the others (the log's sequence number). Close reads it
	// before it weighs a tag's unused IDs, which then reflect every
	// floor up to it.
	Seen() int64
	// GiveBack is persist.Store.GiveBack, refused (false, and no error)
	// when a floor of tag at or above to was published after seen.
	GiveBack(ctx context.Context, tag string, from, to, seen int64) (bool, error)
}

// BatchFence is a Fence that gives many tags back in one transaction
// (persist.BatchGiver.GiveBackBatchAfter); errors.ErrUnsupported when its
// store cannot, and Close then gives back tag by tag.
type BatchFence interface {
	Fence
	GiveBackBatch(ctx context.Context, reqs []persist.GiveBackRequest, seen int64) ([]bool, error)
}

// SetFence makes Close give back through f (nil: the store's GiveBack).
func (a *Allocator) SetFence(f Fence) {
	a.mu.Lock()
	a.fence = f
	a.mu.Unlock()
}

// giveBackRequest stops the tag handing out IDs and returns the one
// compare-and-set that gives back what it reserved and never handed out
// (see Close); ok is false when there is nothing to give back. The
// prefetched next segment goes back from its first ID not handed out (nor
// skipped by a floor); the unused tail of the current one with it only
// when the two meet and the next handed out nothing, since max_id can go
// back only from the end of the last range this server took.
func (t *Tag) giveBackRequest() (r persist.GiveBackRequest, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.retry != nil {
		t.retry()
		t.retry = nil
	}
	if !t.init {
		return r, false
	}
	cur := t.cur.Load()
	// Swap, not Load: a request that raced Close now fails instead of taking
	// an ID this call is about to give back.
	first := max(min(cur.value.Swap(math.MaxInt64/2), cur.last)+1, t.floor+1)
	r = persist.GiveBackRequest{Tag: t.name, From: cur.end(), To: first}
	if next := t.next; next != nil {
		// The next segment hands out nothing before it becomes current.
		nextFirst := max(next.firstUnissued(), t.floor+1)
		if nextFirst >= next.end() {
			return r, false // skipped whole by a floor: max_id is past the current segment
		}
		r.From = next.end()
		if first >= cur.end() || nextFirst > next.start || next.start != cur.end() {
			r.To = nextFirst // the current segment's tail, if any, stays a gap
		}
	}
	return r, r.To < r.From
}

// MaxBatch is the largest n NextN accepts.
func (a *Allocator) MaxBatch() int64 { return a.opts.MaxBatch }
