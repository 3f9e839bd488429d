package durability_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/durability"
	"github.com/leaf-id/leaf/persist/sqlstore"
)

// script is a store whose durability check answers its entries in turn
// (the last one again once they are used up); calls receives the number
// of each call as it returns.
type script struct {
	mu      sync.Mutex
	answers []answer
	n       int
	calls   chan int
}

type answer struct {
	r   durability.Replication
	err error
}

func (s *script) Durability(context.Context) (durability.Replication, error) {
	s.mu.Lock()
	a := s.answers[min(s.n, len(s.answers)-1)]
	s.n++
	n := s.n
	s.mu.Unlock()
	if s.calls != nil {
		s.calls <- n
	}
	return a.r, a.err
}

var (
	single = durability.Replication{Kind: durability.ReplicationSingle, Safety: durability.Safe, Members: 1,
		Reason: "no standby streams from this server"}
	async = durability.Replication{Kind: durability.ReplicationPostgres, Safety: durability.Unsafe, Members: 2, Sync: -1, Async: -1,
		Reason: "1 standby streams asynchronously", Advice: "set synchronous_standby_names"}
	async2 = durability.Replication{Kind: durability.ReplicationPostgres, Safety: durability.Unsafe, Members: 3, Sync: -1, Async: -1,
		Reason: "2 standbys stream asynchronously", Advice: "set synchronous_standby_names"}
	hidden = durability.Replication{Kind: durability.ReplicationMySQL, Safety: durability.Unknown, Sync: -1, Async: -1,
		Reason: "cannot see replicas", Advice: "enable semi-synchronous replication"}
	down = errors.New("no answer")
)

// logger logs at debug level, as text, into a buffer.
func logger() (*slog.Logger, *logbuf.Buffer) {
	buf := &logbuf.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// lines are the log's lines at level (INFO, WARN, DEBUG).
func lines(buf *logbuf.Buffer, level string) []string {
	var out []string
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, "level="+level+" ") {
			out = append(out, l)
		}
	}
	return out
}

// The first result is logged, then only changes; a warning comes with
// every change to an unsafe result, and says that IDs could repeat and
// what to change. A check the database does not answer changes nothing.
func TestCheckLogsChanges(t *testing.T) {
	log, buf := logger()
	store := &script{answers: []answer{
		{r: single}, {r: single}, {err: down}, {r: async}, {r: async}, {r: hidden}, {r: async}, {r: async2},
	}}
	w := durability.New(store, durability.Options{Logger: log})
	if r := w.Last(); r.Safety != durability.Unknown || !strings.Contains(r.Reason, "not checked yet") {
		t.Errorf("before a check: %+v", r)
	}
	for i, want := range []struct {
		r        durability.Replication
		answered bool
		info     int // INFO lines so far
		warn     int // WARN lines so far
	}{
		{single, true, 1, 0},
		{single, true, 1, 0},
		{single, false, 1, 0},
		{async, true, 2, 1},
		{async, true, 2, 1},
		{hidden, true, 3, 1},
		{async, true, 4, 2},
		{async2, true, 5, 3},
	} {
		r, ok := w.Check(t.Context())
		if r != want.r || ok != want.answered || w.Last() != want.r {
			t.Errorf("check %d: %+v, %v (last %+v); want %+v, %v", i+1, r, ok, w.Last(), want.r, want.answered)
		}
		if info, warn := len(lines(buf, "INFO")), len(lines(buf, "WARN")); info != want.info || warn != want.warn {
			t.Fatalf("after check %d: %d INFO, %d WARN lines; want %d, %d\n%s", i+1, info, warn, want.info, want.warn, buf)
		}
	}
	info := lines(buf, "INFO")
	for i, want := range []string{
		`msg="store replication" kind=single durability=safe members=1 sync=0 async=0 reason="no standby streams from this server"`,
		`msg="store replication changed" kind=postgres_streaming durability=unsafe members=2 reason="1 standby streams asynchronously"`,
		`msg="store replication changed" kind=mysql_replication durability=unknown members=0 reason="cannot see replicas" advice="enable semi-synchronous replication"`,
	} {
		if !strings.Contains(info[i], want) {
			t.Errorf("INFO line %d:\n%s\nwant it to hold\n%s", i+1, info[i], want)
		}
	}
	warn := lines(buf, "WARN")[0]
	if want := `msg="` + durability.WarnMessage + `; 1 standby streams asynchronously" kind=postgres_streaming change="set synchronous_standby_names"`; !strings.Contains(warn, want) {
		t.Errorf("WARN line:\n%s\nwant it to hold\n%s", warn, want)
	}
	if d := lines(buf, "DEBUG"); len(d) != 1 || !strings.Contains(d[0], "no answer") {
		t.Errorf("DEBUG lines %q, want the one check not answered", d)
	}
}

// A store without the check, and a server's store whose database has not
// been opened yet: unknown, and no answer (the check comes again).
func TestUnknownStores(t *testing.T) {
	log, buf := logger()
	w := durability.New(struct{}{}, durability.Options{Logger: log})
	if r, ok := w.Check(t.Context()); !ok || r.Kind != durability.ReplicationUnknown || r.Safety != durability.Unknown ||
		!strings.Contains(r.Reason, "does not tell") {
		t.Errorf("a store without the check: %+v, %v", r, ok)
	}
	if len(lines(buf, "WARN")) != 0 {
		t.Errorf("unknown warned:\n%s", buf)
	}

	unreachable := fmt.Errorf("%w: refused", persist.ErrUnavailable)
	d, err := sqlstore.OpenDeferred(t.Context(), "test", func(context.Context) (persist.Backend, error) { return nil, unreachable }, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Durability(t.Context()); !errors.Is(err, persist.ErrUnavailable) {
		t.Errorf("a store not opened: %v, want ErrUnavailable", err)
	}
	w = durability.New(d, durability.Options{Logger: log})
	if r, ok := w.Check(t.Context()); ok || !strings.Contains(r.Reason, "not checked yet") {
		t.Errorf("a store not opened: %+v, %v; want no answer", r, ok)
	}
}

// Start checks at once, then again and again: a change after start is
// seen and warned about. The checks stop with the context.
func TestStartChecksAgain(t *testing.T) {
	log, buf := logger()
	store := &script{answers: []answer{{r: single}, {err: down}, {r: single}, {r: async}}, calls: make(chan int)}
	w := durability.New(store, durability.Options{Logger: log, Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	go func() {
		w.Start(ctx)
		close(started)
	}()
	if n := <-store.calls; n != 1 {
		t.Fatalf("call %d", n)
	}
	<-started
	if w.Last() != single {
		t.Errorf("after start: %+v", w.Last())
	}
	// The fifth call begins only once the fourth check is done.
	for n := range store.calls {
		if n == 5 {
			break
		}
	}
	cancel()
	go func() {
		for range store.calls { // a check running as the context ends
		}
	}()
	w.Wait()
	close(store.calls)
	if w.Last() != async {
		t.Errorf("last %+v, want %+v", w.Last(), async)
	}
	if warn := lines(buf, "WARN"); len(warn) != 1 {
		t.Errorf("%d warnings, want 1:\n%s", len(warn), buf)
	}
}

// ids is a store whose identity answers its entries in turn (the last one
// again once they are used up).
type ids struct {
	script
	ids []answerID
	n   int
}

type answerID struct {
	id  string
	err error
}

func (s *ids) StoreID(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.ids[min(s.n, len(s.ids)-1)]
	s.n++
	return a.id, a.err
}

// TestStoreID: each check reads the identity; it is kept through a check
// the database does not answer, logged when first read, and a change of
// it is a warning.
func TestStoreID(t *testing.T) {
	log, buf := logger()
	store := &ids{script: script{answers: []answer{{r: single}}},
		ids: []answerID{{id: "aaa"}, {id: "aaa"}, {err: down}, {id: "bbb"}, {id: ""}}}
	w := durability.New(store, durability.Options{Logger: log})
	if got := w.StoreID(); got != "" {
		t.Fatalf("StoreID before a check = %q", got)
	}
	for i, want := range []string{"aaa", "aaa", "aaa", "bbb", ""} {
		w.Check(t.Context())
		if got := w.StoreID(); got != want {
			t.Fatalf("after check %d: StoreID = %q, want %q", i+1, got, want)
		}
	}
	logs := buf.String()
	for what, n := range map[string]int{
		`level=INFO msg="store identity" store_id=aaa`:                 1,
		`msg="the store's identity changed`:                            1,
		`was=aaa store_id=bbb`:                                         1,
		`level=WARN msg="the store's identity is gone`:                 1,
		`level=DEBUG msg="store identity: the database did not answer`: 1,
	} {
		if got := strings.Count(logs, what); got != n {
			t.Errorf("%d lines with %q, want %d; log:\n%s", got, what, n, logs)
		}
	}
	// A store that keeps no identity: "", and nothing logged of it.
	log2, buf2 := logger()
	w2 := durability.New(&script{answers: []answer{{r: single}}}, durability.Options{Logger: log2})
	w2.Check(t.Context())
	if got := w2.StoreID(); got != "" || strings.Contains(buf2.String(), "identity") {
		t.Errorf("a store without identity: StoreID %q; log:\n%s", got, buf2.String())
	}
}
