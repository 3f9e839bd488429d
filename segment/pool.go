package segment

import "sync"

// loaderPool runs segment loads on a fixed number of workers, so the number
// of goroutines and database connections stays bounded whatever the number
// of tags. A worker takes every load queued when it looks, up to batch,
// and runs them as one store round trip (group commit: one transaction,
// one fsync, for many tags). It has two queues. The first holds the loads requests wait for
// and prefetches, in order. The second holds background reloads (the tags
// parked while the store was away): a worker takes one only when the first
// queue is empty, and at most half the workers run them at once, so a
// backlog of reloads after an outage never delays a request, nor floods a
// database that has just come back. A tag is in each queue at most once:
// it is pushed only when it has no load in flight (Tag.inflight), and again
// to the first queue only when a request promotes its background load.
type loaderPool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*Tag
	head   int
	low    []*Tag // background reloads
	lowAt  int    // head of low
	lowRun int    // background reloads running
	maxLow int    // of the workers, how many may run background reloads
	batch  int    // most loads a worker takes at once
	closed bool
	wg     sync.WaitGroup
}

func newLoaderPool(workers, batch int, run func([]*Tag)) *loaderPool {
	p := &loaderPool{maxLow: max(1, workers/2), batch: max(1, batch)}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(workers)
	for range workers {
		go p.work(run)
	}
	return p
}

// push queues a tag in the first queue. It reports false when the pool is
// closed.
func (p *loaderPool) push(t *Tag) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.queue = append(p.queue, t)
	p.cond.Signal()
	return true
}

// pushLow queues a background reload. It reports false when the pool is
// closed.
func (p *loaderPool) pushLow(t *Tag) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.low = append(p.low, t)
	p.cond.Signal()
	return true
}

// pop returns the next loads to run, up to p.batch of them from the
// first queue, or one background reload, and whether it is that.
func (p *loaderPool) pop() (ts []*Tag, low, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed {
		if p.head < len(p.queue) {
			n := min(len(p.queue)-p.head, p.batch)
			ts = append(ts, p.queue[p.head:p.head+n]...)
			clear(p.queue[p.head : p.head+n])
			p.head += n
			if p.head == len(p.queue) {
				// Reuse the backing array once drained.
				p.queue, p.head = p.queue[:0], 0
			}
			return ts, false, true
		}
		if p.lowAt < len(p.low) && p.lowRun < p.maxLow {
			// One at a time: a request that comes for a tag whose reload
			// has not started promotes it, and must not find it in a
			// batch held up by a reload that hangs.
			ts = append(ts, p.low[p.lowAt])
			p.low[p.lowAt] = nil
			p.lowAt++
			if p.lowAt == len(p.low) {
				p.low, p.lowAt = p.low[:0], 0
			}
			p.lowRun++
			return ts, true, true
		}
		p.cond.Wait()
	}
	return nil, false, false
}

func (p *loaderPool) work(run func([]*Tag)) {
	defer p.wg.Done()
	for {
		ts, low, ok := p.pop()
		if !ok {
			return
		}
		run(ts)
		if low {
			p.mu.Lock()
			p.lowRun--
			p.cond.Signal() // a worker may take the next background reload
			p.mu.Unlock()
		}
	}
}

// close stops the workers after their current load and returns the tags
// that were still queued, so their waiters can be released.
func (p *loaderPool) close() []*Tag {
	p.mu.Lock()
	p.closed = true
	left := append(append([]*Tag(nil), p.queue[p.head:]...), p.low[p.lowAt:]...)
	p.queue, p.head, p.low, p.lowAt = nil, 0, nil, 0
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return left
}

// pending is the number of queued loads.
func (p *loaderPool) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) - p.head + len(p.low) - p.lowAt
}
