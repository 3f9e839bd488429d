package faultstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// unavailable is how a database call that ran out of time answers: its
// context's error as persist.ErrUnavailable, as the backends wrap it.
func unavailable(ctx context.Context) error {
	return fmt.Errorf("%w: %w", persist.ErrUnavailable, ctx.Err())
}

// Hang is a Fault that holds a call until its context ends, as a database
// that stopped answering: only the caller's deadline ends the call.
func Hang(ctx context.Context, _ Call) error {
	<-ctx.Done()
	return unavailable(ctx)
}

// Delay is a Fault that holds each call for d on the clock of after
// (time.After, or a test's own clock), or until its context ends: a
// database with latency.
func Delay(d time.Duration, after func(time.Duration) <-chan time.Time) Fault {
	return func(ctx context.Context, _ Call) error {
		select {
		case <-after(d):
			return nil
		case <-ctx.Done():
			return unavailable(ctx)
		}
	}
}

// Lose is an Answer that loses the answers of the next n Takes that
// commit: each answers err instead of its range, as when the connection
// breaks once COMMIT was sent (persist.ErrAmbiguous when the database can
// tell). The Takes after them answer as they come.
func Lose(n int, err error) Answer {
	var mu sync.Mutex
	return func(_ context.Context, c Call, r persist.Range) (persist.Range, error) {
		mu.Lock()
		lose := n > 0
		if lose {
			n--
		}
		mu.Unlock()
		if lose {
			return persist.Range{}, fmt.Errorf("take %q: %w", c.Tag, err)
		}
		return r, nil
	}
}

// Hold holds calls until the test releases them. Its Fault announces each
// call it holds on Entered, so a test knows the call reached the store,
// and lets them all go on to the store at Release.
type Hold struct {
	entered chan Call
	release chan struct{}
	once    sync.Once
}

// NewHold is a Hold that holds every call its Fault meets.
func NewHold() *Hold {
	return &Hold{entered: make(chan Call), release: make(chan struct{})}
}

// Fault holds c: it offers c on Entered, and waits until Release, when
// the call goes on to the store, or until ctx ends, when it answers
// ErrUnavailable with the context's error.
func (h *Hold) Fault(ctx context.Context, c Call) error {
	select {
	case h.entered <- c:
	case <-h.release:
		return nil
	case <-ctx.Done():
		return unavailable(ctx)
	}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return unavailable(ctx)
	}
}

// Entered receives each call held, once it is held; a call nobody
// receives is held all the same.
func (h *Hold) Entered() <-chan Call { return h.entered }

// Release lets every call held, and every later one, go on to the store.
// It may be called more than once.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }
