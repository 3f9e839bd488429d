package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// statsByName indexes CommandStats.
func statsByName(s *server.Server) map[string]server.CommandStat {
	out := map[string]server.CommandStat{}
	for _, st := range s.CommandStats() {
		out[st.Name] = st
	}
	return out
}

// TestCommandStats: commands counted by name once answered, error replies
// apart, connections that closed included, unknown names under one name.
func TestCommandStats(t *testing.T) {
	in := servertest.Start(t, servertest.Options{Server: server.Options{Password: "pw"}})
	ctx := context.Background()
	c := newClient(t, in.Addr, 2, "pw")
	for range 5 {
		redistest.Incr(t, c, "a")
	}
	for _, args := range [][]any{
		{"INCR"},                   // arity: an error of incr
		{"INCRBY", "a", "x"},       // not an integer
		{"NOSUCH", "x"},            // unknown
		{"ALSO-UNKNOWN"},           // unknown
		{"CLIENT", "NOSUCH"},       // unknown subcommand: an error of client
		{"CLIENT", "SETNAME", "n"}, // a subcommand
	} {
		_ = c.Do(ctx, args...).Err()
	}
	// A connection that never authenticates, then closes.
	noauth := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1, DisableIdentity: true}))
	if err := noauth.Incr(ctx, "a").Err(); err == nil {
		t.Fatal("INCR without AUTH: no error")
	}
	noauth.Close()
	// Its counts stay once it is gone: wait for the server to see it go,
	// by the only thing the test can observe, the client count.
	for in.Server.ConnectedClients() > 1 {
		_ = c.Ping(ctx).Err()
	}

	got := statsByName(in.Server)
	for _, tc := range []struct {
		name          string
		calls, errors int64
	}{
		{"incr", 5 + 1 + 1, 2},
		{"incrby", 1, 1},
		{server.UnknownCommand, 2, 2},
		{"client", 1, 1},
		{"client|setname", 1, 0},
		{"config|get", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := got[tc.name]
			if st.Calls != tc.calls || st.Errors != tc.errors {
				t.Fatalf("%+v, want calls %d errors %d", st, tc.calls, tc.errors)
			}
		})
	}
}

// TestCommandStatsMonotonic: while connections run commands and close,
// every count only grows from one CommandStats to the next, and the last
// one counts every command exactly.
func TestCommandStatsMonotonic(t *testing.T) {
	in := servertest.Start(t, servertest.Options{})
	const clients, conns, each = 4, 5, 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range conns {
				c := redis.NewClient(redistest.Options(&redis.Options{Addr: in.Addr, PoolSize: 1, MaxRetries: -1, Protocol: 2, DisableIdentity: true}))
				for i := range each {
					var err error
					if i%4 == 0 {
						err = c.Do(context.Background(), "INCRBY", "m", "0").Err()
						if err == nil {
							t.Error("INCRBY m 0: no error")
						}
						continue
					}
					if err = c.Incr(context.Background(), "m").Err(); err != nil {
						t.Errorf("INCR: %v", err)
					}
				}
				c.Close()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	prev := map[string]server.CommandStat{}
	check := func() map[string]server.CommandStat {
		cur := statsByName(in.Server)
		for name, p := range prev {
			c := cur[name]
			if c.Calls < p.Calls || c.Errors < p.Errors || c.Calls-c.Errors < p.Calls-p.Errors {
				t.Fatalf("%s went down: %+v then %+v", name, p, c)
			}
		}
		prev = cur
		return cur
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			check()
		}
	}
	for in.Server.ConnectedClients() > 0 {
		check()
	}
	last := check()
	total := int64(clients * conns * each)
	if got := last["incr"].Calls + last["incrby"].Calls; got != total {
		t.Fatalf("%d commands counted, want %d", got, total)
	}
	if got, want := last["incrby"].Errors, total/4; got != want {
		t.Fatalf("%d INCRBY errors, want %d", got, want)
	}
}
