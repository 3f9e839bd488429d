// Package etcdtest gives tests a fresh prefix of their own on a real etcd
// cluster (the one scripts/etcd.sh starts), for the conformance suite and
// for other packages' tests, and changes a tag's keys by hand, as an
// operator with etcdctl would.
package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/etcd"
	"github.com/leaf-id/leaf/persist/storetest"
)

// EnvEndpoints names the environment variable that holds the endpoints of
// the test cluster, comma-separated.
const EnvEndpoints = "LEAF_TEST_ETCD_ENDPOINTS"

// Endpoints returns the test cluster's endpoints. When the variable is
// unset the test is skipped, except on CI (CI=true), where it fails.
func Endpoints(t testing.TB) string {
	t.Helper()
	eps := os.Getenv(EnvEndpoints)
	if eps == "" {
		const how = EnvEndpoints + " is not set; start a throwaway etcd cluster with " +
			"`eval \"export $(scripts/etcd.sh start /tmp/leaf-etcd)\"` " +
			"(stop it with `scripts/etcd.sh stop /tmp/leaf-etcd`)"
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	return eps
}

// Prefix returns a new prefix with a random name (/leaf-test-<hex>/) on
// the cluster at endpoints, whose keys are deleted by t.Cleanup, so tests
// never see each other's tags.
func Prefix(t testing.TB, endpoints string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	prefix := "/leaf-test-" + hex.EncodeToString(b) + "/"
	cli := Client(t, endpoints)
	t.Cleanup(func() {
		// Not t.Context(): it is already cancelled when Cleanup runs.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting %s*: %v", prefix, err)
		}
	})
	return prefix
}

// Client is a plain client of the cluster at endpoints (without user
// information), closed by t.Cleanup.
func Client(t testing.TB, endpoints string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("%s: %v", EnvEndpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// DB prepares a fresh prefix for the conformance suite. It skips or fails
// the test as Endpoints does.
func DB(t *testing.T) *storetest.DB {
	t.Helper()
	eps := Endpoints(t)
	prefix := Prefix(t, eps)
	return storetest.NewDBOn(t, Keys{Client: Client(t, eps), Prefix: prefix},
		func(t *testing.T, opts persist.Options) (persist.Store, error) {
			return etcd.Open(t.Context(), etcd.Config{Endpoints: eps, Prefix: prefix}, opts)
		})
}

// Keys changes the keys of the tags under Prefix directly, as an operator
// would with etcdctl. It is the suite's storetest.Raw.
type Keys struct {
	Client *clientv3.Client
	Prefix string
}

var _ storetest.Raw = Keys{}

// Insert writes the tag's key as an operator would by hand: JSON with
// max_id, step and description.
func (k Keys) Insert(t *testing.T, tag string, maxID, step int64, description string) {
	t.Helper()
	v, err := json.Marshal(map[string]any{"max_id": maxID, "step": step, "description": description})
	if err != nil {
		t.Fatal(err)
	}
	k.put(t, k.Prefix+"tags/"+tag, string(v))
}

// Delete deletes the tag's key; its guard stays.
func (k Keys) Delete(t *testing.T, tag string) {
	t.Helper()
	ctx, cancel := k.ctx(t)
	defer cancel()
	if _, err := k.Client.Delete(ctx, k.Prefix+"tags/"+tag); err != nil {
		t.Fatalf("delete %s: %v", tag, err)
	}
}

// SetMaxID rewrites the tag's key with another max_id, keeping its other
// fields.
func (k Keys) SetMaxID(t *testing.T, tag string, maxID int64) {
	t.Helper()
	key := k.Prefix + "tags/" + tag
	ctx, cancel := k.ctx(t)
	defer cancel()
	resp, err := k.Client.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	var v map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	v["max_id"] = maxID
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	k.put(t, key, string(b))
}

// Guard reads the tag's guard key.
func (k Keys) Guard(t *testing.T, tag string) (int64, bool) {
	t.Helper()
	ctx, cancel := k.ctx(t)
	defer cancel()
	resp, err := k.Client.Get(ctx, k.Prefix+"guard/"+tag)
	if err != nil {
		t.Fatalf("get the guard of %s: %v", tag, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false
	}
	high, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		t.Fatalf("the guard of %s: %v", tag, err)
	}
	return high, true
}

func (k Keys) put(t *testing.T, key, value string) {
	t.Helper()
	ctx, cancel := k.ctx(t)
	defer cancel()
	if _, err := k.Client.Put(ctx, key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// ctx bounds a change by hand: the test's context, with a deadline.
func (k Keys) ctx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 30*time.Second)
}
