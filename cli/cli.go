// Package cli holds leaf's operator subcommands, run by the same binary as
// the server:
//
//	leaf tags list|create|floor|step ...             the leaf_alloc rows, in the store directly
//	leaf import redis --from redis://host:port ...   Redis INCR counters into leaf
//	leaf health [--timeout 3s]                       exit 0 when the configured server answers
//
// tags and import talk to the store, never to a running leaf server, and
// keep the server's guarantees: a floor only raises max_id, nothing
// deletes a row. health asks the server configured, as a container's
// HEALTHCHECK does.
//
// # Configuration
//
// Subcommands read the configuration as the server does (config.Load: the
// defaults, leaf.yaml or --config, LEAF_* variables, then flags); they use
// the store section, and segment.default_step and segment.load_timeout.
// Configuration flags and the subcommand's own flags mix freely after the
// subcommand's words. A flag whose name has a dot (--store.dsn) or
// --config belongs to the configuration, every other one to the
// subcommand:
//
//	leaf tags --store.dsn=data/leaf.db list
//	leaf tags create order --step 500 --store.driver=mysql --store.dsn 'leaf:pw@tcp(db:3306)/leaf'
//	LEAF_STORE_DSN=/srv/leaf/leaf.db leaf import redis --from redis://127.0.0.1:6379 --dry-run
//
// Reports go to stdout, progress and warnings to stderr. Errors are
// returned (main prints them and exits 1) and never contain a password.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/open"
)

// Summary lists the commands of the binary, one line each, for leaf --help.
const Summary = `Commands (each has --help, with examples):
  leaf [flags]                       serve IDs over the Redis protocol (the flags below configure it)
  leaf tags list|create|floor|step   the tags in the store: list, create, raise a floor, change a step
  leaf import redis --from URL       raise each tag's floor above its Redis INCR counter (moving from Redis)
  leaf health                        exit 0 when the configured server answers (a container's HEALTHCHECK)
  leaf version, leaf --version, -v   the version, VCS revision and Go version
`

// configHelp ends the help of the subcommands that open the store.
const configHelp = `
The store is configured as the server's is: leaf.yaml (or --config=PATH),
LEAF_<SECTION>_<KEY> variables, and --section.key=value flags anywhere after
the subcommand. Run 'leaf --help' for every configuration flag.
`

// usages are the help of each subcommand, examples included.
var usages = map[string]string{
	"tags": `Usage:
  leaf tags list                                   every tag: max_id, step, description, update time
  leaf tags create TAG [--step N] [--desc TEXT] [--mode segment|snowflake]
                                                   a new tag (step: segment.default_step; snowflake:
                                                   time-ordered IDs, layout cluster.snowflake_*)
  leaf tags floor TAG N                            make every later ID of TAG greater than N (never lowers),
                                                   confirmed by every running server; segment tags only
  leaf tags step TAG N                             change TAG's step in the table; segment tags only

Examples:
  leaf tags --store.dsn=data/leaf.db list
  leaf tags create order --step 500 --desc "order numbers"
  leaf tags --store.driver=mysql --store.dsn='leaf:pw@tcp(127.0.0.1:3306)/leaf' floor order 5000
` + configHelp,
	"import": `Usage:
  leaf import redis --from redis://[user:pass@]host:port[/db] [--match PATTERN] [--headroom N] [--dry-run]
                                                   raise each tag's floor above its Redis counter,
                                                   creating the tags that do not exist

Examples:
  leaf import redis --from redis://127.0.0.1:6379 --match 'order:*' --dry-run
  LEAF_STORE_DSN=/srv/leaf/leaf.db leaf import redis --from redis://:pw@redis:6379/0 --headroom 1000
` + configHelp,
	"health": `Usage:
  leaf health [--timeout 3s]                       exit 0 when the configured server answers PING on
                                                   server.addr and, with http.addr set, GET /healthz

Examples:
  leaf health
  leaf health --timeout 1s --config /etc/leaf/leaf.yaml

It reads the configuration as the server does (leaf.yaml, LEAF_* variables,
--section.key=value flags), so it checks the server that configuration runs.
`,
}

// commands are the subcommands Run handles: main hands it its arguments
// when the first one is among them.
var commands = map[string]func(ctx context.Context, e *env, args []string) error{
	"tags":   runTags,
	"import": runImport,
	"health": runHealth,
}

// IsCommand reports whether name (the program's first argument) is one of
// the subcommands Run handles.
func IsCommand(name string) bool {
	_, ok := commands[name]
	return ok
}

// env is what a subcommand runs with.
type env struct {
	environ        []string
	stdout, stderr io.Writer
	cfgArgs        []string      // the configuration's flags, for config.Load
	cfg            config.Config // loaded by load
	log            *slog.Logger
}

// Run runs the subcommand args[0] ("tags", "import") with the rest of args.
// Help (-h, --help) prints the usage on stdout and returns config.ErrHelp,
// which main treats as success.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !IsCommand(args[0]) {
		return fmt.Errorf("unknown subcommand; %s", strings.TrimSpace(Summary))
	}
	cfgArgs, own := splitArgs(args[1:])
	e := &env{environ: environ, stdout: stdout, stderr: stderr, cfgArgs: cfgArgs}
	err := commands[args[0]](ctx, e, own)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, usages[args[0]])
		return config.ErrHelp
	}
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return nil
}

// splitArgs separates the configuration's flags (a dot in the name, or
// --config) from the subcommand's words and flags. A configuration flag
// takes its value after '=' or, unless it is a boolean, as the next word.
func splitArgs(args []string) (cfg, own []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			own = append(own, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !(strings.Contains(name, ".") || name == "config") {
			own = append(own, a)
			continue
		}
		cfg = append(cfg, a)
		if !hasValue && !config.IsBoolFlag(name) && i+1 < len(args) {
			cfg = append(cfg, args[i+1])
			i++
		}
	}
	return cfg, own
}

// load reads the configuration and sets up the log: warnings and errors on
// stderr (debug too with log.level=debug), so reports stay readable.
func (e *env) load() error {
	cfg, err := config.Load(e.cfgArgs, e.environ)
	if errors.Is(err, config.ErrHelp) {
		return pflag.ErrHelp
	}
	if err != nil {
		return err
	}
	e.cfg = cfg
	level := max(cfg.Log.SlogLevel(), slog.LevelWarn)
	if cfg.Log.SlogLevel() == slog.LevelDebug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		e.log = slog.New(slog.NewJSONHandler(e.stderr, opts))
	} else {
		e.log = slog.New(slog.NewTextHandler(e.stderr, opts))
	}
	return nil
}

// openStore opens the configured store (open.Store). readOnly
// subcommands (list, --dry-run) never create anything: a missing SQLite
// file is open.ErrNoDatabase, a missing table an error, where the others
// create both as the server does (store.create_schema). A database that
// cannot be reached is an error at once.
func (e *env) openStore(ctx context.Context, readOnly bool) (persist.Backend, error) {
	return open.Store(ctx, e.cfg.Store, open.Options{LoadTimeout: e.cfg.Segment.LoadTimeout, Logger: e.log, ReadOnly: readOnly})
}

// newFlags is a subcommand's flag set: errors returned, nothing printed.
func newFlags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// parseFlags parses a subcommand's flags; an error says what to run for help.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w (see leaf %s --help)", err, fs.Name())
	}
	return nil
}
