package segment

// What the cluster registry (package cluster) asks of the allocator, besides
// the right to serve from the cache (lease.go: Serve, Admit, Hold,
// Release) and the guard of Close's give-backs (Fence, shutdown.go): to
// apply the changes made through other servers.

// SkipTo applies a floor set through another server: this server's cached
// IDs of the tag at or below n are skipped, and ranges at or below it
// refused from now on, including the range of a load already on its way.
// A name not in the map may have its first load on its way (Prepare): the
// floor is applied to it, whose range is then refused and the name looked
// up again. Otherwise there is nothing to do for a name this server does
// not know: it has nothing cached, and its loads start after this call,
// from the store, which holds the floor since before it was published.
func (a *Allocator) SkipTo(name string, n int64) {
	t := a.tags.get(name)
	if t == nil {
		a.mu.Lock()
		if t = a.tags.get(name); t == nil {
			if c := a.pending[name]; c != nil {
				t = c.first
			}
		}
		a.mu.Unlock()
	}
	if t != nil && t.gen == nil {
		t.skipTo(n)
		a.log.Info("tag floor applied", "tag", name, "floor", n)
	}
}

// ApplyStep applies a step changed through another server: the floor of
// the tag's adaptive step, from its next load.
func (a *Allocator) ApplyStep(name string, step int64) {
	if t := a.tags.get(name); t != nil && t.gen == nil {
		t.mu.Lock()
		t.setStepLocked(step)
		t.mu.Unlock()
	}
}

// DropCached skips every ID cached by every segment tag, and refuses the
// ranges of loads in flight: for a server that missed changes it cannot
// read any more (the log moved on, or was emptied), whose floors may be
// anywhere. Later loads come from the store, which holds them all.
func (a *Allocator) DropCached() {
	a.drops.Add(1)
	for _, t := range a.tags.all() {
		if t.gen != nil {
			continue
		}
		t.mu.Lock()
		n := t.high - 1
		t.mu.Unlock()
		if n > 0 {
			t.skipTo(n)
		}
	}
	a.log.Warn("dropped every cached ID: changes made through other servers could not be read")
}
