package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// errConflict is what testDialect retries, as a real dialect retries a
// deadlock; errOther it does not.
var (
	errConflict = errors.New("conflict")
	errOther    = errors.New("syntax")
)

func testDialect() *Dialect {
	return &Dialect{
		Name:        "test",
		Retryable:   func(err error) bool { return errors.Is(err, errConflict) },
		Unavailable: func(err error) bool { return errors.Is(err, errConflict) },
		NoTable:     func(error) bool { return false },
	}
}

// do retries what the dialect calls retryable while the deadline allows,
// and nothing else.
func TestDoRetries(t *testing.T) {
	tests := []struct {
		name      string
		errs      []error // returned by the successive calls; nil after
		timeout   time.Duration
		wantCalls int
		wantErr   []error
	}{
		{"ConflictThenOK", []error{errConflict, errConflict}, time.Second, 3, nil},
		{"NotRetryable", []error{errOther}, time.Second, 1, []error{errOther}},
		{"LostTransactionRunAgain", []error{errTxLost, errTxLost}, time.Second, 3, nil},
		{"MissedCompareAndSetRunAgain", []error{errRowRaced, errBatchRaced}, time.Second, 3, nil},
		{"SentinelNotRetried", []error{persist.ErrNotFound}, time.Second, 1, []error{persist.ErrNotFound}},
		{"RetriesPastMaxAttemptsWithinTheDeadline", repeat(errConflict, maxAttempts+2), time.Minute, maxAttempts + 3, nil},
		{"AmbiguousNotRetried", []error{fmt.Errorf("%w: %w", persist.ErrAmbiguous, errConflict)}, time.Minute, 1, []error{persist.ErrAmbiguous}},
		{"GivesUpAfterMaxAttemptsWithoutDeadline", repeat(errConflict, 20), 0, maxAttempts, []error{errConflict, persist.ErrUnavailable}},
		{"GivesUpAtDeadline", repeat(errConflict, 20), time.Millisecond, 1, []error{errConflict, persist.ErrUnavailable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore(nil, testDialect(), persist.Options{QueryTimeout: -1})
			ctx, cancel := t.Context(), context.CancelFunc(func() {})
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			}
			defer cancel()
			calls := 0
			err := c.do(ctx, "take", "t", func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v in the chain", err, want)
				}
			}
		})
	}
}

func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func TestUnavailableKeepsCause(t *testing.T) {
	c := NewCore(nil, testDialect(), persist.Options{})
	cause := fmt.Errorf("dial: %w", context.DeadlineExceeded)
	err := c.Wrap(cause)
	if !errors.Is(err, persist.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wrap(%v) = %v", cause, err)
	}
	if err := c.Wrap(persist.ErrNotFound); err != persist.ErrNotFound {
		t.Fatalf("Wrap(ErrNotFound) = %v", err)
	}
}

// NumberedPlaceholders numbers every ? in order.
func TestNumberedPlaceholders(t *testing.T) {
	tests := []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`WHERE a = ? AND b = ?`, `WHERE a = $1 AND b = $2`},
		{`(?,?,?,?,?,?,?,?,?,?)`, `($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`},
	}
	for _, tc := range tests {
		if got := NumberedPlaceholders(tc.in); got != tc.want {
			t.Errorf("NumberedPlaceholders(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Rebind turns every statement's ? into the dialect's placeholders, the
// dialect's own statements included; without Rebind they stay as written.
func TestRebind(t *testing.T) {
	d := testDialect()
	d.IgnoreDuplicate = ` ON CONFLICT (biz_tag) DO NOTHING`
	plain := NewCore(nil, d, persist.Options{}).q
	d.Rebind = NumberedPlaceholders
	rebound := NewCore(nil, d, persist.Options{}).q
	if rebound.ensureGuard != `INSERT INTO leaf_guard (biz_tag, high) VALUES ($1, $2) ON CONFLICT (biz_tag) DO NOTHING` {
		t.Errorf("ensureGuard = %q", rebound.ensureGuard)
	}
	pv, rv := reflect.ValueOf(plain), reflect.ValueOf(rebound)
	for i := range pv.NumField() {
		name := pv.Type().Field(i).Name
		p, r := pv.Field(i).String(), rv.Field(i).String()
		if r != NumberedPlaceholders(p) || strings.Contains(r, "?") {
			t.Errorf("%s: rebound %q from %q", name, r, p)
		}
		if strings.Count(p, "?") != strings.Count(r, "$") {
			t.Errorf("%s: %d placeholders became %d", name, strings.Count(p, "?"), strings.Count(r, "$"))
		}
	}
}
