package faultstore

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/leaf-id/leaf/persist"
)

// Memory is an in-memory database behind a Store: Leaf's table as a map,
// and optionally the persistent guard (WithGuard). It keeps the contract of
// persist.Store and persist.Admin as the backends do (ranges taken under
// one lock never overlap, a give-back is a compare-and-set, a call whose
// context has ended fails with ErrUnavailable), and takes the changes an
// operator makes by hand (Put, Delete, SetMaxID).
type Memory struct {
	mu    sync.Mutex
	rows  map[string]persist.Tag
	guard map[string]int64 // the end of the highest range handed out; nil: off
}

var (
	_ persist.Store   = (*Memory)(nil)
	_ persist.Admin   = (*Memory)(nil)
	_ persist.Guarded = (*Memory)(nil)
)

// NewMemory is a database with a row for each tag of steps, of that step,
// max_id 1, without the persistent guard.
func NewMemory(steps map[string]int64) *Memory {
	m := &Memory{rows: make(map[string]persist.Tag, len(steps))}
	for name, step := range steps {
		m.rows[name] = persist.Tag{Name: name, MaxID: 1, Step: step}
	}
	return m
}

// WithGuard turns the persistent guard on, as the backends keep it in
// leaf_guard: a Take never answers below a range taken before, even once
// max_id was lowered or the row re-created by hand (Range.Repaired).
func (m *Memory) WithGuard() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.guard == nil {
		m.guard = map[string]int64{}
	}
	return m
}

// GuardEnabled implements persist.Guarded.
func (m *Memory) GuardEnabled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.guard != nil
}

// Take implements persist.Store.
func (m *Memory) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	if err := check(ctx, "take", tag); err != nil {
		return persist.Range{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return persist.Range{}, fmt.Errorf("take %q: %w", tag, persist.ErrNotFound)
	}
	if size <= 0 {
		size = row.Step
	}
	if row.MaxID > math.MaxInt64-size {
		return persist.Range{}, fmt.Errorf("take %q: %w", tag, persist.ErrOverflow)
	}
	r := persist.Range{Start: row.MaxID, End: row.MaxID + size, Step: row.Step}
	if m.guard != nil {
		if high := m.guard[tag]; r.Start < high {
			if high > math.MaxInt64-size {
				return persist.Range{}, fmt.Errorf("take %q: %w", tag, persist.ErrOverflow)
			}
			r = persist.Range{Start: high, End: high + size, Step: row.Step, Repaired: true, Answered: r.Start}
		}
		m.guard[tag] = r.End
	}
	row.MaxID = r.End
	m.rows[tag] = row
	return r, nil
}

// TakeBatch implements persist.Store, one request after the other.
func (m *Memory) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	return takeEach(ctx, reqs, m.Take, m.Create)
}

// Tags implements persist.Store; the rows come in the order of their
// names.
func (m *Memory) Tags(ctx context.Context) ([]persist.Tag, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tags: %w: %w", persist.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]persist.Tag, 0, len(m.rows))
	for _, row := range m.rows {
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b persist.Tag) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Tag implements persist.Store.
func (m *Memory) Tag(ctx context.Context, name string) (persist.Tag, error) {
	if err := check(ctx, "tag", name); err != nil {
		return persist.Tag{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[name]
	if !ok {
		return persist.Tag{}, fmt.Errorf("tag %q: %w", name, persist.ErrNotFound)
	}
	return row, nil
}

// Create implements persist.Store.
func (m *Memory) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	if err := check(ctx, "create", name); err != nil {
		return false, err
	}
	if err := persist.CheckStep(step); err != nil {
		return false, fmt.Errorf("create %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rows[name]; ok {
		return false, nil
	}
	m.rows[name] = persist.Tag{Name: name, MaxID: 1, Step: step, Description: description}
	return true, nil
}

// GiveBack implements persist.Store.
func (m *Memory) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	if err := check(ctx, "give back", tag); err != nil {
		return false, err
	}
	if to < 1 || to >= from {
		return false, fmt.Errorf("give back %q: %w: from %d to %d", tag, persist.ErrInvalid, from, to)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok || row.MaxID != from {
		return false, nil
	}
	row.MaxID = to
	m.rows[tag] = row
	if m.guard != nil && m.guard[tag] == from {
		m.guard[tag] = to
	}
	return true, nil
}

// Close implements persist.Store; the data stays.
func (m *Memory) Close() error { return nil }

// SetStep implements persist.Admin.
func (m *Memory) SetStep(ctx context.Context, tag string, step int64) error {
	if err := check(ctx, "set step", tag); err != nil {
		return err
	}
	if err := persist.CheckStep(step); err != nil {
		return fmt.Errorf("set step %q: %w", tag, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return fmt.Errorf("set step %q: %w", tag, persist.ErrNotFound)
	}
	row.Step = step
	m.rows[tag] = row
	return nil
}

// RaiseFloor implements persist.Admin.
func (m *Memory) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	if err := check(ctx, "raise floor", tag); err != nil {
		return persist.Tag{}, false, err
	}
	if floor == math.MaxInt64 {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w: floor %d", tag, persist.ErrOverflow, floor)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return persist.Tag{}, false, fmt.Errorf("raise floor %q: %w", tag, persist.ErrNotFound)
	}
	if row.MaxID > floor {
		return row, false, nil
	}
	row.MaxID = floor + 1
	m.rows[tag] = row
	return row, true, nil
}

// Put writes a row as given, as a hand-written INSERT (or UPDATE) would;
// the guard is left as it is.
func (m *Memory) Put(row persist.Tag) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[row.Name] = row
}

// Delete removes the tag's row, as a hand-written DELETE would; the guard
// is left as it is.
func (m *Memory) Delete(tag string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, tag)
}

// SetMaxID sets the row's max_id, as a hand-written UPDATE would; the
// guard is left as it is. It does nothing when the tag has no row.
func (m *Memory) SetMaxID(tag string, maxID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if row, ok := m.rows[tag]; ok {
		row.MaxID = maxID
		m.rows[tag] = row
	}
}

// MaxID reads the row's max_id; 0 when the tag has no row.
func (m *Memory) MaxID(tag string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rows[tag].MaxID
}

// check refuses what a backend refuses before it reaches the database: a
// call whose context has ended, an invalid tag.
func check(ctx context.Context, what, tag string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w: %w", what, tag, persist.ErrUnavailable, err)
	}
	if err := persist.CheckTag(tag); err != nil {
		return fmt.Errorf("%s %q: %w", what, tag, err)
	}
	return nil
}

// takeEach answers a batch one request at a time, with create (Store's
// Create, for a request that asks to create its row) then take (Store's
// Take): TakeBatch's results without its single round trip, each request
// meeting the faults as the calls it stands for.
func takeEach(ctx context.Context, reqs []persist.TakeRequest,
	take func(ctx context.Context, tag string, size int64) (persist.Range, error),
	create func(ctx context.Context, name string, step int64, description string) (bool, error),
) []persist.TakeResult {
	res := make([]persist.TakeResult, len(reqs))
	for i, q := range reqs {
		if q.Create != 0 {
			created, err := create(ctx, q.Tag, q.Create, "")
			if err != nil {
				res[i].Err = err
				continue
			}
			res[i].Created = created
		}
		res[i].Range, res[i].Err = take(ctx, q.Tag, q.Size)
	}
	return res
}
