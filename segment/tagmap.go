package segment

import (
	"sync"
	"sync/atomic"
)

// tagMap maps tag names to tags. Reads of known tags take no lock and do not
// allocate: they look up an immutable map behind an atomic pointer. New tags
// go to a dirty copy under a mutex, which is published once enough lookups
// have missed the read map (sync.Map's scheme, typed, so a []byte key needs
// no conversion to an interface).
type tagMap struct {
	read   atomic.Pointer[map[string]*Tag]
	mu     sync.Mutex
	dirty  map[string]*Tag // superset of read; nil when read is complete
	misses int
}

func newTagMap() *tagMap {
	m := &tagMap{}
	empty := map[string]*Tag{}
	m.read.Store(&empty)
	return m
}

// getBytes finds a tag by a byte-slice name without allocating.
func (m *tagMap) getBytes(name []byte) *Tag {
	if t := (*m.read.Load())[string(name)]; t != nil {
		return t
	}
	return m.getSlow(string(name))
}

// get finds a tag by name.
func (m *tagMap) get(name string) *Tag {
	if t := (*m.read.Load())[name]; t != nil {
		return t
	}
	return m.getSlow(name)
}

func (m *tagMap) getSlow(name string) *Tag {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := (*m.read.Load())[name]; t != nil {
		return t
	}
	if m.dirty == nil {
		return nil
	}
	t := m.dirty[name]
	m.misses++
	if m.misses >= len(m.dirty) {
		m.promoteLocked()
	}
	return t
}

func (m *tagMap) promoteLocked() {
	d := m.dirty
	m.read.Store(&d)
	m.dirty = nil
	m.misses = 0
}

// add inserts the tags not yet present and returns, for each, the tag that
// is in the map afterwards (the existing one when the name was taken).
func (m *tagMap) add(tags ...*Tag) []*Tag {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirty == nil {
		read := *m.read.Load()
		m.dirty = make(map[string]*Tag, len(read)+len(tags))
		for k, v := range read {
			m.dirty[k] = v
		}
	}
	out := make([]*Tag, len(tags))
	for i, t := range tags {
		if old, ok := m.dirty[t.name]; ok {
			out[i] = old
			continue
		}
		m.dirty[t.name] = t
		out[i] = t
	}
	if len(tags) > 1 {
		// A bulk load (start-up, sync) publishes at once.
		m.promoteLocked()
	}
	return out
}

// all returns every tag, in no order.
func (m *tagMap) all() []*Tag {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.dirty
	if src == nil {
		src = *m.read.Load()
	}
	out := make([]*Tag, 0, len(src))
	for _, t := range src {
		out = append(out, t)
	}
	return out
}

// len is the number of tags.
func (m *tagMap) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirty != nil {
		return len(m.dirty)
	}
	return len(*m.read.Load())
}
