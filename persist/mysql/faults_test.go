package mysql_test

// Database faults against a real MariaDB: lock waits retried with backoff, a hung server bounded by the deadline, a database that is
// down when the store opens.

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/storetest"
)

// retryLog is a slog handler that keeps every record and signals each
// "persist: retrying" record on retries, so a test acts right after a
// retry instead of guessing when it happens.
type retryLog struct {
	mu      sync.Mutex
	errs    []string // the err attribute of every retry
	retries chan string
}

func newRetryLog() *retryLog { return &retryLog{retries: make(chan string, 100)} }

func (h *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLog) WithGroup(string) slog.Handler            { return h }

func (h *retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "persist: retrying" {
		return nil
	}
	var e string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			e = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.errs = append(h.errs, e)
	h.mu.Unlock()
	select {
	case h.retries <- e:
	default:
	}
	return nil
}

// retried returns the errors of the retries so far.
func (h *retryLog) retried() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// withParam returns dsn with one more connection parameter.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[key] = value
	return cfg.FormatDSN()
}

// lockedRow opens a second session that holds the row lock of tag
// (SELECT ... FOR UPDATE) in an open transaction, rolled back at cleanup.
func lockedRow(t *testing.T, dsn, tag string) *sql.Tx {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var maxID int64
	if err := tx.QueryRowContext(t.Context(), `SELECT max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE`, tag).Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	return tx
}

// openLockTest opens a store whose session gives up a lock wait after one
// second (error 1205), with the given query timeout and a retry log, and
// creates tag "t" with step 10.
func openLockTest(t *testing.T, dsn string, timeout time.Duration) (*mysql.Store, *retryLog) {
	t.Helper()
	h := newRetryLog()
	s, err := mysql.Open(t.Context(), withParam(t, dsn, "innodb_lock_wait_timeout", "1"),
		persist.Options{CreateSchema: true, QueryTimeout: timeout, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	return s, h
}

// A lock wait timeout (1205) is retried with backoff: a Take that meets a
// row lock held for less than its deadline completes once it is released.
func TestMySQLLockWaitRetried(t *testing.T) {
	dsn := mysqltest.DSN(t)
	s, h := openLockTest(t, dsn, 30*time.Second)
	tx := lockedRow(t, dsn, "t")

	done := storetest.TakeAsync(s, "t", 0)
	// The lock is released right after the first retry: the Take met 1205
	// and went on.
	select {
	case e := <-h.retries:
		if !strings.Contains(e, "1205") {
			t.Errorf("retried on %q, want error 1205", e)
		}
	case res := <-done:
		t.Fatalf("Take returned under a held lock: %+v, %v", res.Range, res.Err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	got := res.Range
	got.Retries = 0
	if res.Err != nil || got != (persist.Range{Start: 1, End: 11, Step: 10}) || res.Range.Retries < 1 {
		t.Fatalf("Take after the lock was released = %+v, %v; want [1, 11) after a retry", res.Range, res.Err)
	}
}

// A lock held past the deadline: the retries stop at the deadline and the
// error is ErrUnavailable, with the row unchanged.
func TestMySQLLockWaitPastDeadline(t *testing.T) {
	dsn := mysqltest.DSN(t)
	s, h := openLockTest(t, dsn, 2500*time.Millisecond)
	tx := lockedRow(t, dsn, "t")

	_, err := s.Take(t.Context(), "t", 0)
	if !errors.Is(err, persist.ErrUnavailable) {
		t.Fatalf("Take under a lock held past the deadline: err = %v, want ErrUnavailable", err)
	}
	if len(h.retried()) == 0 {
		t.Errorf("no retry before the deadline: the 1205 after 1s was not retried")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if r, err := s.Take(ctx, "t", 0); err != nil || r.Start != 1 {
		t.Fatalf("Take after the lock = %+v, %v; want the first range", r, err)
	}
}

// No test provokes a deadlock (1213) on a real server: Take waits for at
// most one row lock and holds none while it waits, so it can close a cycle
// only as in "another session holds a shared lock, Take queues for the
// exclusive one, the other asks for the exclusive one too"; MySQL reports
// that as a deadlock, but MariaDB 10.6+ lets the holder's request pass the
// queued one instead. TestDoRetries covers the retry of 1213 (and TiDB's
// conflicts) with injected errors.

// faultProxy forwards TCP connections to a database and can stop
// forwarding, as a hung (SIGSTOPped) server: connections are still
// accepted, bytes are read, but nothing is passed on until resume, when
// what was held is delivered, as a continued server would process it.
type faultProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	gate  chan struct{} // closed while forwarding
	conns []net.Conn
}

// newFaultProxy listens on addr ("127.0.0.1:0" for any port) and forwards
// to target. It is closed at cleanup.
func newFaultProxy(t *testing.T, addr, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *faultProxy) serve(c net.Conn) {
	defer c.Close()
	p.wait()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	defer up.Close()
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst, holding every chunk while the proxy hangs.
func (p *faultProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Pass the close on, so the other side sees EOF as it would.
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (p *faultProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

// hang stops forwarding.
func (p *faultProxy) hang() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

// resume forwards again, held bytes first.
func (p *faultProxy) resume() {
	p.mu.Lock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	p.mu.Unlock()
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.resume()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// viaAddr returns dsn with its address replaced.
func viaAddr(t *testing.T, dsn, addr string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

func dsnAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// A server that accepts connections but never answers (SIGSTOP) cannot
// hang a call: the query deadline ends it with ErrUnavailable, and once
// the server answers again the store works without being reopened.
func TestMySQLHungServer(t *testing.T) {
	dsn := mysqltest.DSN(t)
	p := newFaultProxy(t, "127.0.0.1:0", dsnAddr(t, dsn))
	// The store's query timeout: it ends each hung call, and bounds the
	// open and the set-up calls, which a busy machine may make slow.
	const timeout = 3 * time.Second
	s, err := mysql.Open(t.Context(), viaAddr(t, dsn, p.ln.Addr().String()),
		persist.Options{CreateSchema: true, QueryTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	first, err := s.Take(t.Context(), "t", 0)
	if err != nil {
		t.Fatal(err)
	}

	p.hang()
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Take", func(ctx context.Context) error { _, err := s.Take(ctx, "t", 0); return err }},
		{"Tags", func(ctx context.Context) error { _, err := s.Tags(ctx); return err }},
		{"Tag", func(ctx context.Context) error { _, err := s.Tag(ctx, "t"); return err }},
		{"GiveBack", func(ctx context.Context) error { _, err := s.GiveBack(ctx, "t", 100, 50); return err }},
	}
	for _, c := range calls {
		// t.Context() has no deadline: the store's query timeout applies.
		if err := c.call(t.Context()); !errors.Is(err, persist.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a hung server: err = %v, want ErrUnavailable and DeadlineExceeded", c.name, err)
		}
	}
	// A fresh connection to a hung server is bounded too: the handshake
	// never comes.
	_, err = mysql.Open(t.Context(), viaAddr(t, dsn, p.ln.Addr().String()), persist.Options{QueryTimeout: timeout})
	if !errors.Is(err, persist.ErrUnavailable) {
		t.Errorf("Open on a hung server: err = %v, want ErrUnavailable", err)
	}

	p.resume()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := s.Take(ctx, "t", 0)
	if err != nil {
		t.Fatalf("Take after the server answers again: %v", err)
	}
	// The abandoned Take may have committed (its COMMIT was held, then
	// delivered): a gap, never an overlap.
	if r.Start < first.End {
		t.Fatalf("Take after the hang = %+v, overlaps the first %+v", r, first)
	}
}

// OpenDeferred starts while the database refuses connections: calls
// fail with ErrUnavailable, then work once it listens, with the table
// created on the way. A refused password is not waited for.
func TestMySQLDeferred(t *testing.T) {
	dsn := mysqltest.DSN(t)
	// A port nothing listens on now; the proxy takes it later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	opts := persist.Options{CreateSchema: true, QueryTimeout: 5 * time.Second}
	d, err := mysql.OpenDeferred(t.Context(), viaAddr(t, dsn, addr), opts)
	if err != nil {
		t.Fatalf("OpenDeferred with the database down: %v", err)
	}
	defer d.Close()
	if d.Opened() || d.GuardEnabled() {
		t.Fatalf("Opened() %v GuardEnabled() %v with the database down, want false, false", d.Opened(), d.GuardEnabled())
	}
	if _, err := d.Tag(t.Context(), "t"); !errors.Is(err, persist.ErrUnavailable) {
		t.Fatalf("Tag with the database down: err = %v, want ErrUnavailable", err)
	}
	if _, err := d.Take(t.Context(), "t", 0); !errors.Is(err, persist.ErrUnavailable) {
		t.Fatalf("Take with the database down: err = %v, want ErrUnavailable", err)
	}

	newFaultProxy(t, addr, dsnAddr(t, dsn))
	if _, err := d.Tag(t.Context(), "t"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("Tag once the database is up: err = %v, want ErrNotFound", err)
	}
	if !d.Opened() || !d.GuardEnabled() {
		t.Fatalf("Opened() %v GuardEnabled() %v after a call that reached the database, want true, true (leaf_guard created)", d.Opened(), d.GuardEnabled())
	}
	if _, err := d.Create(t.Context(), "t", 10, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Take(t.Context(), "t", 0); err != nil || r != (persist.Range{Start: 1, End: 11, Step: 10}) {
		t.Fatalf("Take = %+v, %v; want [1, 11)", r, err)
	}
	// Every call goes to the opened store.
	if ok, err := d.GiveBack(t.Context(), "t", 11, 5); !ok || err != nil {
		t.Fatalf("GiveBack(11, 5) = %v, %v", ok, err)
	}
	if err := d.SetStep(t.Context(), "t", 20); err != nil {
		t.Fatalf("SetStep: %v", err)
	}
	if row, moved, err := d.RaiseFloor(t.Context(), "t", 99); err != nil || !moved || row.MaxID != 100 {
		t.Fatalf("RaiseFloor(99) = %+v, %v, %v", row, moved, err)
	}
	if tags, err := d.Tags(t.Context()); err != nil || len(tags) != 1 || tags[0].MaxID != 100 || tags[0].Step != 20 {
		t.Fatalf("Tags = %+v, %v; want t with max_id 100, step 20", tags, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Take(t.Context(), "t", 0); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("Take after Close: err = %v, want ErrClosed", err)
	}

	cfg, _ := gomysql.ParseDSN(dsn)
	cfg.Passwd = "wrong-" + cfg.Passwd
	_, err = mysql.OpenDeferred(t.Context(), cfg.FormatDSN(), opts)
	if err == nil || errors.Is(err, persist.ErrUnavailable) || strings.Contains(err.Error(), cfg.Passwd) {
		t.Fatalf("OpenDeferred with a wrong password: err = %v, want a refusal now, without the password", err)
	}
}
