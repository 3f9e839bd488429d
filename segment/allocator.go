package segment

import (
	"context"
	"fmt"
	"log/slog"
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

// timerFunc is time.AfterFunc as Options.AfterFunc has it.
func timerFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
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
	waitedLoads  atomic.Int64 // loads and dedicated ranges a request waited for
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

// Lookup returns the tag named name, looking it up in the database (and
// creating it when auto-create is on) the first time. Known tags are found
// without locks or allocations.
func (a *Allocator) Lookup(ctx context.Context, name []byte) (*Tag, error) {
	if t := a.tags.getBytes(name); t != nil {
		return t, nil
	}
	return a.lookupSlow(ctx, string(name))
}

// Known returns the tag named name if this allocator knows it already, nil
// otherwise (Lookup would then ask the database). It never blocks.
func (a *Allocator) Known(name []byte) *Tag { return a.tags.getBytes(name) }

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

// MaxBatch is the largest n NextN accepts.
func (a *Allocator) MaxBatch() int64 { return a.opts.MaxBatch }

func (a *Allocator) nowNanos() int64 { return a.opts.Now().UnixNano() }
