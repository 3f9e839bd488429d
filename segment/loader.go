package segment

import "sync"

// loaderPool runs segment loads on a fixed number of workers. The queue
// holds each tag at most once: a tag is pushed only when it has no load in
// flight (Tag.loading), so its length is bounded by the number of tags and
// the number of goroutines and database connections by the worker count.
type loaderPool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*Tag
	head   int
	closed bool
	wg     sync.WaitGroup
}

func newLoaderPool(workers int, run func(*Tag)) *loaderPool {
	p := &loaderPool{}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(workers)
	for range workers {
		go p.work(run)
	}
	return p
}

// push queues a tag. It reports false when the pool is closed.
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

func (p *loaderPool) pop() (*Tag, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head == len(p.queue) && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return nil, false
	}
	t := p.queue[p.head]
	p.queue[p.head] = nil
	p.head++
	if p.head == len(p.queue) {
		// Reuse the backing array once drained.
		p.queue, p.head = p.queue[:0], 0
	}
	return t, true
}

func (p *loaderPool) work(run func(*Tag)) {
	defer p.wg.Done()
	for {
		t, ok := p.pop()
		if !ok {
			return
		}
		run(t)
	}
}

// close stops the workers after their current load and returns the tags
// that were still queued, so their waiters can be released.
func (p *loaderPool) close() []*Tag {
	p.mu.Lock()
	p.closed = true
	left := append([]*Tag(nil), p.queue[p.head:]...)
	p.queue, p.head = nil, 0
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return left
}

// pending is the number of queued loads.
func (p *loaderPool) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) - p.head
}
