package mysql

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-id/leaf/persist"
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
			c, err := config(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// The dialect tells the core which errors to retry (the server rolled the
// transaction back: deadlocks, lock wait timeouts) and which mean the
// database is unavailable; a syntax error is neither.
func TestDialectClassifiesErrors(t *testing.T) {
	d := dialect()
	tests := []struct {
		name                   string
		err                    error
		retryable, unavailable bool
	}{
		{"Deadlock", &mysql.MySQLError{Number: erLockDeadlock, Message: "Deadlock found"}, true, true},
		{"LockWaitTimeout", &mysql.MySQLError{Number: erLockWaitTimeout, Message: "Lock wait timeout exceeded"}, true, true},
		{"WrappedDeadlock", fmt.Errorf("take: %w", &mysql.MySQLError{Number: erLockDeadlock}), true, true},
		{"TiDBWriteConflict", &mysql.MySQLError{Number: erTiDBWriteConfl}, true, true},
		{"ServerShutdown", &mysql.MySQLError{Number: erServerShutdown}, false, true},
		{"InvalidConn", mysql.ErrInvalidConn, false, true},
		{"Syntax", &mysql.MySQLError{Number: 1064, Message: "syntax"}, false, false},
		{"NotFound", persist.ErrNotFound, false, false},
		{"Other", errors.New("other"), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Retryable(tc.err); got != tc.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.retryable)
			}
			if got := d.Unavailable(tc.err); got != tc.unavailable {
				t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.unavailable)
			}
		})
	}
	if !d.NoTable(&mysql.MySQLError{Number: erNoSuchTable}) || d.NoTable(&mysql.MySQLError{Number: 1064}) {
		t.Error("NoTable does not tell error 1146 alone")
	}
}

// The pool takes its size from Options (store.max_open_conns), with the
// backend's default when zero; idle connections are kept up to the same
// number.
func TestMySQLPoolFromOptions(t *testing.T) {
	tests := []struct {
		name string
		opts persist.Options
		want int
	}{
		{"Configured", persist.Options{MaxOpenConns: 7, ConnMaxLifetime: time.Minute}, 7},
		{"Default", persist.Options{}, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config("u:p@tcp(127.0.0.1:1)/leaf")
			if err != nil {
				t.Fatal(err)
			}
			c, err := connect(cfg, tc.opts, dialect()) // no connection yet
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.DB().Stats().MaxOpenConnections; got != tc.want {
				t.Errorf("MaxOpenConnections = %d, want %d", got, tc.want)
			}
		})
	}
}
