package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/idtest"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/snowflake"
)

// TestSnowflakeGet: Leaf's /api/snowflake/get/{key} answers the bare ID,
// from the generator the Snowflake tags use, whatever the key and method.
func TestSnowflakeGet(t *testing.T) {
	e := start(t, setup{cluster: true})
	c := e.client(t)
	if err := c.Do(context.Background(), "LEAF.CREATE", "sf", "MODE", "snowflake").Err(); err != nil {
		t.Fatal(err)
	}
	worker := e.Node.Status().Worker
	var last int64
	for i, method := range []string{http.MethodGet, http.MethodPost, http.MethodGet} {
		r := do(t, method, e.URL+"/api/snowflake/get/key"+strconv.Itoa(i))
		id, err := strconv.ParseInt(r.body, 10, 64)
		if r.status != http.StatusOK || err != nil || r.header.Get("Content-Type") != "text/plain;charset=UTF-8" {
			t.Fatalf("%s: %d %q %q", method, r.status, r.header.Get("Content-Type"), r.body)
		}
		p, _ := snowflake.DefaultLayout().Decode(id)
		if p.Worker != worker || id <= last {
			t.Fatalf("ID %d (%+v) after %d: want worker %d, increasing", id, p, last, worker)
		}
		last = id
		if sf := redistest.Incr(t, c, "sf"); sf <= last {
			t.Fatalf("INCR sf %d after the API's %d: one generator, increasing", sf, last)
		} else {
			last = sf
		}
	}
}

// TestSnowflakeGetAndIncrUnique: the API and INCR on Snowflake tags at
// once never give an ID twice.
func TestSnowflakeGetAndIncrUnique(t *testing.T) {
	e := start(t, setup{cluster: true})
	c := e.client(t)
	for _, tag := range []string{"a", "b"} {
		if err := c.Do(context.Background(), "LEAF.CREATE", tag, "MODE", "snowflake").Err(); err != nil {
			t.Fatal(err)
		}
	}
	const each = 200
	ids := make(chan int64, 3*each)
	var wg sync.WaitGroup
	for _, src := range []string{"http", "a", "b"} {
		cl := e.client(t)
		wg.Go(func() {
			for range each {
				if src == "http" {
					r := get(t, e.URL+"/api/snowflake/get/x")
					id, err := strconv.ParseInt(r.body, 10, 64)
					if err != nil {
						t.Errorf("%d %q", r.status, r.body)
						return
					}
					ids <- id
					continue
				}
				id, err := cl.Incr(context.Background(), src).Result()
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	idtest.Unique(t, ids, 3*each)
}

// TestSnowflakeGetClockBack: a clock back by more than max_clock_back
// answers Leaf's -3, as Leaf does beyond 5ms, and leaf's reason.
func TestSnowflakeGetClockBack(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	e := start(t, setup{cluster: true, now: clock})
	if r := get(t, e.URL+"/api/snowflake/get/k"); r.status != http.StatusOK {
		t.Fatalf("%d %q", r.status, r.body)
	}
	mu.Lock()
	now = now.Add(-time.Second)
	mu.Unlock()
	r := get(t, e.URL+"/api/snowflake/get/k")
	var b springBody
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || r.status != http.StatusInternalServerError ||
		b.Message != "Result{id=-3, status=EXCEPTION}" || !strings.Contains(r.header.Get("X-Leaf-Error"), "clock is behind") {
		t.Fatalf("%d %q (X-Leaf-Error %q)", r.status, r.body, r.header.Get("X-Leaf-Error"))
	}
}

// TestDecodeSnowflakeId: Leaf's decoder, field for field, in Leaf's order.
func TestDecodeSnowflakeId(t *testing.T) {
	e := start(t, setup{cluster: true})
	l := snowflake.DefaultLayout()
	ts := int64(1567733700834)
	id := l.Compose(ts-l.Epoch.UnixMilli(), 39, 3448)
	at := time.UnixMilli(ts).In(time.Local).Format("2006-01-02 15:04:05.000")
	tests := []struct {
		query  string
		status int
		body   string
	}{
		{"?snowflakeId=" + strconv.FormatInt(id, 10), 200,
			`{"workerId":"39","sequenceId":"3448","timestamp":"1567733700834(` + at + `)"}`},
		{"?snowflakeId=%2B" + strconv.FormatInt(id, 10), 200, // "+id", as Long.parseLong takes it
			`{"workerId":"39","sequenceId":"3448","timestamp":"1567733700834(` + at + `)"}`},
		{"?snowflakeId=abc", 200, `{"errorMsg":"snowflake Id反解析发生异常!"}`},
		{"?snowflakeId=", 200, `{"errorMsg":"snowflake Id反解析发生异常!"}`},
		{"?snowflakeId=1%202", 200, `{"errorMsg":"snowflake Id反解析发生异常!"}`},
		{"?snowflakeId=99999999999999999999", 200, `{"errorMsg":"snowflake Id反解析发生异常!"}`},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			r := get(t, e.URL+"/decodeSnowflakeId"+tc.query)
			if r.status != tc.status || r.body != tc.body || r.header.Get("Content-Type") != "application/json;charset=UTF-8" {
				t.Fatalf("%d %q %q\nwant %d %q", r.status, r.header.Get("Content-Type"), r.body, tc.status, tc.body)
			}
		})
	}
	r := get(t, e.URL+"/decodeSnowflakeId")
	var b springBody
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || r.status != http.StatusBadRequest ||
		b.Exception != "org.springframework.web.bind.MissingServletRequestParameterException" ||
		b.Message != "Required String parameter 'snowflakeId' is not present" || b.Path != "/decodeSnowflakeId" {
		t.Fatalf("without snowflakeId: %d %q", r.status, r.body)
	}
}

// TestClusterStatusAndMetrics: the status page and the metrics show this
// server's lease and worker id and the live servers.
func TestClusterStatusAndMetrics(t *testing.T) {
	e := start(t, setup{cluster: true})
	worker := strconv.Itoa(e.Node.Status().Worker)
	page := get(t, e.URL+"/", "Accept", "text/html").body
	for _, want := range []string{`id="cluster"`, `id="lease">current</b>`, `<b id="worker">` + worker + `</b>`,
		`data-node="web1"`, e.Addr} {
		if !strings.Contains(page, want) {
			t.Fatalf("status page lacks %q", want)
		}
	}
	m := get(t, e.URL+"/metrics").body
	for _, want := range []string{"leaf_cluster_enabled 1", "leaf_cluster_lease_ok 1", "leaf_cluster_nodes 1",
		`leaf_cluster_node_heartbeat_age_seconds{addr="` + e.Addr + `",node="web1",worker_id="` + worker + `"}`,
		"leaf_snowflake_worker_id " + worker, "leaf_snowflake_clock_back_refusals_total 0", `leaf_cluster_heartbeats_total{result="ok"}`} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
}
