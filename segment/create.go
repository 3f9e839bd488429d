package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/leaf-id/leaf/internal/ratelog"
)

// Creating tags: every creation (auto-create on a first request, the
// create-ahead of a pipeline, Create and CreateMode) passes through here.
// A tag costs memory on every server and a row forever, so a creation
// needs a free place under Options.MaxTags and, for a request, the consent
// of the Creator its context carries (the server's per-client rule: who
// may create, how fast). Creations and refusals are counted (CreateStats),
// and the "tag created" line is rate-limited: ten a minute, then a count.

// ErrCreateRefused: the tag has no row and this request may not create it
// (Options.MaxTags reached, or its Creator said no). It does not wrap
// ErrUnknownTag on purpose: the refusal is the requester's, so it is not
// remembered for other requesters as an unknown name is.
var ErrCreateRefused = errors.New("tag not created")

// ErrTooManyTags: creating the tag would pass Options.MaxTags. Errors that
// wrap it wrap ErrCreateRefused too.
var ErrTooManyTags = errors.New("too many tags (segment.max_tags)")

// Creator decides whether a request may create the tag it names. The
// allocator asks it once per creation it would make for the request: once
// the store has answered that there is no row, or, for the create-ahead of
// a pipeline (PrepareCtx), before asking the store. A non-nil error
// refuses; it is wrapped in ErrCreateRefused.
type Creator interface {
	MayCreate(name string) error
}

// creatorKey is the context key of a request's Creator.
type creatorKey struct{}

// WithCreator returns ctx carrying c: the requests made with it create
// tags only when c agrees. Requests without a Creator create as
// Options.AutoCreate says.
func WithCreator(ctx context.Context, c Creator) context.Context {
	return context.WithValue(ctx, creatorKey{}, c)
}

// NoCreate returns ctx whose requests never create a tag: an unknown tag
// answers ErrCreateRefused (Leaf's HTTP API without http.auto_create).
func NoCreate(ctx context.Context) context.Context { return WithCreator(ctx, refuseAll{}) }

type refuseAll struct{}

func (refuseAll) MayCreate(string) error { return errors.New("this request may not create tags") }

// CreateStats are the allocator's counts of tag creations.
type CreateStats struct {
	Created int64 // tags this server created
	Refused int64 // creations refused: MaxTags reached, or the requester's Creator said no
	Full    int64 // of Refused, those refused because MaxTags was reached
}

// creates is the allocator's state of creations.
type creates struct {
	mu      sync.Mutex
	pending int // creations in flight, holding a place under MaxTags

	created, refused, full atomic.Int64
	log                    *ratelog.Logger
}

func (c *creates) init(a *Allocator) {
	c.log = ratelog.New(a.log, slog.LevelInfo, "tag created", ratelog.Options{Now: a.opts.Now, AfterFunc: a.opts.AfterFunc})
}

// CreateStats returns the counts of tag creations.
func (a *Allocator) CreateStats() CreateStats {
	return CreateStats{Created: a.cr.created.Load(), Refused: a.cr.refused.Load(), Full: a.cr.full.Load()}
}

// mayCreate asks ctx's Creator, when it has one, whether the request may
// create name.
func (a *Allocator) mayCreate(ctx context.Context, name string, count bool) error {
	c, ok := ctx.Value(creatorKey{}).(Creator)
	if !ok || c == nil {
		return nil
	}
	if err := c.MayCreate(name); err != nil {
		if count {
			a.cr.refused.Add(1)
		}
		return fmt.Errorf("%w: tag %q: %w", ErrCreateRefused, name, err)
	}
	return nil
}

// reserveTag takes a place under MaxTags for a creation of name; release
// gives it back once the tag is in the map (or was not created). count:
// a refusal is counted (not for a create-ahead, whose request asks again).
func (a *Allocator) reserveTag(name string, count ...bool) (release func(), err error) {
	if a.opts.MaxTags <= 0 {
		return func() {}, nil
	}
	a.cr.mu.Lock()
	defer a.cr.mu.Unlock()
	if n := a.tags.len() + a.cr.pending; n >= a.opts.MaxTags {
		if len(count) == 0 || count[0] {
			a.cr.refused.Add(1)
			a.cr.full.Add(1)
		}
		return nil, fmt.Errorf("%w: tag %q: %w: this server holds %d, the limit is %d", ErrCreateRefused, name, ErrTooManyTags, n, a.opts.MaxTags)
	}
	a.cr.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.cr.mu.Lock()
			a.cr.pending--
			a.cr.mu.Unlock()
		})
	}, nil
}

// admitCreate is mayCreate then reserveTag: what a request needs before it
// creates name; count as reserveTag's.
func (a *Allocator) admitCreate(ctx context.Context, name string, count bool) (release func(), err error) {
	if err := a.mayCreate(ctx, name, count); err != nil {
		return nil, err
	}
	return a.reserveTag(name, count)
}

// noteCreated counts a tag this server created and logs it (rate-limited).
func (a *Allocator) noteCreated(args ...any) {
	a.cr.created.Add(1)
	a.cr.log.Log(args...)
}
