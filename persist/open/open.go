// Package open opens the store the configuration names, for the server and
// for the operator's subcommands alike: one switch over store.driver, so a
// new backend is one case here (and its DSN form in config.RedactDSN).
package open

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/etcd"
	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/postgres"
	"github.com/leaf-id/leaf/persist/sqlite"
)

// ErrNoDatabase: a ReadOnly open found no SQLite file at store.dsn.
var ErrNoDatabase = errors.New("no database")

// Options are what the caller adds to the store section.
type Options struct {
	// LoadTimeout bounds every query whose context has no deadline
	// (segment.load_timeout).
	LoadTimeout time.Duration
	// Logger receives the backend's notices; nil discards them.
	Logger *slog.Logger
	// ReadOnly creates nothing (leaf tags list, leaf import --dry-run):
	// no table, whatever store.create_schema says, and no SQLite file: a
	// missing one is ErrNoDatabase.
	ReadOnly bool
	// Lazy lets the server start while its database cannot be reached: a
	// backend that can (MySQL, PostgreSQL, etcd) then returns a store that connects on first
	// use and answers persist.ErrUnavailable until it does. Mistakes no
	// wait fixes (a bad DSN, a refused password) still fail at once.
	Lazy bool
}

// Store opens the backend c names, its pool sized by store.max_open_conns
// and store.conn_max_lifetime. Errors start with store.driver and the
// redacted store.dsn and never show the password, even where a driver's
// message quotes it.
func Store(ctx context.Context, c config.StoreConfig, o Options) (persist.Backend, error) {
	opts := persist.Options{
		CreateSchema:    c.CreateSchema && !o.ReadOnly,
		ReadOnly:        o.ReadOnly,
		MaxOpenConns:    c.MaxOpenConns,
		ConnMaxLifetime: c.ConnMaxLifetime,
		QueryTimeout:    o.LoadTimeout,
		Logger:          o.Logger,
	}
	s, err := backend(ctx, c, o, opts)
	if err != nil {
		return nil, c.RedactError(fmt.Errorf("store.driver=%s store.dsn=%s: %w", c.Driver, c.RedactedDSN(), err))
	}
	return s, nil
}

// backend opens the driver's backend; a nil Backend with every error.
func backend(ctx context.Context, c config.StoreConfig, o Options, opts persist.Options) (persist.Backend, error) {
	switch c.Driver {
	case "sqlite":
		return openSQLite(ctx, c, o, opts)
	case "mysql":
		if o.Lazy {
			return nonNil(mysql.OpenDeferred(ctx, c.DSN, opts))
		}
		return nonNil(mysql.Open(ctx, c.DSN, opts))
	case "postgres":
		if o.Lazy {
			return nonNil(postgres.OpenDeferred(ctx, c.DSN, opts))
		}
		return nonNil(postgres.Open(ctx, c.DSN, opts))
	case "etcd":
		return nonNil(etcd.Open(ctx, etcd.Config{
			Endpoints: c.DSN, Prefix: c.EtcdPrefix,
			TLSCA: c.EtcdTLSCA, TLSCert: c.EtcdTLSCert, TLSKey: c.EtcdTLSKey,
			Lazy: o.Lazy,
		}, opts))
	}
	return nil, fmt.Errorf("%w: unknown store.driver", persist.ErrInvalid)
}

// openSQLite opens the SQLite file of store.dsn. A file that does not
// exist is a new, empty store in which every tag starts at 1 again: for an
// ID service, a mistyped path would repeat every ID handed out. So it is
// created only where the user allowed it (./data/, the default's
// directory, or store.create_database), and its creation is logged at warn.
func openSQLite(ctx context.Context, c config.StoreConfig, o Options, opts persist.Options) (persist.Backend, error) {
	_, err := os.Stat(c.DSN)
	missing := errors.Is(err, os.ErrNotExist)
	switch {
	case missing && o.ReadOnly:
		return nil, fmt.Errorf("%w: the file does not exist "+
			"(set store.dsn to the file the server uses, or run from the server's working directory)", ErrNoDatabase)
	case missing && !c.CreateDatabase && !inDefaultDir(c.DSN):
		return nil, fmt.Errorf("%w: the file does not exist, and a new file would be an empty store whose tags "+
			"all start at 1 again; check the path (the server's files are where it ran), or set "+
			"store.create_database: true to create a new store there (leaf creates one unasked only in ./%s/)",
			ErrNoDatabase, filepath.Dir(config.DefaultSQLiteDSN))
	}
	s, err := sqlite.Open(ctx, c.DSN, opts)
	if err != nil {
		return nil, err
	}
	if missing {
		opts.Log().Warn("persist: created a new, empty SQLite database: every tag starts from its first ID here; "+
			"if this server ran before, its database is elsewhere (store.dsn)", "path", s.Path())
	}
	return s, nil
}

// inDefaultDir reports whether the SQLite file at path lies in the
// directory of the default store.dsn (./data/), where a missing file is
// created without store.create_database.
func inDefaultDir(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	dir, err := filepath.Abs(filepath.Dir(config.DefaultSQLiteDSN))
	return err == nil && filepath.Dir(abs) == dir
}

// nonNil returns s as a Backend, or a nil Backend (not a nil *T in an
// interface) with err.
func nonNil[T persist.Backend](s T, err error) (persist.Backend, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}
