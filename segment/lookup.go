package segment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// Looking up a name that the tag map does not hold (Lookup's slow path):
// one lookup per name at a time, at most Loaders at once, unknown names
// remembered for NegativeTTL. Prepare starts the lookup of a name as its
// first load instead, queued with the other loads.

// maxNegative bounds the cache of unknown names, so a client sending random
// tags cannot grow it without limit.
const maxNegative = 10_000

// unknownName is a name remembered as unknown, until when, and why.
type unknownName struct {
	until time.Time
	err   error // ErrUnknownTag, saying why
}

// lookupCall is the lookup of an unknown name in flight: a read (and a
// create) of its row, or its first load (Prepare).
type lookupCall struct {
	done    chan struct{}
	tag     *Tag
	err     error
	release func() // of the place under MaxTags a create-ahead took; nil when none
	// first is the tag whose first load answers this lookup (Prepare),
	// not in the map until that load ends; nil for a read of the row.
	first *Tag
}

// lookupSlow resolves a tag not in the map: one database lookup per name at a
// time (followers wait for it), at most Loaders lookups at once, and unknown
// names remembered for NegativeTTL. While the store is away it answers at
// once, and a store that goes away releases the lookups waiting on it.
func (a *Allocator) lookupSlow(ctx context.Context, name string) (*Tag, error) {
	if err := validTag(name); err != nil {
		return nil, err
	}
	if a.closed.Load() {
		return nil, ErrClosed
	}
	a.mu.Lock()
	if t := a.tags.get(name); t != nil {
		a.mu.Unlock()
		return t, nil
	}
	if n, ok := a.negative[name]; ok {
		if a.opts.Now().Before(n.until) {
			a.mu.Unlock()
			return nil, n.err
		}
		delete(a.negative, name)
	}
	st := a.h.state.Load()
	if st.away {
		a.mu.Unlock()
		return nil, a.refuseName(name)
	}
	if c, ok := a.pending[name]; ok {
		a.mu.Unlock()
		select {
		case <-c.done:
			// A refusal was the leader's requester's: this one asks anew.
			if errors.Is(c.err, errLookupAgain) || errors.Is(c.err, ErrCreateRefused) {
				return a.lookupSlow(ctx, name)
			}
			return c.tag, c.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, name, ctx.Err())
		case <-st.gone:
			return nil, a.awayError(name)
		}
	}
	return a.leadLookup(ctx, name, st.gone)
}

// leadLookup resolves name as the one lookup in flight for it; a.mu is held
// on entry and released. gone, when closed, ends a wait for a lookup slot.
func (a *Allocator) leadLookup(ctx context.Context, name string, gone <-chan struct{}) (*Tag, error) {
	c := &lookupCall{done: make(chan struct{})}
	a.pending[name] = c
	a.mu.Unlock()

	c.tag, c.err = a.resolve(ctx, name, gone)

	a.mu.Lock()
	delete(a.pending, name)
	if errors.Is(c.err, ErrUnknownTag) {
		if len(a.negative) >= maxNegative {
			clear(a.negative)
		}
		a.negative[name] = unknownName{until: a.opts.Now().Add(a.opts.NegativeTTL), err: c.err}
	}
	a.mu.Unlock()
	close(c.done)
	return c.tag, c.err
}

func (a *Allocator) resolve(ctx context.Context, name string, gone <-chan struct{}) (*Tag, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	select {
	case a.lookup <- struct{}{}:
		defer func() { <-a.lookup }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, name, ctx.Err())
	case <-gone:
		return nil, a.awayError(name)
	}
	mark := a.mark()
	row, err := a.store.Tag(ctx, name)
	if errors.Is(err, persist.ErrNotFound) {
		if !a.opts.AutoCreate {
			a.noteStore(ctx, err, mark) // an answer: the store is there
			return nil, fmt.Errorf("%w: %q (auto-create is off)", ErrUnknownTag, name)
		}
		release, refused := a.admitCreate(ctx, name, true)
		if refused != nil {
			a.noteStore(ctx, err, mark) // an answer: the store is there
			return nil, refused
		}
		defer release() // once the tag is in the map
		// Only the outcome of the write says whether the store is
		// back: a database may answer reads and fail writes.
		var created bool
		created, err = a.store.Create(ctx, name, a.opts.DefaultStep, "")
		switch {
		case created:
			a.noteCreated("tag", name, "step", a.opts.DefaultStep)
			row = persist.Tag{Name: name}
		case errors.Is(err, persist.ErrDenied):
			// An answer: the store is there, and will not create it.
			a.noteStore(ctx, err, mark)
			return nil, fmt.Errorf("%w: %q, and it cannot be created: %w", ErrUnknownTag, name, err)
		case err == nil:
			// Created by someone else meanwhile, perhaps in another mode.
			row, err = a.store.Tag(ctx, name)
		}
	}
	a.noteStore(ctx, err, mark)
	if err != nil {
		if isStoreFault(err) {
			a.keepLookup(name)
		}
		return nil, fmt.Errorf("%w: tag %q: %w", ErrUnavailable, name, err)
	}
	return a.tags.add(a.newTagOf(row))[0], nil
}

func (a *Allocator) forgetUnknown(name string) {
	a.mu.Lock()
	delete(a.negative, name)
	a.mu.Unlock()
}

// Prepare starts, without waiting, what a request of the tag named name
// would wait for: the lookup of an unknown name, or the load of a known
// tag whose current segment is spent and that has no next one. A caller
// about to serve many tags (a pipeline) calls it for each first, so that
// their loads are queued together and run in a few store round trips. It
// never blocks nor calls the database, and does nothing while the store
// is away. It creates as Options.AutoCreate says: see PrepareCtx.
func (a *Allocator) Prepare(name []byte) { a.PrepareCtx(context.Background(), name) }

// PrepareCtx is Prepare for a request made with ctx: the first load of an
// unknown name creates its row in the same round trip when ctx's Creator
// (create.go) agrees and there is room under MaxTags; otherwise the
// request looks the name up itself, and is told why it may not create it.
func (a *Allocator) PrepareCtx(ctx context.Context, name []byte) {
	if a.closed.Load() || a.h.state.Load().away || a.held.Load() != nil {
		return
	}
	if t := a.tags.getBytes(name); t != nil {
		t.prepare()
		return
	}
	// Without auto-create the first load could only find an existing row,
	// which the lookup must read anyway (its mode).
	if !a.opts.AutoCreate || ValidTag(name) != nil {
		return
	}
	key := string(name)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[key]; ok || a.tags.get(key) != nil {
		return
	}
	if n, ok := a.negative[key]; ok && a.opts.Now().Before(n.until) {
		return
	}
	release, err := a.admitCreate(ctx, key, false)
	if err != nil {
		return
	}
	a.startLookupLocked(key, release)
}

// errLookupAgain ends a lookup by first load that found the row there
// already: the tag may be of another mode, so it is looked up as any other
// (the range that load took is a gap).
var errLookupAgain = errors.New("segment: the row exists: look it up")

// startLookupLocked starts the lookup of name as the first load of a tag
// that joins the map when it succeeds (with auto-create, the store creates
// the row in the same round trip), queued with the other loads, so that
// the first touches of many tags take few round trips; a.mu is held.
// Followers wait for it as for any lookup.
func (a *Allocator) startLookupLocked(name string, release func()) {
	t := a.newTag(name)
	c := &lookupCall{done: make(chan struct{}), release: release, first: t}
	t.lookup = c
	t.inflight = &load{done: make(chan struct{})}
	if a.pool.push(t) {
		a.pending[name] = c
	} else if release != nil {
		release()
	}
}

// endLookup ends c, the lookup that t's first load answered: with err, or
// with t, which joins the map.
func (a *Allocator) endLookup(c *lookupCall, t *Tag, err error) {
	a.mu.Lock()
	delete(a.pending, t.name)
	if err == nil {
		c.tag = a.tags.add(t)[0]
	}
	if c.release != nil {
		c.release() // the tag is in the map, or was not created
	}
	if err != nil {
		c.err = err
		if errors.Is(err, ErrUnknownTag) {
			if len(a.negative) >= maxNegative {
				clear(a.negative)
			}
			a.negative[t.name] = unknownName{until: a.opts.Now().Add(a.opts.NegativeTTL), err: err}
		}
	}
	a.mu.Unlock()
	close(c.done)
}
