package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPostgresConfig(t *testing.T) {
	tests := []struct {
		name               string
		dsn                string
		wantTimeout        time.Duration
		wantApp, wantZone  string
		wantHost, wantDB   string
		wantPort           uint16
		wantIsolationParam string
	}{
		{"URLDefaults", "postgres://u:p@db.example:5433/leaf", 5 * time.Second, "leaf", "UTC", "db.example", "leaf", 5433, ""},
		{"KeywordDefaults", "host=db.example user=u password=p dbname=leaf", 5 * time.Second, "leaf", "UTC", "db.example", "leaf", 5432, ""},
		{"Kept", "postgres://u:p@h/leaf?connect_timeout=2&application_name=ids&timezone=Asia%2FTokyo&default_transaction_isolation=serializable",
			2 * time.Second, "ids", "Asia/Tokyo", "h", "leaf", 5432, "serializable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			p := c.RuntimeParams
			if c.ConnectTimeout != tc.wantTimeout || p["application_name"] != tc.wantApp || p["timezone"] != tc.wantZone ||
				c.Host != tc.wantHost || c.Port != tc.wantPort || c.Database != tc.wantDB ||
				p["default_transaction_isolation"] != tc.wantIsolationParam {
				t.Errorf("config = timeout %v host %s port %d db %s params %v", c.ConnectTimeout, c.Host, c.Port, c.Database, p)
			}
		})
	}
}

// How the dialect reads PostgreSQL's and CockroachDB's errors: what is run
// again, what means the database is away, what leaves the outcome unknown.
func TestPostgresErrors(t *testing.T) {
	d := dialect()
	pg := func(code string) error { return fmt.Errorf("exec: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name                              string
		err                               error
		retryable, unavailable, ambiguous bool
		noTable                           bool
	}{
		{"SerializationFailure", pg("40001"), true, true, false, false},
		{"Deadlock", pg("40P01"), true, true, false, false},
		{"CockroachAmbiguous", pg("40003"), false, true, true, false},
		{"AdminShutdown", pg("57P01"), false, true, false, false},
		{"CannotConnectNow", pg("57P03"), false, true, false, false},
		{"ConnectionFailure", pg("08006"), false, true, false, false},
		{"TooManyConnections", pg("53300"), false, true, false, false},
		{"StatementTimeout", pg("57014"), false, true, false, false},
		{"UndefinedTable", pg("42P01"), false, false, false, true},
		{"InvalidPassword", pg("28P01"), false, false, false, false},
		{"UniqueViolation", pg("23505"), false, false, false, false},
		{"EOF", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), false, true, false, false},
		{"Other", errors.New("boom"), false, false, false, false},
		{"ContextCanceled", context.Canceled, false, false, false, false}, // the core checks context errors itself
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Retryable(tc.err); got != tc.retryable {
				t.Errorf("Retryable = %v, want %v", got, tc.retryable)
			}
			if got := d.Unavailable(tc.err); got != tc.unavailable {
				t.Errorf("Unavailable = %v, want %v", got, tc.unavailable)
			}
			if got := d.Ambiguous(tc.err); got != tc.ambiguous {
				t.Errorf("Ambiguous = %v, want %v", got, tc.ambiguous)
			}
			if got := d.NoTable(tc.err); got != tc.noTable {
				t.Errorf("NoTable = %v, want %v", got, tc.noTable)
			}
		})
	}
}
