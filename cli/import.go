package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/open"
	"github.com/leaf-id/leaf/segment"
)

// scanCount is the COUNT hint of each SCAN, and so about the keys read per
// pipelined round of GETs.
const scanCount = 1000

// importDescription is the description of tags the import creates.
const importDescription = "imported from Redis"

// runImport: leaf import redis --from URL [--match P] [--headroom N] [--dry-run].
func runImport(ctx context.Context, e *env, args []string) error {
	fs := newFlags("import redis")
	from := fs.String("from", "", "the Redis to read: redis://[user:pass@]host:port[/db], rediss:// for TLS")
	match := fs.String("match", "*", "import only the keys matching this SCAN MATCH pattern")
	headroom := fs.Int64("headroom", 0, "raise each floor to the counter plus this, for IDs Redis hands out until clients move")
	dryRun := fs.Bool("dry-run", false, "change nothing; print what would be done")
	every := fs.Int("progress-every", 10000, "without a terminal, a progress line every this many keys")
	_ = fs.MarkHidden("progress-every")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("want a source: leaf import redis --from redis://host:port (see leaf import --help)")
	}
	if fs.Arg(0) != "redis" || fs.NArg() > 1 {
		return fmt.Errorf("unexpected arguments %q: the only source is redis (leaf import redis --from redis://host:port)", fs.Args())
	}
	if *from == "" {
		return errors.New("--from is required: leaf import redis --from redis://host:port")
	}
	if *headroom < 0 {
		return fmt.Errorf("--headroom %d: must be >= 0", *headroom)
	}
	if *every < 1 {
		return fmt.Errorf("--progress-every %d: must be >= 1", *every)
	}
	if err := e.load(); err != nil {
		return err
	}

	opts, shown, err := redisOptions(*from)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", shown, err)
	}
	total, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis at %s: DBSIZE: %w", shown, err)
	}

	s, err := e.openStore(ctx, *dryRun)
	if errors.Is(err, open.ErrNoDatabase) {
		// A dry run before the database exists: every tag is new.
		s, err = nil, nil
	}
	if err != nil {
		return err
	}
	if s != nil {
		defer s.Close()
	}

	im := &importer{
		env:      e,
		store:    s,
		dryRun:   *dryRun,
		headroom: *headroom,
		step:     e.cfg.Segment.DefaultStep,
		progress: newProgress(e.stderr, *every, total, *match == "*", *dryRun),
	}
	verb := "importing"
	if *dryRun {
		verb = "dry run: reading"
	}
	fmt.Fprintf(e.stderr, "%s counters from %s (match %q, %d keys in the database) into %s\n",
		verb, shown, *match, total, storeName(e))
	err = im.run(ctx, rdb, *match)
	im.progress.done(im.sum)
	fmt.Fprintln(e.stdout, im.sum.String(*dryRun))
	switch raised := im.sum.imported - im.sum.created; {
	case raised > 0 && *dryRun:
		fmt.Fprintf(e.stderr, "note: %d tags already exist and would be raised; the import tells the running leaf servers, "+
			"which skip the IDs they cached below the floors and confirm, as for LEAF.FLOOR\n", raised)
	case len(im.raised) > 0:
		// Even after an error: the floors raised so far are in the store.
		cerr := confirm(ctx, e, s, fmt.Sprintf("the floors of %d tags that existed", len(im.raised)), im.raised...)
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("stopped after %d keys (importing again is safe: floors only raise): %w", im.sum.keys, err)
	}
	return nil
}

// redisOptions parses --from: a redis://, rediss:// or unix:// URL, or a
// bare host:port. shown is the address without the password, for messages.
func redisOptions(from string) (opts *redis.Options, shown string, err error) {
	if !strings.Contains(from, "://") {
		from = "redis://" + from
	}
	if _, err := url.Parse(from); err != nil {
		// url's message quotes the input, which may hold a password.
		return nil, "", errors.New("--from: not a URL like redis://host:port")
	}
	shown = config.RedactURL(from)
	opts, err = redis.ParseURL(from)
	if err != nil {
		return nil, "", fmt.Errorf("--from %s: %s", shown, strings.ReplaceAll(err.Error(), from, shown))
	}
	// One connection, no retries: an unreachable Redis fails at once (a
	// lost connection stops the import, which is safe to run again).
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = 1
	return opts, shown, nil
}

// storeName is the store for messages: driver and DSN without a password.
func storeName(e *env) string {
	return e.cfg.Store.Driver + " " + e.cfg.Store.RedactedDSN()
}

// importer raises floors for one import run.
type importer struct {
	env      *env
	store    persist.Backend // nil in a dry run without a database
	dryRun   bool
	headroom int64
	step     int64
	progress *progress
	sum      summary
	raised   []persist.Change // floors raised on tags that existed, for the running servers
}

// summary counts what happened to the keys.
type summary struct {
	keys      int64 // keys SCAN returned
	imported  int64 // floors raised (tags created included)
	created   int64 // of which tags created
	above     int64 // max_id already above the counter
	nonInt    int64 // strings that are not an integer counter
	nonString int64 // hashes, lists, ...: not counters
	invalid   int64 // key names that cannot be tags
	vanished  int64 // deleted between SCAN and GET
}

func (s summary) String(dryRun bool) string {
	imported, above := "imported", "already above"
	if dryRun {
		imported = "would be imported"
	}
	return fmt.Sprintf("%d keys: %d %s (%d new tags), %d %s, %d skipped not an integer, "+
		"%d skipped not a string, %d invalid tag names, %d vanished",
		s.keys, s.imported, imported, s.created, s.above, above, s.nonInt, s.nonString, s.invalid, s.vanished)
}

// run scans the keys matching match and imports each.
func (im *importer) run(ctx context.Context, rdb *redis.Client, match string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return fmt.Errorf("redis SCAN: %w", err)
		}
		if err := im.batch(ctx, rdb, keys); err != nil {
			return err
		}
		cursor = next
		if cursor == 0 {
			return nil
		}
	}
}

// batch reads keys with one pipeline of GETs and imports each.
func (im *importer) batch(ctx context.Context, rdb *redis.Client, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	gets := make([]*redis.StringCmd, len(keys))
	// The pipeline's error is its first command's; each is looked at below.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i] = p.Get(ctx, k)
		}
		return nil
	})
	for i, key := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		im.sum.keys++
		val, err := gets[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			im.sum.vanished++
		case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
			im.sum.nonString++
			typ, terr := rdb.Type(ctx, key).Result()
			if terr != nil {
				typ = "not a string"
			}
			im.report("skip", key, "not a string counter (%s)", typ)
		case err != nil:
			return fmt.Errorf("redis GET %q: %w", key, err)
		default:
			if err := im.key(ctx, key, val); err != nil {
				return err
			}
		}
		im.progress.update(im.sum)
	}
	return nil
}

// key imports one string key.
func (im *importer) key(ctx context.Context, key, val string) error {
	if err := segment.ValidTag([]byte(key)); err != nil {
		im.sum.invalid++
		im.report("invalid", key, "%v", err)
		return nil
	}
	v, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		im.sum.nonInt++
		im.report("skip", key, "not an integer: %s", quoteShort(val))
		return nil
	}
	// Every later ID must be above the counter: floor = value (+ headroom).
	// A negative counter handed out nothing leaf could repeat.
	floor := max(v, 0)
	if floor > maxFloor-im.headroom {
		im.sum.nonInt++
		im.report("skip", key, "%d plus headroom %d is beyond the IDs leaf hands out (at most %d)", v, im.headroom, maxFloor)
		return nil
	}
	floor += im.headroom
	if im.dryRun {
		return im.plan(ctx, key, floor)
	}
	res, err := raiseFloor(ctx, im.store, key, floor, im.step, importDescription)
	if errors.Is(err, persist.ErrOverflow) || errors.Is(err, persist.ErrInvalid) {
		im.sum.nonInt++
		im.report("skip", key, "%v", err)
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case res.created:
		im.sum.imported++
		im.sum.created++
		im.report("created", key, "floor %d: max_id %d, step %d", floor, res.row.MaxID, res.row.Step)
	case res.moved:
		im.sum.imported++
		im.raised = append(im.raised, persist.Change{Kind: persist.ChangeFloor, Tag: key, Value: floor})
		im.report("raised", key, "floor %d: max_id %d", floor, res.row.MaxID)
	default:
		im.sum.above++
	}
	return nil
}

// plan is key's dry run: what the import would do, from the current row.
func (im *importer) plan(ctx context.Context, key string, floor int64) error {
	var row persist.Tag
	err := persist.ErrNotFound
	if im.store != nil {
		row, err = im.store.Tag(ctx, key)
	}
	switch {
	case errors.Is(err, persist.ErrNotFound):
		im.sum.imported++
		im.sum.created++
		im.report("would create", key, "floor %d: max_id %d, step %d", floor, floor+1, im.step)
	case err != nil:
		return err
	case row.MaxID > floor:
		im.sum.above++
	default:
		im.sum.imported++
		im.report("would raise", key, "floor %d: max_id %d -> %d", floor, row.MaxID, floor+1)
	}
	return nil
}

// report prints one line about a key on stdout: what, the key (quoted
// when it is not a plain tag), the detail.
func (im *importer) report(what, key, format string, args ...any) {
	shown := key
	if segment.ValidTag([]byte(key)) != nil || strings.ContainsAny(key, " \t\"") {
		shown = strconv.Quote(key)
	}
	fmt.Fprintf(im.env.stdout, "%-13s %s  %s\n", what, shown, fmt.Sprintf(format, args...))
}

// quoteShort quotes s, cut to 40 bytes.
func quoteShort(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}
