package persist

import (
	"log/slog"
	"time"
)

// Defaults applied by the backends' Open functions to zero Options fields.
const (
	DefaultQueryTimeout = 5 * time.Second
	DefaultBusyTimeout  = 5 * time.Second
)

// Options tunes a backend. The zero value is usable: zero fields take the
// backend's defaults.
type Options struct {
	// CreateSchema creates leaf_alloc and leaf_guard when they are
	// missing. When false and leaf_alloc is missing, Open fails with
	// ErrSchema; when false and only leaf_guard is missing, Open succeeds
	// with the persistent guard off (GuardEnabled reports false) and logs
	// a warning with the statement that creates it.
	CreateSchema bool
	// MaxOpenConns caps the connection pool (idle connections are kept up
	// to the same number). 0: the backend's default (for the SQL
	// backends, sqlstore's Dialect.MaxOpenConns).
	MaxOpenConns int
	// ConnMaxLifetime recycles connections after this long. 0: the
	// backend's default (for the SQL backends, sqlstore's
	// Dialect.ConnMaxLifetime).
	ConnMaxLifetime time.Duration
	// BusyTimeout is how long SQLite waits for another connection's or
	// process's write lock before failing (SQLite only). 0: DefaultBusyTimeout.
	BusyTimeout time.Duration
	// QueryTimeout is the deadline put on every call whose context has none.
	// 0: DefaultQueryTimeout; negative: no deadline.
	QueryTimeout time.Duration
	// Logger receives open-time notices and retries. nil: discard.
	Logger *slog.Logger
	// ReadOnly: the caller only reads (listing tags). Open then does not
	// require the right to write, and does not check what writes the
	// user may make.
	ReadOnly bool
}

// Log returns Logger, or a logger that discards everything when it is nil.
func (o Options) Log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
