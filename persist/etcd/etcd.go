// Package etcd is leaf's store on an etcd cluster (go.etcd.io/etcd/client/v3,
// servers 3.4 and later): a replicated Raft log, so that losing a minority
// of the members changes nothing for leaf.
//
// Keys live under a prefix (Config.Prefix, "/leaf/" by default):
//
//	<prefix>tags/<tag>    the tag's record, Leaf's row as JSON:
//	                      {"max_id":1001,"step":1000,"description":"orders","update_time":"..."}
//	<prefix>guard/<tag>   the persistent guard: the end (exclusive) of the
//	                      highest range leaf handed out, in decimal
//
// and the cluster registry's keys (registry.go): <prefix>nodes/ (servers,
// on etcd leases), <prefix>workers/ (Snowflake worker ids and their
// bounds), <prefix>log/ (administrative changes) and <prefix>modes/ (the
// mode of a tag not in Leaf's segment mode).
//
// Taking a range is one transaction: it compares the mod revisions of the
// tag's key and of its guard with those last read, and writes the new
// max_id and guard; the guard's key is created with a create-revision-of-0
// compare. A lost compare (another server took a range) brings both keys
// back in the same answer, and the transaction runs again on them. Only a
// transaction that reports success is ever served: a request whose outcome
// is unknown (a deadline, a connection cut, a leader lost mid-commit) is
// an error, and whatever it may have committed moved the revisions, so the
// next Take starts above it. The client library resends a transaction
// only when it never reached a server, and a resent or repeated
// transaction compares the same revisions, so at most one of them commits.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/leaf-id/leaf/persist"
)

// DefaultPrefix is the prefix of leaf's keys when Config.Prefix is empty.
const DefaultPrefix = "/leaf/"

// Config is what the etcd store needs besides persist.Options.
type Config struct {
	// Endpoints is store.dsn: comma-separated client URLs, each
	// [http://|https://][user:password@]host:port, e.g.
	// "http://10.0.0.1:2379,http://10.0.0.2:2379". A user and password
	// (the same on every endpoint that names one) log in to a cluster with
	// authentication on.
	Endpoints string
	// Prefix starts every key leaf reads or writes (store.etcd_prefix);
	// empty: DefaultPrefix.
	Prefix string
	// TLSCA, TLSCert, TLSKey are PEM files (store.etcd_tls_*): the CA that
	// signed the members' certificates (empty: the system's roots), and a
	// client certificate with its key, for members that ask for one. Any
	// of them, or https:// endpoints, turn TLS on.
	TLSCA, TLSCert, TLSKey string
	// Lazy lets Open succeed while the cluster cannot be reached: calls
	// answer persist.ErrUnavailable until it can. Mistakes no wait fixes
	// (a malformed endpoint, a refused password) still fail Open.
	Lazy bool
}

// Store is the etcd backend. It implements persist.Backend.
type Store struct {
	cfg     clientv3.Config
	prefix  string
	timeout time.Duration // the deadline of a call whose context has none
	log     *slog.Logger
	// readOnly: Options.ReadOnly, the caller only reads (StoreID writes
	// no identity).
	readOnly bool
	now      func() time.Time

	// conn is the client, nil until it could be made (with a password, it
	// logs in, which needs the cluster); dial holds the one attempt to
	// make it at a time.
	conn   atomic.Pointer[conn]
	dial   chan struct{}
	closed atomic.Bool

	mu   sync.Mutex
	tags map[string]*tagState
}

var (
	_ persist.Store    = (*Store)(nil)
	_ persist.Admin    = (*Store)(nil)
	_ persist.Guarded  = (*Store)(nil)
	_ persist.Registry = (*Store)(nil)
)

// Open connects to the cluster and checks that it answers (a read of one
// key under the prefix). Nothing is created: a tag's keys are written by
// its first Create. Errors never include a password.
func Open(ctx context.Context, c Config, opts persist.Options) (*Store, error) {
	return open(ctx, c, opts)
}

// open is Open with gRPC options of the caller's (tests inject faults).
func open(ctx context.Context, c Config, opts persist.Options, dial ...grpc.DialOption) (*Store, error) {
	cfg, err := clientConfig(c)
	if err != nil {
		return nil, fmt.Errorf("persist: open etcd: %w", err)
	}
	cfg.DialOptions = dial
	timeout := opts.QueryTimeout
	if timeout == 0 {
		timeout = persist.DefaultQueryTimeout
	}
	// The login with a password is bounded by this; otherwise making the
	// client never waits.
	cfg.DialTimeout = persist.DefaultQueryTimeout
	if timeout > 0 {
		cfg.DialTimeout = timeout
	}
	prefix := c.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &Store{
		cfg: cfg, prefix: prefix, timeout: timeout, log: opts.Log(), now: time.Now, readOnly: opts.ReadOnly,
		dial: make(chan struct{}, 1), tags: map[string]*tagState{},
	}
	err = s.do(ctx, "read "+s.prefix+tagsDir, "", func(ctx context.Context, kv clientv3.KV) error {
		_, err := kv.Get(ctx, s.prefix+tagsDir, clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		return err
	})
	switch {
	case err == nil:
		s.log.Info("persist: etcd open", "endpoints", strings.Join(cfg.Endpoints, ","), "prefix", s.prefix)
	case c.Lazy && errors.Is(err, persist.ErrUnavailable):
		s.log.Warn("persist: etcd unreachable at start; serving errors until it answers",
			"endpoints", strings.Join(cfg.Endpoints, ","), "err", err)
	default:
		_ = s.Close()
		return nil, fmt.Errorf("persist: open etcd: %w", err)
	}
	return s, nil
}

// clientConfig reads the endpoints and TLS files of c.
func clientConfig(c Config) (clientv3.Config, error) {
	eps, user, pass, scheme, err := parseEndpoints(c.Endpoints)
	if err != nil {
		return clientv3.Config{}, err
	}
	cfg := clientv3.Config{
		Endpoints: eps, Username: user, Password: pass,
		// leaf logs what matters itself; the client's own log (zap)
		// would repeat every retry on stderr.
		Logger: zap.NewNop(),
		// Find a connection to a member that stopped answering (a hung
		// process, a cut network) while a call waits on it.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	}
	useTLS := scheme == "https" || c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != ""
	if !useTLS {
		return cfg, nil
	}
	if scheme == "http" {
		return clientv3.Config{}, fmt.Errorf("%w: TLS files are set but the endpoints are http://", persist.ErrInvalid)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("%w: TLS CA: %w", persist.ErrInvalid, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return clientv3.Config{}, fmt.Errorf("%w: TLS CA %s holds no PEM certificate", persist.ErrInvalid, c.TLSCA)
		}
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		if c.TLSCert == "" || c.TLSKey == "" {
			return clientv3.Config{}, fmt.Errorf("%w: a TLS client certificate needs both the certificate and the key", persist.ErrInvalid)
		}
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("%w: TLS client certificate: %w", persist.ErrInvalid, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tc
	return cfg, nil
}

// parseEndpoints splits store.dsn into the endpoints the client dials
// (without user information), the user and password, and the scheme they
// share ("http", "https", or "" for bare host:port endpoints).
func parseEndpoints(dsn string) (eps []string, user, pass, scheme string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: store.dsn: %s", persist.ErrInvalid, fmt.Sprintf(format, args...))
	}
	for i, raw := range strings.Split(dsn, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		var u, p, host, sch string
		if before, _, ok := strings.Cut(raw, "://"); ok {
			parsed, err := url.Parse(raw)
			if err != nil || parsed.Host == "" || (parsed.Path != "" && parsed.Path != "/") || parsed.RawQuery != "" {
				return nil, "", "", "", bad("endpoint %d is not scheme://host:port", i+1)
			}
			if before != "http" && before != "https" {
				return nil, "", "", "", bad("endpoint %d: scheme %q, want http or https", i+1, before)
			}
			sch, host = before, parsed.Host
			if parsed.User != nil {
				u = parsed.User.Username()
				p, _ = parsed.User.Password()
			}
		} else {
			host = raw
			if at := strings.LastIndexByte(raw, '@'); at >= 0 {
				host = raw[at+1:]
				u, p, _ = strings.Cut(raw[:at], ":")
			}
		}
		if !strings.Contains(host, ":") {
			return nil, "", "", "", bad("endpoint %d names no port", i+1)
		}
		if len(eps) > 0 && sch != scheme {
			return nil, "", "", "", bad("the endpoints mix schemes")
		}
		scheme = sch
		if u != "" || p != "" {
			if (user != "" || pass != "") && (u != user || p != pass) {
				return nil, "", "", "", bad("the endpoints name different users or passwords")
			}
			user, pass = u, p
		}
		if sch != "" {
			host = sch + "://" + host
		}
		eps = append(eps, host)
	}
	if len(eps) == 0 {
		return nil, "", "", "", bad("no endpoint")
	}
	if (user == "") != (pass == "") {
		return nil, "", "", "", bad("a user needs a password")
	}
	return eps, user, pass, scheme, nil
}

// conn is a client and the KV API the store calls through it.
type conn struct {
	cli *clientv3.Client
	// kv fails fast: without the client's default call options, a call
	// made while no member can be reached fails at once instead of
	// waiting for one until its deadline (see do).
	kv clientv3.KV
}

// reachable reports whether the client has, or may yet get, a connection
// to a member: false once every member refused or failed.
func (c *conn) reachable() bool {
	return c.cli.ActiveConnection().GetState() != connectivity.TransientFailure
}

// client returns the client, making it first if it is not yet. Only a
// login with a password needs the cluster to make it, for no longer than
// ctx allows.
func (s *Store) client(ctx context.Context) (*conn, error) {
	if s.closed.Load() {
		return nil, persist.ErrClosed
	}
	if c := s.conn.Load(); c != nil {
		return c, nil
	}
	select {
	case s.dial <- struct{}{}:
		defer func() { <-s.dial }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c := s.conn.Load(); c != nil {
		return c, nil
	}
	if s.closed.Load() {
		return nil, persist.ErrClosed
	}
	cfg := s.cfg
	if dl, ok := ctx.Deadline(); ok {
		cfg.DialTimeout = min(cfg.DialTimeout, max(time.Until(dl), time.Millisecond))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	c := &conn{cli: cli, kv: clientv3.NewKVFromKVClient(pb.NewKVClient(cli.ActiveConnection()), nil)}
	s.conn.Store(c)
	return c, nil
}

// Close closes the client; later calls fail with persist.ErrClosed. A
// client being made is waited for, so that it cannot leak.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.dial <- struct{}{}
	defer func() { <-s.dial }()
	if c := s.conn.Swap(nil); c != nil {
		return c.cli.Close()
	}
	return nil
}

// GuardEnabled implements persist.Guarded: always, as the guard is a key
// like any other, written with the tag's.
func (s *Store) GuardEnabled() bool { return true }

// Prefix is the prefix of every key of the store.
func (s *Store) Prefix() string { return s.prefix }

func (s *Store) tagKey(tag string) string   { return s.prefix + tagsDir + tag }
func (s *Store) guardKey(tag string) string { return s.prefix + guardDir + tag }

// Bounds of a call's attempts: each gets a third of the call's time, so
// that one sent to a member that hangs leaves time for others, but at
// least minAttempt; between two, a pause of up to maxPause.
const (
	minAttempt = 100 * time.Millisecond
	firstPause = 10 * time.Millisecond
	maxPause   = 250 * time.Millisecond
)

// do runs fn under the store's deadline, once per attempt, while it fails
// with an error that another attempt may not meet (unavailable: no leader,
// a member down or hung, an attempt's deadline) and time is left. Each
// attempt may reach another member: the client spreads calls over the
// endpoints. When no member can be reached at all (every one refuses, or
// the login cannot reach any), do gives up at once, as the SQL backends do
// on a refused connection. Every call asks for a member with a leader
// (WithRequireLeader), so that a member cut off from the others fails at
// once instead of waiting. The final error names the operation and the
// tag, and wraps persist.ErrUnavailable when the cluster did not answer.
func (s *Store) do(ctx context.Context, op, tag string, fn func(context.Context, clientv3.KV) error) error {
	if s.timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
	}
	per := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		per = max(time.Until(dl)/3, minAttempt)
	}
	pause := firstPause
	var last error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return s.opErr(op, tag, unavailableErr(err, last))
		}
		err, reachable := s.attempt(ctx, per, fn)
		if err == nil {
			return nil
		}
		if !unavailable(err) {
			return s.opErr(op, tag, err)
		}
		if !reachable {
			return s.opErr(op, tag, fmt.Errorf("%w: no member of the cluster can be reached: %w", persist.ErrUnavailable, err))
		}
		last = err
		s.log.Debug("persist: etcd call failed, retrying", "op", op, "tag", tag, "attempt", attempt, "err", err)
		wait := pause/2 + rand.N(pause/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
	}
}

// attempt is one run of fn, within per (0: no bound of its own). It
// reports whether a member could still be reached after it.
func (s *Store) attempt(ctx context.Context, per time.Duration, fn func(context.Context, clientv3.KV) error) (error, bool) {
	if per > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, per)
		defer cancel()
	}
	c, err := s.client(ctx)
	if err != nil {
		// The login met no member within its own time; or the attempt's
		// time ran out, which the caller tells by the context.
		return err, ctx.Err() != nil
	}
	err = fn(clientv3.WithRequireLeader(ctx), c.kv)
	return err, err == nil || c.reachable()
}

// unavailable tells errors after which the cluster may answer another
// attempt: deadlines, lost connections, no leader, a member stopping or
// overloaded.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	st, _ := status.FromError(err)
	code := st.Code()
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return true
	case codes.Unknown:
		// A member's own deadline on a request it could not finish (no
		// leader to forward it to) comes back as the bare context error.
		msg := st.Message()
		return msg == context.DeadlineExceeded.Error() || msg == context.Canceled.Error()
	}
	return false
}

// unavailableErr is the error of a call whose time ran out: the context's,
// and the last attempt's, if any.
func unavailableErr(ctxErr, last error) error {
	if last == nil || errors.Is(last, ctxErr) {
		return fmt.Errorf("%w: %w", persist.ErrUnavailable, ctxErr)
	}
	return fmt.Errorf("%w: %w (last attempt: %w)", persist.ErrUnavailable, ctxErr, last)
}

// opErr names the operation and the tag (if any) in front of err, adding
// persist.ErrUnavailable to errors that mean the cluster did not answer.
func (s *Store) opErr(op, tag string, err error) error {
	if !errors.Is(err, persist.ErrUnavailable) && !errors.Is(err, persist.ErrClosed) && unavailable(err) {
		err = fmt.Errorf("%w: %w", persist.ErrUnavailable, err)
	}
	if tag == "" {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s %q: %w", op, tag, err)
}

// overflows reports whether a + b passes math.MaxInt64 (b >= 0).
func overflows(a, b int64) bool { return a > math.MaxInt64-b }
