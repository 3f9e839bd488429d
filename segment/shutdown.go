package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/leaf-id/leaf/persist"
)

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
	if !t.init || t.dedicating > 0 {
		// A dedicated range in flight may commit after the give-back
		// and start where it lowered max_id, below the segment it was
		// asked beside: the unused IDs stay a gap instead.
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
