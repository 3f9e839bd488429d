// Package faultstore is the persist.Store of tests that need a database to
// misbehave on cue. A Store wraps another store (a real one, or Memory,
// an in-memory database of its own) and puts faults on the calls that
// pass through it: it fails them at once (Fail), holds them until the test
// releases them or their context ends (Hold, Hang), delays them on a clock
// the test gives (Delay), or lets a Take commit and then loses its answer,
// the ambiguous case (Lose). It counts the calls of each kind and keeps
// every range its base committed, answered or not, so a test can check
// that no ID was handed out twice, even across lost answers.
//
// Faults are plain functions (Fault, Answer), set and replaced while the
// store is in use: a test that needs an unusual fault writes one.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leaf-id/leaf/persist"
)

// Op is the kind of a call: the method of persist.Store or persist.Admin
// it is.
type Op uint8

// The calls a fault can meet. A TakeBatch is met as its requests, each an
// OpTake, after an OpCreate when it asks to create its row.
const (
	OpTake Op = iota
	OpTags
	OpTag
	OpCreate
	OpGiveBack
	OpSetStep
	OpRaiseFloor
	opCount
)

func (o Op) String() string {
	switch o {
	case OpTake:
		return "Take"
	case OpTags:
		return "Tags"
	case OpTag:
		return "Tag"
	case OpCreate:
		return "Create"
	case OpGiveBack:
		return "GiveBack"
	case OpSetStep:
		return "SetStep"
	case OpRaiseFloor:
		return "RaiseFloor"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ops is a set of Ops; the empty set stands for every one.
type ops uint16

func opsOf(list []Op) ops {
	var s ops
	for _, o := range list {
		s |= 1 << o
	}
	return s
}

func (s ops) has(o Op) bool { return s == 0 || s&(1<<o) != 0 }

// Call is one call to the store, as a fault sees it.
type Call struct {
	Op  Op
	Tag string // the tag, or the name asked for; "" for Tags
	// Size is Take's size, Create's and SetStep's step, RaiseFloor's
	// floor.
	Size     int64
	From, To int64 // GiveBack's
}

// Fault runs before a call reaches the store: nil lets the call through,
// an error is the call's answer. It may block, holding the call; one that
// does should end when ctx does, as a database call would.
type Fault func(ctx context.Context, c Call) error

// Answer runs once a Take has committed in the store, before it answers:
// it returns what the Take answers. An error loses the range: the database
// took it and the caller never learns which it was.
type Answer func(ctx context.Context, c Call, r persist.Range) (persist.Range, error)

// Store is a persist.Store (and persist.Admin) that passes every call to
// its base, through the faults the test has set. It is safe for
// concurrent use; faults may be set and removed while calls run.
type Store struct {
	base persist.Store

	mu       sync.Mutex
	fail     error
	failOps  ops
	fault    Fault
	faultOps ops
	answer   Answer
	calls    [opCount]int
	taken    []persist.Range
	batches  []int
}

var (
	_ persist.Store = (*Store)(nil)
	_ persist.Admin = (*Store)(nil)
)

// New wraps base, with no fault set: every call passes as it comes.
func New(base persist.Store) *Store { return &Store{base: base} }

// Fail makes every call of ops (of every kind when ops is empty) answer
// err at once, before any other fault, without reaching the store: a
// database that refuses connections. Fail(nil) brings the store back.
func (s *Store) Fail(err error, ops ...Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.failOps = err, opsOf(ops)
}

// Inject runs f before every call of ops (of every kind when ops is
// empty) that Fail lets through, in place of the fault injected before;
// nil removes it.
func (s *Store) Inject(f Fault, ops ...Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultOps = f, opsOf(ops)
}

// InjectAnswer runs f on every Take that committed, in place of the one
// injected before; nil removes it.
func (s *Store) InjectAnswer(f Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

// Calls is the number of calls of ops so far (of every kind when ops is
// empty), counted as they arrive, whatever a fault then made of them.
func (s *Store) Calls(ops ...Op) int {
	set := opsOf(ops)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for o, c := range s.calls {
		if set.has(Op(o)) {
			n += c
		}
	}
	return n
}

// Taken is every range the base committed for a Take through this store,
// in order, including those whose answer a fault lost.
func (s *Store) Taken() []persist.Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]persist.Range(nil), s.taken...)
}

// Batches is the number of requests of each TakeBatch so far, in order.
func (s *Store) Batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

// enter counts c and applies the faults set for its kind.
func (s *Store) enter(ctx context.Context, c Call) error {
	s.mu.Lock()
	s.calls[c.Op]++
	fail, fault := s.fail, s.fault
	if !s.failOps.has(c.Op) {
		fail = nil
	}
	if !s.faultOps.has(c.Op) {
		fault = nil
	}
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	if fault != nil {
		return fault(ctx, c)
	}
	return nil
}

// Take implements persist.Store.
func (s *Store) Take(ctx context.Context, tag string, size int64) (persist.Range, error) {
	c := Call{Op: OpTake, Tag: tag, Size: size}
	if err := s.enter(ctx, c); err != nil {
		return persist.Range{}, err
	}
	r, err := s.base.Take(ctx, tag, size)
	if err != nil {
		return persist.Range{}, err
	}
	s.mu.Lock()
	s.taken = append(s.taken, r)
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		return r, nil
	}
	if r, err = answer(ctx, c, r); err != nil {
		return persist.Range{}, err
	}
	return r, nil
}

// TakeBatch implements persist.Store: each request goes through Create
// (when it asks) and Take, so that faults meet it as the calls it stands
// for. The base's own TakeBatch is not used: a batch here is not one
// transaction.
func (s *Store) TakeBatch(ctx context.Context, reqs []persist.TakeRequest) []persist.TakeResult {
	s.mu.Lock()
	s.batches = append(s.batches, len(reqs))
	s.mu.Unlock()
	return takeEach(ctx, reqs, s.Take, s.Create)
}

// Tags implements persist.Store.
func (s *Store) Tags(ctx context.Context) ([]persist.Tag, error) {
	if err := s.enter(ctx, Call{Op: OpTags}); err != nil {
		return nil, err
	}
	return s.base.Tags(ctx)
}

// Tag implements persist.Store.
func (s *Store) Tag(ctx context.Context, name string) (persist.Tag, error) {
	if err := s.enter(ctx, Call{Op: OpTag, Tag: name}); err != nil {
		return persist.Tag{}, err
	}
	return s.base.Tag(ctx, name)
}

// Create implements persist.Store.
func (s *Store) Create(ctx context.Context, name string, step int64, description string) (bool, error) {
	if err := s.enter(ctx, Call{Op: OpCreate, Tag: name, Size: step}); err != nil {
		return false, err
	}
	return s.base.Create(ctx, name, step, description)
}

// GiveBack implements persist.Store.
func (s *Store) GiveBack(ctx context.Context, tag string, from, to int64) (bool, error) {
	if err := s.enter(ctx, Call{Op: OpGiveBack, Tag: tag, From: from, To: to}); err != nil {
		return false, err
	}
	return s.base.GiveBack(ctx, tag, from, to)
}

// Close closes the base; it meets no fault.
func (s *Store) Close() error { return s.base.Close() }

// ErrNoAdmin: an Admin call on a store whose base does not implement
// persist.Admin.
var ErrNoAdmin = errors.New("faultstore: the base store does not implement persist.Admin")

// SetStep implements persist.Admin.
func (s *Store) SetStep(ctx context.Context, tag string, step int64) error {
	ad, ok := s.base.(persist.Admin)
	if !ok {
		return ErrNoAdmin
	}
	if err := s.enter(ctx, Call{Op: OpSetStep, Tag: tag, Size: step}); err != nil {
		return err
	}
	return ad.SetStep(ctx, tag, step)
}

// RaiseFloor implements persist.Admin.
func (s *Store) RaiseFloor(ctx context.Context, tag string, floor int64) (persist.Tag, bool, error) {
	ad, ok := s.base.(persist.Admin)
	if !ok {
		return persist.Tag{}, false, ErrNoAdmin
	}
	if err := s.enter(ctx, Call{Op: OpRaiseFloor, Tag: tag, Size: floor}); err != nil {
		return persist.Tag{}, false, err
	}
	return ad.RaiseFloor(ctx, tag, floor)
}
