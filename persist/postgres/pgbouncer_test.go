package postgres_test

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/storetest"
)

// Through pgbouncer in transaction pooling mode a server connection serves
// one transaction of a client, then another client's: statements prepared
// per connection would not follow. With the DSN as a user writes it (leaf
// sends unnamed statements, pgx's exec mode, unless the DSN says
// otherwise) every operation works: servers take, batch and create tags at
// once, and no range is handed out twice.
func TestPgbouncerTransactionMode(t *testing.T) {
	dsn := storetest.EnvDSN(t, "LEAF_TEST_PGBOUNCER_DSN", "start one with "+
		"`scripts/pgbouncer.sh start /tmp/leaf-pgbouncer` in front of scripts/postgres.sh's server")
	const (
		servers = 3
		workers = 4 // per server
		ops     = 40
	)
	suffix := fmt.Sprint(time.Now().UnixNano())
	tags := []string{"pgb_a_" + suffix, "pgb_b_" + suffix}
	type taken struct {
		tag string
		r   persist.Range
	}
	var mu sync.Mutex
	var got []taken
	var wg sync.WaitGroup
	for range servers {
		s, err := postgres.Open(t.Context(), dsn, persist.Options{CreateSchema: true, MaxOpenConns: workers, QueryTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range ops {
					reqs := []persist.TakeRequest{{Tag: tags[(i+w)%2], Create: 10}}
					if i%3 == 0 {
						reqs = append(reqs, persist.TakeRequest{Tag: tags[(i+w+1)%2], Size: 5, Create: 10})
					}
					for k, res := range s.TakeBatch(t.Context(), reqs) {
						if res.Err != nil {
							t.Errorf("batch: %v", res.Err)
							return
						}
						mu.Lock()
						got = append(got, taken{reqs[k].Tag, res.Range})
						mu.Unlock()
					}
					if _, err := s.Tag(t.Context(), tags[0]); err != nil && i > 0 {
						t.Errorf("tag: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b taken) int { return cmp.Or(cmp.Compare(a.tag, b.tag), cmp.Compare(a.r.Start, b.r.Start)) })
	for i := 1; i < len(got); i++ {
		if got[i].tag == got[i-1].tag && got[i].r.Start < got[i-1].r.End {
			t.Errorf("%s: %+v and %+v overlap", got[i].tag, got[i-1].r, got[i].r)
		}
	}
	if want := servers * workers * (ops + (ops+2)/3); len(got) != want {
		t.Errorf("%d ranges, want %d", len(got), want)
	}
}
