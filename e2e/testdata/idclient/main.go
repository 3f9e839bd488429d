// Command idclient is a test program: one process taking IDs with package
// client, driven by the process tests through stdin and stdout, one
// command and one answer a line.
//
//	addr HOST:PORT   the server is there (answers "ok")
//	down             the server is going away: new connections wait (answers "ok")
//	run N            the goroutines make N calls in all, Next or NextN mixed;
//	                 answers "half" after N/2 and "ran" at the end. A call that
//	                 fails with ErrUnavailable is made again
//	probe MS         calls Next with a deadline of MS milliseconds until one
//	                 fails; answers "probe IDS ERROR-CLASSES ELAPSED_MS"
//	recover          calls Next with a deadline of two minutes; "recovered ID"
//	exit             writes every range received to -out ("WHO LO HI" lines)
//	                 and answers "bye" with the counts of errors
//
// Any other failure is answered "error ..." and ends the process.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
}

// out writes the answers; the goroutines share it.
type out struct {
	mu sync.Mutex
}

func (o *out) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

// idRange is the IDs [lo, hi] one call received.
type idRange struct{ lo, hi int64 }

// worker is one goroutine's record: its calls' ranges in order.
type worker struct {
	rng    *rand.Rand
	ranges []idRange
}

func run() error {
	tag := flag.String("tag", "", "tag")
	goroutines := flag.Int("goroutines", 8, "goroutines sharing the generator")
	minLease := flag.Int64("min-lease", 0, "client.Options.MinLease")
	maxLease := flag.Int64("max-lease", 0, "client.Options.MaxLease")
	leaseDuration := flag.Duration("lease-duration", 0, "client.Options.LeaseDuration")
	seed := flag.Uint64("seed", 1, "seed of the calls' choices")
	outFile := flag.String("out", "", "file for the ranges received")
	flag.Parse()

	d := newDialer()
	// Generous timeouts: a call's wait is bounded by its context, and a
	// server stopped with SIGSTOP must look hung, not gone.
	rdb := redis.NewClient(&redis.Options{
		Addr: "leaf", Dialer: d.dial, MaxRetries: -1,
		DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
	})
	defer rdb.Close()
	gen, err := client.New(rdb, *tag, client.Options{MinLease: *minLease, MaxLease: *maxLease, LeaseDuration: *leaseDuration})
	if err != nil {
		return err
	}
	defer gen.Close()

	o := &out{}
	workers := make([]*worker, *goroutines+1) // the last one makes the probes
	for i := range workers {
		workers[i] = &worker{rng: rand.New(rand.NewPCG(*seed, uint64(i)))}
	}
	var unavailable atomic.Int64
	var rounds sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "addr":
			d.set(arg)
			o.say("ok")
		case "down":
			d.set("")
			o.say("ok")
		case "run":
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				return err
			}
			rounds.Go(func() { runRound(gen, workers[:*goroutines], n, &unavailable, o) })
		case "probe":
			ms, err := strconv.Atoi(arg)
			if err != nil {
				return err
			}
			probe(gen, workers[*goroutines], time.Duration(ms)*time.Millisecond, o)
		case "recover":
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			id, err := gen.Next(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			w := workers[*goroutines]
			w.ranges = append(w.ranges, idRange{id, id})
			o.say("recovered %d", id)
		case "exit":
			rounds.Wait()
			if err := writeRanges(*outFile, workers); err != nil {
				return err
			}
			s := gen.Stats()
			o.say("bye unavailable=%d leases=%d waits=%d failures=%d", unavailable.Load(), s.Leases, s.Waits, s.Failures)
			return nil
		default:
			return fmt.Errorf("unknown command %q", sc.Text())
		}
	}
	return errors.New("stdin closed before exit")
}

// runRound makes n calls on the workers, each call Next or NextN.
func runRound(gen *client.Generator, workers []*worker, n int64, unavailable *atomic.Int64, o *out) {
	var budget, done atomic.Int64
	budget.Store(n)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for budget.Add(-1) >= 0 {
				k := int64(1)
				if w.rng.IntN(4) == 0 {
					k = 1 + w.rng.Int64N(10)
				}
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					last, err := gen.NextN(ctx, k)
					cancel()
					if err == nil {
						w.ranges = append(w.ranges, idRange{last - k + 1, last})
						break
					}
					if !errors.Is(err, client.ErrUnavailable) {
						o.say("error NextN(%d): %v", k, err)
						os.Exit(1)
					}
					unavailable.Add(1) // the server is restarting: again
				}
				if done.Add(1) == n/2 {
					o.say("half")
				}
			}
		})
	}
	wg.Wait()
	o.say("ran")
}

// probe takes IDs with deadline d on each call until one fails, and says
// how many it got, how the failure classifies and how long that call took.
func probe(gen *client.Generator, w *worker, d time.Duration, o *out) {
	ids := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		id, err := gen.Next(ctx)
		elapsed := time.Since(start)
		cancel()
		if err == nil {
			ids++
			w.ranges = append(w.ranges, idRange{id, id})
			continue
		}
		var classes []string
		for _, c := range []struct {
			name string
			err  error
		}{{"unavailable", client.ErrUnavailable}, {"deadline", context.DeadlineExceeded}} {
			if errors.Is(err, c.err) {
				classes = append(classes, c.name)
			}
		}
		o.say("probe %d %s %d %s", ids, strings.Join(classes, ","), elapsed.Milliseconds(), strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
}

func writeRanges(path string, workers []*worker) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	for i, w := range workers {
		for _, r := range w.ranges {
			fmt.Fprintf(bw, "%d %d %d\n", i, r.lo, r.hi)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dialer connects to the server's current address; while there is none
// (the server is being restarted), a dial waits for one, up to its
// context's end.
type dialer struct {
	mu   sync.Mutex
	addr string
	up   chan struct{} // closed once addr is set
}

func newDialer() *dialer { return &dialer{up: make(chan struct{})} }

func (d *dialer) set(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case addr == "" && d.addr != "":
		d.up = make(chan struct{})
	case addr != "" && d.addr == "":
		close(d.up)
	}
	d.addr = addr
}

func (d *dialer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	for {
		d.mu.Lock()
		addr, up := d.addr, d.up
		d.mu.Unlock()
		if addr != "" {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
