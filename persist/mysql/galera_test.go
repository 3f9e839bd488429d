package mysql_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/storetest"
)

// The conformance suite on one node of a three-node Galera cluster: a
// Galera node must behave as one MariaDB, with every commit replicated
// and checked (Dialect.Verify). Across nodes the suite's own assumptions
// do not hold (its reads are not causal, a lost abort burns a range and
// leaves a hole); TestGaleraTakesAcrossNodes checks what holds there.
// About three minutes: only with LEAF_TEST_LONG=1.
func TestGalera(t *testing.T) {
	if os.Getenv("LEAF_TEST_LONG") == "" {
		t.Skip("the conformance suite on Galera takes minutes: set LEAF_TEST_LONG=1")
	}
	storetest.Run(t, func(t *testing.T) *storetest.DB {
		dsn := mysqltest.GaleraNodes(t)[0]
		return storetest.NewDB(t, "mysql", dsn, func(t *testing.T, opts persist.Options) (persist.Store, error) {
			return mysql.Open(t.Context(), dsn, opts)
		})
	})
}

// Servers on every node of a Galera cluster take ranges of the same tags,
// alone and in batches, as hard as they can. Galera certifies their
// transactions optimistically, so many are aborted by a write-set from
// another node; MariaDB loses some of those aborts, and the session's
// next statements then run outside the transaction. No range may be handed
// out twice, none may be repaired by the guard (nothing lowered max_id),
// and at the end no guard may be ahead of its max_id.
func TestGaleraTakesAcrossNodes(t *testing.T) {
	const (
		workers = 3   // per node
		takes   = 150 // per worker
	)
	dsns := mysqltest.GaleraNodes(t)
	var stores []*mysql.Store
	for _, dsn := range dsns {
		s, err := mysql.Open(t.Context(), dsn, persist.Options{CreateSchema: true, QueryTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	tags := []string{"galera_a", "galera_b"}
	for _, tag := range tags {
		if _, err := stores[0].Create(t.Context(), tag, 20, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range stores {
		for _, tag := range tags {
			waitTag(t, s, tag, i)
		}
	}

	type taken struct {
		tag  string
		r    persist.Range
		node int
	}
	var mu sync.Mutex
	var got []taken
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*workers)
	for node, s := range stores {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range takes {
					var rs []taken
					if (i+w)%3 == 0 {
						reqs := []persist.TakeRequest{{Tag: tags[0]}, {Tag: tags[1], Size: 7}, {Tag: tags[0], Size: 3}}
						for k, res := range s.TakeBatch(t.Context(), reqs) {
							if res.Err != nil {
								errs <- fmt.Errorf("node %d: batch: %w", node+1, res.Err)
								return
							}
							rs = append(rs, taken{reqs[k].Tag, res.Range, node})
						}
					} else {
						tag := tags[i%len(tags)]
						r, err := s.Take(t.Context(), tag, 0)
						if err != nil {
							errs <- fmt.Errorf("node %d: take: %w", node+1, err)
							return
						}
						rs = append(rs, taken{tag, r, node})
					}
					mu.Lock()
					got = append(got, rs...)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	slices.SortFunc(got, func(a, b taken) int {
		return cmp.Or(cmp.Compare(a.tag, b.tag), cmp.Compare(a.r.Start, b.r.Start))
	})
	retries := 0
	for i, g := range got {
		retries += g.r.Retries
		if g.r.Repaired {
			t.Errorf("%s: node %d got a repaired range %+v: the database answered one below IDs handed out", g.tag, g.node+1, g.r)
		}
		if i > 0 && got[i-1].tag == g.tag && g.r.Start < got[i-1].r.End {
			t.Errorf("%s: [%d, %d) to node %d and [%d, %d) to node %d overlap", g.tag,
				got[i-1].r.Start, got[i-1].r.End, got[i-1].node+1, g.r.Start, g.r.End, g.node+1)
		}
	}
	for _, tag := range tags {
		assertGuardBehind(t, dsns[0], tag)
	}
	t.Logf("%d ranges on %d nodes, %d transactions run again", len(got), len(stores), retries)
}

// waitTag waits until the tag's row reached the node of s.
func waitTag(t *testing.T, s persist.Store, tag string, node int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		_, err := s.(persist.Backend).Tag(ctx, tag)
		if err == nil {
			return
		}
		if !errors.Is(err, persist.ErrNotFound) || ctx.Err() != nil {
			t.Fatalf("node %d: tag %s: %v", node+1, tag, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// assertGuardBehind fails unless leaf_guard.high <= leaf_alloc.max_id: a
// guard ahead of max_id is a take whose max_id was lost and its guard
// kept, which makes the next take repair.
func assertGuardBehind(t *testing.T, dsn, tag string) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"wsrep_sync_wait": "1"} // a causal read
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var maxID, high int64
	if err := db.QueryRowContext(t.Context(), `SELECT a.max_id, g.high FROM leaf_alloc a, leaf_guard g
		WHERE a.biz_tag = ? AND g.biz_tag = a.biz_tag`, tag).Scan(&maxID, &high); err != nil {
		t.Fatal(err)
	}
	if high > maxID {
		t.Errorf("%s: leaf_guard.high %d is ahead of max_id %d", tag, high, maxID)
	}
}
