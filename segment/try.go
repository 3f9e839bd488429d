package segment

// Non-blocking variants, for a caller that must never wait (a server's
// event loop serves many clients on one goroutine): each does what its
// blocking counterpart does first, and reports false where that one would
// go on to the database or wait. The caller then calls the blocking one
// where waiting is fine. See "Callers that must not wait" in doc.go.

// Known returns the tag named name if this allocator knows it already, nil
// otherwise (Lookup would then ask the database). It never blocks.
func (a *Allocator) Known(name []byte) *Tag { return a.tags.getBytes(name) }

// TryNextN is NextN without waiting: it takes n IDs from the current
// segment when they fit there and returns the last one, exactly as NextN's
// first step does, or from the next segment when it is loaded and the
// tag's lock is free to switch to it; otherwise it takes nothing and ok is
// false, and NextN must be called (it switches segments, takes a dedicated
// range or waits for a load). It never blocks nor calls the database; it
// may queue the prefetch, as NextN does.
func (t *Tag) TryNextN(n int64) (last int64, ok bool) {
	if n <= 0 || n > t.a.opts.MaxBatch {
		return 0, false
	}
	if t.gen != nil {
		last, ok = t.gen.TryNextN(n)
		if ok {
			t.genIssued.Add(n)
			t.noteGenLast(last)
		}
		return last, ok
	}
	if t.a.held.Load() != nil {
		return 0, false
	}
	s := t.cur.Load()
	if last, ok = t.take(s, n); ok {
		return last, true
	}
	// The next segment may be ready (loaded in a group with others): the
	// switch to it takes the tag's lock, held only briefly, yet never
	// waited for here.
	if !t.mu.TryLock() {
		return 0, false
	}
	switched := t.cur.Load() == s && t.next != nil && n <= t.next.size && !t.a.closed.Load()
	if switched {
		t.switchLocked()
	}
	t.mu.Unlock()
	if !switched {
		return 0, false
	}
	return t.take(t.cur.Load(), n)
}
