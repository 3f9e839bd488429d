package httpapi_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/httpapi"
	"github.com/leaf-id/leaf/internal/faultstore"
	"github.com/leaf-id/leaf/internal/redistest"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server/servertest"
	"github.com/leaf-id/leaf/snowflake"
)

// env is a running leaf: the Redis server and allocator of servertest, on
// a store the test can take away, and the HTTP handler on httptest.
type env struct {
	*servertest.Instance
	URL   string
	store *faultstore.Store // what the test can take away (storeDown)
}

// storeDown makes every call of the store fail while down, as a database
// that went away; false brings it back.
func (e *env) storeDown(down bool) {
	var err error
	if down {
		err = fmt.Errorf("%w: the test took the database away", persist.ErrUnavailable)
	}
	e.store.Fail(err)
}

// setup configures start.
type setup struct {
	seg     func(*segment.Options) // changes to segment.DefaultOptions
	maxTags int                    // Options.MetricsMaxTags; 0 means 1000
	pprof   bool
	pageSz  int // Options.PageSize; 0 means its default
	// cluster makes the server a node of the store's registry, with a
	// Snowflake generator; its clock, when set (else time.Now). The store
	// cannot be taken away then.
	cluster bool
	now     func() time.Time
	// http changes the handler's options, after start's own: the API
	// creates tags (AutoCreate), which most tests need, as Leaf's table
	// holds their rows.
	http func(*httpapi.Options)
}

// start runs a server, its allocator and the HTTP handler; all stop at
// cleanup.
func start(t *testing.T, s setup) *env {
	t.Helper()
	lat := httpapi.NewStoreLatency()
	so := segment.DefaultOptions()
	so.Observe = lat.Observe
	if s.seg != nil {
		s.seg(&so)
	}
	e := &env{}
	so2 := servertest.Options{
		Segment: &so,
		Wrap: func(st persist.Store) persist.Store {
			e.store = faultstore.New(st)
			return e.store
		},
	}
	if s.cluster {
		so2.Wrap = nil // Snowflake tags are created through the registry the wrapper would hide
		so2.Cluster = &cluster.Options{Heartbeat: time.Hour, Lease: time.Hour, Node: persist.NodeInfo{ID: "web1", Version: "test"}}
		so2.Snowflake = snowflake.Options{Layout: snowflake.DefaultLayout(), MaxClockBack: 5 * time.Millisecond, Now: s.now}
	}
	e.Instance = servertest.Start(t, so2)
	maxTags := s.maxTags
	if maxTags == 0 {
		maxTags = 1000
	}
	ho := httpapi.Options{
		Server:         e.Server,
		StoreLatency:   lat,
		MetricsMaxTags: maxTags,
		PProf:          s.pprof,
		PageSize:       s.pageSz,
		Version:        "test",
		Revision:       "0123abc",
		AutoCreate:     true,
	}
	if s.http != nil {
		s.http(&ho)
	}
	if s.cluster {
		ho.Cluster, ho.Snowflake = e.Node, e.Gen
	}
	hs := httptest.NewServer(httpapi.New(e.Alloc, ho))
	t.Cleanup(hs.Close) // registered last: runs before the server stops
	e.URL = hs.URL
	return e
}

// client is a single-connection go-redis client, closed at cleanup.
func (e *env) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: e.Addr, PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { c.Close() })
	return c
}

// response is an HTTP answer, read whole.
type response struct {
	status int
	header http.Header
	body   string
	close  bool // the server closes the connection after it
}

func get(t *testing.T, url string, header ...string) response {
	t.Helper()
	return do(t, http.MethodGet, url, header...)
}

// do sends one request; header is name, value pairs.
func do(t *testing.T, method, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close}
}

// leafID gets an ID from the Leaf API and fails the test on an error.
func leafID(t *testing.T, base, tag string) int64 {
	t.Helper()
	r := get(t, base+"/api/segment/get/"+tag)
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/segment/get/%s: %d %s", tag, r.status, r.body)
	}
	id, err := strconv.ParseInt(r.body, 10, 64)
	if err != nil {
		t.Fatalf("GET /api/segment/get/%s: body %q is not an ID", tag, r.body)
	}
	return id
}

// metrics scrapes /metrics into series -> value; a series is written as
// in the exposition format: name{label="v",...} with labels sorted.
func metrics(t *testing.T, base string, header ...string) map[string]float64 {
	t.Helper()
	r := get(t, base+"/metrics", header...)
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", r.status, r.body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(r.body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics: bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: bad value in %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// copyBody reads a response's body into w and closes it.
func copyBody(w io.Writer, r *http.Response) (int64, error) {
	defer r.Body.Close()
	return io.Copy(w, r.Body)
}

// basic is an Authorization header value of HTTP Basic.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}
