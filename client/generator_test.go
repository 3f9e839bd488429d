package client_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/client"
	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// TestContiguous: the only user of a tag gets every ID in order, lease
// after lease; NextN owns exactly the n IDs up to the one it returns, and
// when they do not fit in the current lease they come from the next one.
func TestContiguous(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		t.Run("Next", func(t *testing.T) {
			rdb := newRedis(t, addr)
			log := logLeases(rdb)
			g := newGen(t, rdb, "contiguous", client.Options{MinLease: 3, MaxLease: 40})
			for want := int64(1); want <= 2000; want++ {
				if got := next(t, g); got != want {
					t.Fatalf("Next = %d, want %d", got, want)
				}
			}
			if n := len(log.Sizes()); n < 2000/40 {
				t.Errorf("%d leases for 2000 IDs of leases of at most 40", n)
			}
		})
		t.Run("NextN", func(t *testing.T) {
			g := newGen(t, newRedis(t, addr), "contiguous_n", client.Options{MinLease: 100, MaxLease: 100, PrefetchAt: 1})
			ctx := patient(t)
			steps := []struct {
				n, want int64 // n == 0: Next
			}{
				{0, 1},
				{10, 11},
				{0, 12},
				{89, 189}, // 13..101 do not fit in [1, 100]: [101, 189] of the next lease
				{0, 190},
				{100, 300}, // a lease of its own: [201, 300]
				{1, 301},
			}
			for _, s := range steps {
				var got int64
				var err error
				if s.n == 0 {
					got, err = g.Next(ctx)
				} else {
					got, err = g.NextN(ctx, s.n)
				}
				if err != nil || got != s.want {
					t.Fatalf("NextN(%d) = %d, %v; want %d", s.n, got, err, s.want)
				}
			}
			for _, n := range []int64{0, -1, 101} {
				if _, err := g.NextN(ctx, n); !errors.Is(err, client.ErrBadCount) {
					t.Errorf("NextN(%d): %v, want ErrBadCount", n, err)
				}
			}
		})
	})
}

// idRange is what one call got: the IDs [lo, hi], and who called.
type idRange struct{ lo, hi, who int64 }

// TestNoRepeat: two generators on one tag (two processes, as far as the
// server can tell), eight goroutines each, Next and NextN mixed, on leases
// that stay small and change size all the time: no ID twice, and each
// goroutine's IDs increase.
func TestNoRepeat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		const gens, goroutines, calls = 2, 8, 3000
		var (
			mu  sync.Mutex
			all []idRange
			wg  sync.WaitGroup
		)
		for gi := range gens {
			g := newGen(t, newRedis(t, addr), "norepeat", client.Options{
				MinLease: 1, MaxLease: 64, LeaseDuration: 50 * time.Microsecond, PrefetchAt: []float64{0.1, 1}[gi],
			})
			for w := range goroutines {
				who := int64(gi*goroutines + w)
				wg.Go(func() {
					ctx := patient(t)
					rng := rand.New(rand.NewPCG(uint64(who), 1))
					got := make([]idRange, 0, calls)
					for range calls {
						n := int64(1)
						if rng.IntN(4) == 0 {
							n = 1 + rng.Int64N(10)
						}
						last, err := g.NextN(ctx, n)
						if err != nil {
							t.Errorf("NextN(%d): %v", n, err)
							return
						}
						if k := len(got); k > 0 && last-n+1 <= got[k-1].hi {
							t.Errorf("goroutine %d: [%d, %d] after [%d, %d]", who, last-n+1, last, got[k-1].lo, got[k-1].hi)
						}
						got = append(got, idRange{last - n + 1, last, who})
					}
					mu.Lock()
					all = append(all, got...)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		checkDisjoint(t, all)
	})
}

// checkDisjoint fails when two ranges share an ID.
func checkDisjoint(t *testing.T, all []idRange) {
	t.Helper()
	slices.SortFunc(all, func(a, b idRange) int { return cmp.Compare(a.lo, b.lo) })
	for i := 1; i < len(all); i++ {
		if a, b := all[i-1], all[i]; b.lo <= a.hi {
			t.Fatalf("IDs handed out twice: [%d, %d] to goroutine %d and [%d, %d] to goroutine %d", a.lo, a.hi, a.who, b.lo, b.hi, b.who)
		}
	}
}

// TestLeaseSize: a lease that lasted less than LeaseDuration doubles the
// next one up to MaxLease; one that lasted at least LeaseDuration but less
// than twice as long keeps its size; a longer one halves it down to
// MinLease. The clock is scripted: it is read once per lease request.
func TestLeaseSize(t *testing.T) {
	steps := []struct {
		gap  time.Duration // since the previous request
		want int64
	}{
		{0, 10}, // the first lease: MinLease
		{500 * time.Millisecond, 20},
		{0, 40},
		{999 * time.Millisecond, 80},
		{0, 80}, // MaxLease
		{time.Second, 80},
		{1999 * time.Millisecond, 80},
		{2 * time.Second, 40},
		{time.Minute, 20},
		{time.Hour, 10},
		{time.Hour, 10}, // MinLease
		{time.Millisecond, 20},
	}
	forEachBackend(t, func(t *testing.T, addr string) {
		gaps := make([]time.Duration, len(steps))
		want := make([]int64, len(steps))
		for i, s := range steps {
			gaps[i], want[i] = s.gap, s.want
		}
		clock := newScriptedClock(gaps...)
		rdb := newRedis(t, addr)
		log := logLeases(rdb)
		g := newGen(t, rdb, "size", client.Options{MinLease: 10, MaxLease: 80, LeaseDuration: time.Second, Now: clock.Now})
		// The request of lease k+1 starts at lease k's prefetch point, after
		// lease k arrived: never more requests than the script has times.
		for len(log.Sizes()) < len(steps) {
			next(t, g)
		}
		if got := log.Sizes(); !slices.Equal(got, want) {
			t.Errorf("INCRBY sizes %v, want %v", got, want)
		}
		if s := g.Stats(); s.LeaseSize != want[len(want)-1] {
			t.Errorf("Stats().LeaseSize = %d, want %d", s.LeaseSize, want[len(want)-1])
		}
	})
}

// TestWaitsForLeaseInFlight: while the server holds its replies, callers
// with no ID left wait for the one lease request under way until their
// context ends (no second request: no spinning); once the reply comes, the
// lease serves them.
func TestWaitsForLeaseInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		gt := newGate(t, addr)
		rdb := newRedis(t, gt.Addr())
		log := logLeases(rdb)
		if err := rdb.Ping(patient(t)).Err(); err != nil { // connected before the hold
			t.Fatal(err)
		}
		g := newGen(t, rdb, "held", client.Options{})
		gt.hold()
		waitersTimeOut(t, g, 2, 8)
		if got := log.Sizes(); len(got) != 1 {
			t.Errorf("lease requests while waiting: %v, want one", got)
		}
		if s := g.Stats(); s.Waits != 16 || s.Leases != 0 {
			t.Errorf("Stats() = %+v, want 16 waits and no lease", s)
		}
		gt.release()
		if id := next(t, g); id != 1 {
			t.Errorf("Next after the reply = %d, want 1", id)
		}
		if got := log.Sizes(); len(got) != 1 {
			t.Errorf("lease requests: %v, want one", got)
		}
	})
}

// waitersTimeOut runs rounds of n concurrent calls with a short deadline,
// while no lease can arrive: each must fail at its deadline.
func waitersTimeOut(t *testing.T, g *client.Generator, rounds, n int) {
	t.Helper()
	for round := range rounds {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				id, err := g.Next(ctx)
				if err == nil {
					t.Errorf("round %d: Next = %d, though no lease can arrive", round, id)
					return
				}
				wantIs(t, err, client.ErrUnavailable, context.DeadlineExceeded)
			})
		}
		wg.Wait()
	}
}

// TestSilentServer: a server that accepts the connection and never answers.
// Next waits until the context's deadline, on the one connection the lease
// request opened; Close releases a caller that would wait forever.
func TestSilentServer(t *testing.T) {
	s := newSilentServer(t)
	rdb := newRedis(t, s.Addr())
	g := newGen(t, rdb, "silent", client.Options{})
	waitersTimeOut(t, g, 2, 4)
	<-s.accepted
	waiting := make(chan error)
	go func() {
		_, err := g.Next(context.Background())
		waiting <- err
	}()
	g.Close()
	wantIs(t, <-waiting, client.ErrClosed)
	if n := s.Conns(); n != 1 {
		t.Errorf("%d connections, want 1: one lease request, waited for", n)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
}

// TestTryAgain: leaf's TRYAGAIN (its database is down and it has no IDs
// cached) is ErrUnavailable with the server's reply; once leaf's probe has
// found the database back, the same generator serves again.
func TestTryAgain(t *testing.T) {
	var store *faultstore.Store
	probes := &servertest.Probes{}
	so := segment.DefaultOptions()
	so.AfterFunc = probes.AfterFunc
	in := servertest.Start(t, servertest.Options{Segment: &so, Wrap: func(s persist.Store) persist.Store {
		store = faultstore.New(s)
		return store
	}})
	g := newGen(t, newRedis(t, in.Addr), "outage", client.Options{})
	store.Fail(errors.New("injected outage"), faultstore.OpTake) // leaf then answers TRYAGAIN
	_, err := g.Next(patient(t))
	wantIs(t, err, client.ErrUnavailable)
	var reply redis.Error
	if !errors.As(err, &reply) || !strings.HasPrefix(reply.Error(), "TRYAGAIN no cached IDs for tag 'outage'") {
		t.Errorf("error %v: want leaf's TRYAGAIN reply", err)
	}
	if s := g.Stats(); s.Failures != 1 || s.LastError == nil {
		t.Errorf("Stats() = %+v, want one failure", s)
	}
	store.Fail(nil)
	probes.Run(t)
	if id := next(t, g); id != 1 {
		t.Errorf("Next once the database is back = %d, want 1", id)
	}
}

// TestServerErrors: what the server answers instead of a range surfaces as
// a Go error: the sentinel to branch on, and the reply itself.
func TestServerErrors(t *testing.T) {
	leafWith := func(o servertest.Options) func(t *testing.T) string {
		return func(t *testing.T) string { return servertest.Start(t, o).Addr }
	}
	smallBatch := segment.DefaultOptions()
	smallBatch.MaxBatch = 50
	noAutoCreate := segment.DefaultOptions()
	noAutoCreate.AutoCreate = false
	redisWith := func(setup func(ctx context.Context, rdb *redis.Client) error) func(t *testing.T) string {
		return func(t *testing.T) string {
			addr := redistest.Start(t)
			if err := setup(patient(t), newRedis(t, addr)); err != nil {
				t.Fatal(err)
			}
			return addr
		}
	}
	closedPort := func(t *testing.T) string {
		s := newSilentServer(t)
		s.ln.Close()
		return s.Addr()
	}
	tests := []struct {
		name  string
		start func(t *testing.T) string
		want  error
		reply string // the start of the server's error reply, "" for none
	}{
		{"no password", leafWith(servertest.Options{Server: server.Options{Password: "pw"}}),
			client.ErrRefused, "NOAUTH Authentication required."},
		{"lease above max_batch", leafWith(servertest.Options{Segment: &smallBatch}),
			client.ErrRefused, "ERR increment exceeds max_batch (50)"},
		{"unknown tag", leafWith(servertest.Options{Segment: &noAutoCreate}),
			client.ErrRefused, "ERR unknown tag 't' (auto-create is off)"},
		{"Redis key of another type", redisWith(func(ctx context.Context, rdb *redis.Client) error {
			return rdb.LPush(ctx, "t", "x").Err()
		}), client.ErrRefused, "WRONGTYPE "},
		{"Redis key not an integer", redisWith(func(ctx context.Context, rdb *redis.Client) error {
			return rdb.Set(ctx, "t", "abc", 0).Err()
		}), client.ErrRefused, "ERR value is not an integer or out of range"},
		{"Redis key at the end of the ID space", redisWith(func(ctx context.Context, rdb *redis.Client) error {
			return rdb.Set(ctx, "t", "9223372036854775000", 0).Err()
		}), client.ErrBadLease, ""},
		{"nothing listening", closedPort, client.ErrUnavailable, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGen(t, newRedis(t, tc.start(t)), "t", client.Options{})
			for range 2 { // and again: the generator does not get stuck
				_, err := g.Next(patient(t))
				wantIs(t, err, tc.want)
				var reply redis.Error
				if tc.reply != "" && (!errors.As(err, &reply) || !strings.HasPrefix(reply.Error(), tc.reply)) {
					t.Errorf("error %v: want the reply %q", err, tc.reply)
				}
			}
		})
	}
}

// TestLoweredKey: on plain Redis someone may lower the key under a running
// generator. A lease that overlaps IDs the generator handed out is cut to
// the new ones; a lease wholly below them is refused (ErrBadLease).
func TestLoweredKey(t *testing.T) {
	addr := redistest.Start(t)
	rdb := newRedis(t, addr)
	ctx := patient(t)
	// PrefetchAt 1: no lease is requested before the last ID is taken, so
	// each request below comes from a call that does not fit.
	g := newGen(t, rdb, "lowered", client.Options{MinLease: 100, MaxLease: 100, PrefetchAt: 1})
	steps := []struct {
		set     int64 // the key is set to this first, unless 0
		n, want int64
		err     error
	}{
		{0, 99, 99, nil},
		{50, 2, 102, nil},               // INCRBY 100 answers 150: [51, 150] cut to [101, 150]
		{-1, 49, 0, client.ErrBadLease}, // INCRBY 100 answers 99: nothing above 150
		{1000, 1, 1001, nil},
	}
	for _, s := range steps {
		if s.set != 0 {
			if err := rdb.Set(ctx, "lowered", s.set, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := g.NextN(ctx, s.n)
		if got != s.want || !errors.Is(err, s.err) || (err != nil) != (s.err != nil) {
			t.Fatalf("after SET %d, NextN(%d) = %d, %v; want %d, %v", s.set, s.n, got, err, s.want, s.err)
		}
	}
}

// TestClose: after Close every call returns ErrClosed, and Close may be
// called again.
func TestClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		g := newGen(t, newRedis(t, addr), "close", client.Options{})
		next(t, g)
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		ctx := patient(t)
		_, err := g.Next(ctx)
		wantIs(t, err, client.ErrClosed)
		_, err = g.NextN(ctx, 5)
		wantIs(t, err, client.ErrClosed)
		if err := g.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestNextAllocatesNothing: Next on a lease allocates nothing.
func TestNextAllocatesNothing(t *testing.T) {
	g := newGen(t, newRedis(t, startLeaf(t)), "alloc", client.Options{MinLease: 100_000})
	ctx := context.Background()
	next(t, g)
	if n := testing.AllocsPerRun(10_000, func() { _, _ = g.Next(ctx) }); n != 0 {
		t.Errorf("Next: %v allocations per call, want 0", n)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		tag  string
		o    client.Options
	}{
		{"empty tag", "", client.Options{}},
		{"negative MinLease", "t", client.Options{MinLease: -1}},
		{"MaxLease below MinLease", "t", client.Options{MinLease: 10, MaxLease: 5}},
		{"negative LeaseDuration", "t", client.Options{LeaseDuration: -time.Second}},
		{"PrefetchAt above 1", "t", client.Options{PrefetchAt: 1.5}},
		{"negative PrefetchAt", "t", client.Options{PrefetchAt: -0.1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if g, err := client.New(rdb, tc.tag, tc.o); err == nil {
				g.Close()
				t.Errorf("New(%q, %+v) succeeded", tc.tag, tc.o)
			}
		})
	}
}
