package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/leaf-id/leaf/internal/idtest"
	"github.com/leaf-id/leaf/internal/logbuf"
)

// creatorFunc is a Creator from a function.
type creatorFunc func(name string) error

func (f creatorFunc) MayCreate(name string) error { return f(name) }

// TestMaxTags: past Options.MaxTags, creating a tag (a first INCR, the
// create-ahead of a pipeline, Create) is refused with ErrTooManyTags and
// writes no row, while the tags held and the rows already in the store
// serve on.
func TestMaxTags(t *testing.T) {
	store := newFakeStore(map[string]int64{"old": 10})
	o := testOptions(newClock())
	o.MaxTags = 3
	a := newTestAllocator(t, store, o)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := a.Next(ctx, name); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name   string
		create func() error
	}{
		{"first request", func() error { _, err := a.Next(ctx, "c"); return err }},
		{"LEAF.CREATE", func() error { return a.Create(ctx, "c", 0, "") }},
		{"floor", func() error { _, err := a.Floor(ctx, "c", 100); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create()
			if !errors.Is(err, ErrCreateRefused) || !errors.Is(err, ErrTooManyTags) || !strings.Contains(err.Error(), "the limit is 3") {
				t.Fatalf("err %v, want ErrTooManyTags", err)
			}
		})
	}
	a.PrepareCtx(ctx, []byte("c")) // a pipeline's create-ahead: nothing queued
	if _, err := store.Tag(ctx, "c"); err == nil {
		t.Fatal("a refused creation wrote a row")
	}
	for _, name := range []string{"old", "a", "b"} {
		if _, err := a.Next(ctx, name); err != nil {
			t.Errorf("tag %s after the limit: %v", name, err)
		}
	}
	st := a.CreateStats()
	if st.Created != 2 || st.Full != 3 || st.Refused != 3 {
		t.Errorf("CreateStats %+v, want 2 created, 3 refused as full", st)
	}
}

// TestCreatorDecides: a request's Creator may refuse a creation; the
// refusal is its own (another requester creates the tag right after), and
// a tag with a row is found whatever the Creator says.
func TestCreatorDecides(t *testing.T) {
	store := newFakeStore(map[string]int64{"known": 10})
	a := newTestAllocator(t, store, testOptions(newClock()))
	asked := 0
	no := WithCreator(context.Background(), creatorFunc(func(name string) error {
		asked++
		return fmt.Errorf("not you (%s)", name)
	}))
	_, err := a.Next(no, "fresh")
	if !errors.Is(err, ErrCreateRefused) || errors.Is(err, ErrUnknownTag) || !strings.Contains(err.Error(), "not you (fresh)") {
		t.Fatalf("refused creation: %v", err)
	}
	if _, err := a.Next(no, "known"); err != nil {
		t.Fatalf("a tag with a row, with a refusing Creator: %v", err)
	}
	if _, err := a.Next(NoCreate(context.Background()), "fresh"); !errors.Is(err, ErrCreateRefused) {
		t.Fatalf("NoCreate: %v", err)
	}
	if id, err := a.Next(context.Background(), "fresh"); err != nil || id != 1 {
		t.Fatalf("another requester right after: %d, %v; want 1", id, err)
	}
	if asked != 1 {
		t.Errorf("the Creator was asked %d times, want 1 (not for a tag with a row)", asked)
	}
	if st := a.CreateStats(); st.Created != 1 || st.Refused != 2 || st.Full != 0 {
		t.Errorf("CreateStats %+v", st)
	}
}

// TestCreatesAtTheLimitNeverRepeat: many requesters racing to create more
// tags than the limit allows, each tag from many goroutines: exactly
// MaxTags tags exist, and no ID of any of them is handed out twice.
func TestCreatesAtTheLimitNeverRepeat(t *testing.T) {
	store := newFakeStore(nil)
	o := testOptions(newClock())
	o.MaxTags = 5
	o.DefaultStep = 7 // many loads
	a := newTestAllocator(t, store, o)
	const names, workers, each = 12, 4, 40
	ids := make(map[string]chan int64, names)
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := map[string]bool{}
	for i := range names {
		name := fmt.Sprintf("t%d", i)
		ch := make(chan int64, workers*each)
		ids[name] = ch
		for range workers {
			wg.Go(func() {
				for range each {
					if i%3 == 0 {
						a.PrepareCtx(context.Background(), []byte(name))
					}
					id, err := a.Next(context.Background(), name)
					if errors.Is(err, ErrTooManyTags) {
						mu.Lock()
						refused[name] = true
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					ch <- id
				}
			})
		}
	}
	wg.Wait()
	served := 0
	for name, ch := range ids {
		close(ch)
		n := len(ch)
		if n > 0 {
			served++
			if refused[name] {
				t.Errorf("tag %s both served and refused as one too many", name)
			}
			idtest.Unique(t, ch, workers*each)
		}
	}
	if served != o.MaxTags || a.Stats().Tags != o.MaxTags {
		t.Fatalf("%d tags served, %d held; want %d", served, a.Stats().Tags, o.MaxTags)
	}
}

// TestTagCreatedLogIsRateLimited: the first ten creations of a minute are
// logged one by one, the rest in one summary when the minute ends.
func TestTagCreatedLogIsRateLimited(t *testing.T) {
	c := newClock()
	o := testOptions(c)
	o.AfterFunc = c.AfterFunc
	var buf logbuf.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	a := newTestAllocator(t, newFakeStore(nil), o)
	for i := range 25 {
		if _, err := a.Next(context.Background(), fmt.Sprintf("n%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(buf.String(), `msg="tag created"`); got != 10 {
		t.Fatalf("%d lines before the minute ends, want 10:\n%s", got, buf.String())
	}
	c.Add(o.SyncInterval) // a minute: the window ends
	if !strings.Contains(buf.String(), `msg="tag created 15 more times in the last minute" not_logged=15`) {
		t.Fatalf("no summary of the 15 others:\n%s", buf.String())
	}
}
