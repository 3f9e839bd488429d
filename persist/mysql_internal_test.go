package persist

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestMySQLConfig(t *testing.T) {
	tests := []struct {
		name  string
		dsn   string
		check func(t *testing.T, c *mysql.Config)
	}{
		{"Defaults", "u:p@tcp(h:3306)/leaf", func(t *testing.T, c *mysql.Config) {
			if !c.ParseTime || c.ClientFoundRows || !c.RejectReadOnly {
				t.Errorf("parseTime=%v clientFoundRows=%v rejectReadOnly=%v", c.ParseTime, c.ClientFoundRows, c.RejectReadOnly)
			}
			if c.Timeout != 5*time.Second || c.ReadTimeout != 30*time.Second || c.WriteTimeout != 30*time.Second {
				t.Errorf("timeouts %v %v %v", c.Timeout, c.ReadTimeout, c.WriteTimeout)
			}
			if c.Params["time_zone"] != "'+00:00'" || c.Params["sql_mode"] != "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'" {
				t.Errorf("params %v", c.Params)
			}
		}},
		{"Forced", "u:p@tcp(h:3306)/leaf?parseTime=false&clientFoundRows=true", func(t *testing.T, c *mysql.Config) {
			if !c.ParseTime || c.ClientFoundRows {
				t.Errorf("parseTime=%v clientFoundRows=%v", c.ParseTime, c.ClientFoundRows)
			}
		}},
		{"Kept", "u:p@tcp(h:3306)/leaf?timeout=1s&readTimeout=2s&writeTimeout=3s&sql_mode=%27ANSI%27&time_zone=%27%2B08%3A00%27", func(t *testing.T, c *mysql.Config) {
			if c.Timeout != time.Second || c.ReadTimeout != 2*time.Second || c.WriteTimeout != 3*time.Second {
				t.Errorf("timeouts %v %v %v", c.Timeout, c.ReadTimeout, c.WriteTimeout)
			}
			if c.Params["sql_mode"] != "'ANSI'" || c.Params["time_zone"] != "'+08:00'" {
				t.Errorf("params %v", c.Params)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mysqlConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// do retries deadlocks and lock wait timeouts while the deadline allows,
// and nothing else.
func TestDoRetries(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: erLockDeadlock, Message: "Deadlock found"}
	lockWait := &mysql.MySQLError{Number: erLockWaitTimeout, Message: "Lock wait timeout exceeded"}
	other := &mysql.MySQLError{Number: 1064, Message: "syntax"}
	tests := []struct {
		name      string
		errs      []error // returned by the successive calls; nil after
		timeout   time.Duration
		wantCalls int
		wantErr   []error
	}{
		{"DeadlockThenOK", []error{deadlock, lockWait}, time.Second, 3, nil},
		{"NotRetryable", []error{other}, time.Second, 1, []error{other}},
		{"SentinelNotRetried", []error{ErrNotFound}, time.Second, 1, []error{ErrNotFound}},
		{"GivesUpAfterMaxAttempts", repeat(deadlock, 20), 10 * time.Second, maxAttempts, []error{deadlock, ErrUnavailable}},
		{"GivesUpAtDeadline", repeat(deadlock, 20), time.Millisecond, 1, []error{deadlock, ErrUnavailable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(nil, mysqlDialect(), Options{})
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
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
	c := newCore(nil, mysqlDialect(), Options{})
	cause := fmt.Errorf("dial: %w", context.DeadlineExceeded)
	err := c.wrap(cause)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wrap(%v) = %v", cause, err)
	}
	if err := c.wrap(ErrNotFound); err != ErrNotFound {
		t.Fatalf("wrap(ErrNotFound) = %v", err)
	}
}

// The pool takes its size from Options (store.max_open_conns), with the
// backend's default when zero; idle connections are kept up to the same
// number.
func TestMySQLPoolFromOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want int
	}{
		{"Configured", Options{MaxOpenConns: 7, ConnMaxLifetime: time.Minute}, 7},
		{"Default", Options{}, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mysqlConfig("u:p@tcp(127.0.0.1:1)/leaf")
			if err != nil {
				t.Fatal(err)
			}
			m, err := connectMySQL(cfg, tc.opts) // no connection yet
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.db.Stats().MaxOpenConnections; got != tc.want {
				t.Errorf("MaxOpenConnections = %d, want %d", got, tc.want)
			}
		})
	}
}
