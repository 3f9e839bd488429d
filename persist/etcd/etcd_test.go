package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/etcd"
	"github.com/leaf-id/leaf/persist/etcd/etcdtest"
	"github.com/leaf-id/leaf/persist/storetest"
)

func TestEtcd(t *testing.T) { storetest.Run(t, etcdtest.DB) }

func TestParseEndpoints(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name               string
		dsn                string
		eps                []string
		user, pass, scheme string
		err                bool
	}{
		{"URLs", "http://10.0.0.1:2379,http://10.0.0.2:2379", []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, "", "", "http", false},
		{"Spaces", " http://h1:2379 , http://h2:2379 ,", []string{"http://h1:2379", "http://h2:2379"}, "", "", "http", false},
		{"Bare", "h1:2379,h2:2379", []string{"h1:2379", "h2:2379"}, "", "", "", false},
		{"UserOnEach", "https://root:" + pw + "@h1:2379,https://root:" + pw + "@h2:2379", []string{"https://h1:2379", "https://h2:2379"}, "root", pw, "https", false},
		{"UserOnFirst", "http://root:" + pw + "@h1:2379,http://h2:2379", []string{"http://h1:2379", "http://h2:2379"}, "root", pw, "http", false},
		{"BareUser", "root:" + pw + "@h1:2379,h2:2379", []string{"h1:2379", "h2:2379"}, "root", pw, "", false},
		{"EscapedPassword", "http://root:a%40b@h1:2379", []string{"http://h1:2379"}, "root", "a@b", "http", false},
		{"Empty", " , ", nil, "", "", "", true},
		{"NoPort", "http://h1", nil, "", "", "", true},
		{"BareNoPort", "root:" + pw + "@h1", nil, "", "", "", true},
		{"OtherScheme", "unix://h1:2379", nil, "", "", "", true},
		{"Path", "http://h1:2379/v3", nil, "", "", "", true},
		{"MixedSchemes", "http://h1:2379,https://h2:2379", nil, "", "", "", true},
		{"TwoUsers", "http://a:" + pw + "@h1:2379,http://b:" + pw + "@h2:2379", nil, "", "", "", true},
		{"UserWithoutPassword", "http://root@h1:2379", nil, "", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eps, user, pass, scheme, err := etcd.ParseEndpoints(tc.dsn)
			if tc.err {
				if !errors.Is(err, persist.ErrInvalid) || strings.Contains(err.Error(), pw) {
					t.Fatalf("err = %v, want ErrInvalid without the password", err)
				}
				return
			}
			if err != nil || !slices.Equal(eps, tc.eps) || user != tc.user || pass != tc.pass || scheme != tc.scheme {
				t.Fatalf("= %q, %q, %q, %q, %v; want %q, %q, %q, %q", eps, user, pass, scheme, err, tc.eps, tc.user, tc.pass, tc.scheme)
			}
		})
	}
}

// Open fails at once on what no wait fixes, and with ErrUnavailable when
// the cluster does not answer, unless it is lazy. The password never
// shows.
func TestOpenErrors(t *testing.T) {
	const pw = "hunter2-pw"
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Port 1 on loopback: nothing listens, connections are refused.
	const down = "http://root:" + pw + "@127.0.0.1:1"
	tests := []struct {
		name string
		cfg  etcd.Config
		want error
	}{
		{"BadEndpoints", etcd.Config{Endpoints: "http://root:" + pw + "@h1"}, persist.ErrInvalid},
		{"MissingCA", etcd.Config{Endpoints: "https://127.0.0.1:1", TLSCA: filepath.Join(dir, "missing.pem")}, persist.ErrInvalid},
		{"CANotPEM", etcd.Config{Endpoints: "127.0.0.1:1", TLSCA: notPEM}, persist.ErrInvalid},
		{"CertWithoutKey", etcd.Config{Endpoints: "https://127.0.0.1:1", TLSCert: notPEM}, persist.ErrInvalid},
		{"TLSOverHTTP", etcd.Config{Endpoints: "http://127.0.0.1:1", TLSCA: notPEM}, persist.ErrInvalid},
		{"Unreachable", etcd.Config{Endpoints: "http://127.0.0.1:1"}, persist.ErrUnavailable},
		{"UnreachableWithPassword", etcd.Config{Endpoints: down}, persist.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etcd.Open(t.Context(), tc.cfg, persist.Options{QueryTimeout: 500 * time.Millisecond})
			if !errors.Is(err, tc.want) || strings.Contains(err.Error(), pw) {
				t.Fatalf("err = %v, want %v without the password", err, tc.want)
			}
		})
	}

	t.Run("Lazy", func(t *testing.T) {
		s, err := etcd.Open(t.Context(), etcd.Config{Endpoints: down, Lazy: true}, persist.Options{QueryTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatalf("lazy open of an unreachable cluster: %v", err)
		}
		_, err = s.Take(t.Context(), "t", 0)
		if !errors.Is(err, persist.ErrUnavailable) || strings.Contains(err.Error(), pw) {
			t.Fatalf("Take = %v, want ErrUnavailable without the password", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Take(t.Context(), "t", 0); !errors.Is(err, persist.ErrClosed) {
			t.Fatalf("Take after Close = %v, want ErrClosed", err)
		}
	})
}

// openStore opens a store on a fresh prefix of the test cluster.
func openStore(t *testing.T, dial ...grpc.DialOption) (*etcd.Store, etcdtest.Keys) {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	prefix := etcdtest.Prefix(t, eps)
	s, err := etcd.OpenWithDial(t.Context(), etcd.Config{Endpoints: eps, Prefix: prefix},
		persist.Options{QueryTimeout: 30 * time.Second}, dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, etcdtest.Keys{Client: etcdtest.Client(t, eps), Prefix: prefix}
}

// The keys are what the package documents, readable and writable by an
// operator with etcdctl: the tag's record as JSON, the guard in decimal,
// under their own directories of the prefix.
func TestKeyLayout(t *testing.T) {
	s, keys := openStore(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, "order/eu", 1000, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(ctx, "order/eu", 0); err != nil {
		t.Fatal(err)
	}
	resp, err := keys.Client.Get(ctx, keys.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[strings.TrimPrefix(string(kv.Key), keys.Prefix)] = string(kv.Value)
	}
	if len(got) != 2 || got["guard/order/eu"] != "1001" {
		t.Fatalf("keys under the prefix = %q, want tags/order/eu and guard/order/eu = 1001", got)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(got["tags/order/eu"]), &rec); err != nil {
		t.Fatalf("tags/order/eu = %q: %v", got["tags/order/eu"], err)
	}
	if rec["max_id"] != 1001.0 || rec["step"] != 1000.0 || rec["description"] != "orders" || rec["update_time"] == nil || len(rec) != 4 {
		t.Fatalf("tags/order/eu = %q, want max_id 1001, step 1000, description, update_time", got["tags/order/eu"])
	}
	// A record written by hand with only the required fields is read.
	keys.Insert(t, "by-hand", 5, 10, "")
	if r, err := s.Take(ctx, "by-hand", 0); err != nil || r != (persist.Range{Start: 5, End: 15, Step: 10}) {
		t.Fatalf("Take of a key written by hand = %+v, %v", r, err)
	}
	if tags, err := s.Tags(ctx); err != nil || len(tags) != 2 || tags[0].Name != "by-hand" || tags[1].Name != "order/eu" {
		t.Fatalf("Tags() = %+v, %v", tags, err)
	}
}

// A value that is not a record fails the calls that read it, naming the
// key, and changes nothing.
func TestBadRecord(t *testing.T) {
	s, keys := openStore(t)
	ctx := t.Context()
	if _, err := keys.Client.Put(ctx, keys.Prefix+"tags/junk", `{"maxid":5}`); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Take", func() error { _, err := s.Take(ctx, "junk", 0); return err }},
		{"Tag", func() error { _, err := s.Tag(ctx, "junk"); return err }},
		{"Tags", func() error { _, err := s.Tags(ctx); return err }},
		{"GiveBack", func() error { _, err := s.GiveBack(ctx, "junk", 11, 1); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, persist.ErrSchema) || !strings.Contains(err.Error(), keys.Prefix+"tags/junk") {
				t.Fatalf("err = %v, want ErrSchema naming the key", err)
			}
		})
	}
	if _, ok := keys.Guard(t, "junk"); ok {
		t.Fatal("a guard was written for a bad record")
	}
}

// answerLoser is a gRPC interceptor between the store and the cluster: it
// fails the next transaction with code, after the cluster answered it
// (the answer is lost: committed, but the store cannot know) or before
// sending it; and it records every transaction as "write" (with compares)
// or "read".
type answerLoser struct {
	mu        sync.Mutex
	code      codes.Code // codes.OK: let through
	afterSend bool
	seen      []string
}

func (l *answerLoser) arm(code codes.Code, afterSend bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.code, l.afterSend, l.seen = code, afterSend, nil
}

func (l *answerLoser) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

func (l *answerLoser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	l.mu.Lock()
	code, after := l.code, l.afterSend
	l.code = codes.OK
	kind := "read"
	if len(txn.Compare) > 0 {
		kind = "write"
	}
	l.seen = append(l.seen, kind)
	l.mu.Unlock()
	if code == codes.OK {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if after {
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
	}
	return status.Error(code, "injected: the answer was lost")
}

// A transaction whose answer is lost is never served: when it committed,
// the range it took is a gap and the Take is served above it; when it
// never reached the cluster, the Take gets that range. The client library
// does not send again a transaction that reached the cluster (Unavailable),
// or sends it again only to lose its compare (DeadlineExceeded).
func TestLostAnswer(t *testing.T) {
	loser := &answerLoser{}
	s, _ := openStore(t, grpc.WithChainUnaryInterceptor(loser.intercept))
	ctx := t.Context()
	tests := []struct {
		name      string
		code      codes.Code
		afterSend bool
		want      persist.Range // after [1,11) was taken
		calls     []string      // the transactions, from the one that failed
	}{
		{"CommittedUnavailable", codes.Unavailable, true, persist.Range{Start: 21, End: 31, Step: 10}, []string{"write", "read", "write"}},
		{"CommittedDeadline", codes.DeadlineExceeded, true, persist.Range{Start: 21, End: 31, Step: 10}, []string{"write", "write", "write"}},
		{"NeverSent", codes.Unavailable, false, persist.Range{Start: 11, End: 21, Step: 10}, []string{"write", "read", "write"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := tc.name
			if _, err := s.Create(ctx, tag, 10, ""); err != nil {
				t.Fatal(err)
			}
			if r, err := s.Take(ctx, tag, 0); err != nil || r.Start != 1 {
				t.Fatalf("first Take = %+v, %v", r, err)
			}
			loser.arm(tc.code, tc.afterSend)
			r, err := s.Take(ctx, tag, 0)
			if err != nil || r != tc.want {
				t.Fatalf("Take after a lost answer = %+v, %v; want %+v", r, err, tc.want)
			}
			calls := loser.calls()
			t.Logf("transactions: %q", calls)
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("transactions %q, want %q", calls, tc.calls)
			}
			if tag, err := s.Tag(ctx, tag); err != nil || tag.MaxID != tc.want.End {
				t.Fatalf("Tag = %+v, %v; want max_id %d", tag, err, tc.want.End)
			}
		})
	}

	// Create: a lost answer to the write that created the key still
	// reports the tag as created (the value is the one it wrote).
	loser.arm(codes.Unavailable, true)
	if created, err := s.Create(ctx, "created", 10, ""); err != nil || !created {
		t.Fatalf("Create whose answer was lost = %v, %v; want true", created, err)
	}
	if created, err := s.Create(ctx, "created", 10, ""); err != nil || created {
		t.Fatalf("Create again = %v, %v; want false", created, err)
	}
}

// TLS: on a cluster whose members serve TLS only and want client
// certificates, the store works with the CA and a client certificate,
// and is refused without the certificate or without the CA.
func TestTLS(t *testing.T) {
	files := t.TempDir()
	etcdtest.TLSFiles(t, files)
	_, eps := etcdtest.StartCluster(t, "LEAF_ETCD_TLS_DIR="+files)
	if !strings.HasPrefix(eps, "https://") {
		t.Fatalf("endpoints %q, want https://", eps)
	}
	ca, cert, key := filepath.Join(files, "ca.pem"), filepath.Join(files, "client.pem"), filepath.Join(files, "client-key.pem")
	opts := persist.Options{QueryTimeout: 30 * time.Second}

	s, err := etcd.Open(t.Context(), etcd.Config{Endpoints: eps, TLSCA: ca, TLSCert: cert, TLSKey: key}, opts)
	if err != nil {
		t.Fatalf("open with the CA and a client certificate: %v", err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Take(t.Context(), "t", 0); err != nil || r != (persist.Range{Start: 1, End: 11, Step: 10}) {
		t.Fatalf("Take over TLS = %+v, %v", r, err)
	}

	// The member's refusal of a client without a certificate reaches the
	// client as a TLS alert or as the connection closed under it,
	// depending on timing; leaf's own refusal of an unknown CA names the
	// certificate.
	refused := []struct {
		name string
		cfg  etcd.Config
		want string
	}{
		{"NoClientCertificate", etcd.Config{Endpoints: eps, TLSCA: ca}, ""},
		{"NoCA", etcd.Config{Endpoints: eps, TLSCert: cert, TLSKey: key}, "certificate signed by unknown authority"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etcd.Open(t.Context(), tc.cfg, persist.Options{QueryTimeout: 5 * time.Second})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open = %v, want a refusal saying %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestEtcdRegistry(t *testing.T) {
	storetest.RunRegistry(t, func(t *testing.T) storetest.Opener { return etcdtest.DB(t).Open })
}
