package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/snowflake/configured"
)

// maxFloor is the highest floor the allocator accepts.
const maxFloor = segment.MaxFloor

// runTags: leaf tags list|create|floor|step.
func runTags(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: list, create, floor or step (see leaf tags --help)")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		return pflag.ErrHelp
	case "list":
		return tagsList(ctx, e, rest)
	case "create":
		return tagsCreate(ctx, e, rest)
	case "floor":
		return tagsFloor(ctx, e, rest)
	case "step":
		return tagsStep(ctx, e, rest)
	}
	return fmt.Errorf("unknown subcommand %q: want list, create, floor or step (see leaf tags --help)", sub)
}

// positional parses a subcommand's flags and checks its positional words.
func positional(fs *pflag.FlagSet, args []string, names ...string) ([]string, error) {
	for _, a := range args {
		// Flag parsing would read "-1" as the shorthand flag 1.
		if n, err := strconv.ParseInt(a, 10, 64); err == nil && n < 0 {
			return nil, fmt.Errorf("%s: must be >= 0", a)
		}
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != len(names) {
		return nil, fmt.Errorf("want %d arguments (%v), got %d: %q (see leaf tags --help)", len(names), names, fs.NArg(), fs.Args())
	}
	return fs.Args(), nil
}

// tagArg checks a tag name as the server does.
func tagArg(name string) error {
	if err := segment.ValidTag([]byte(name)); err != nil {
		return fmt.Errorf("tag %q: %w", name, err)
	}
	return nil
}

// intArg parses a decimal argument.
func intArg(what, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not an integer", what, s)
	}
	return n, nil
}

// tagAndNumber checks the words of leaf tags floor|step TAG N: a valid tag
// and an integer N in [lo, hi].
func tagAndNumber(what string, args []string, lo, hi int64) (string, int64, error) {
	pos, err := positional(newFlags("tags "+what), args, "TAG", "N")
	if err != nil {
		return "", 0, err
	}
	name := pos[0]
	if err := tagArg(name); err != nil {
		return "", 0, err
	}
	n, err := intArg(what, pos[1])
	if err != nil {
		return "", 0, err
	}
	if n < lo || n > hi {
		return "", 0, fmt.Errorf("%s %d: must be between %d and %d", what, n, lo, hi)
	}
	return name, n, nil
}

// tagsList: leaf tags list -> a table of every row, by name.
func tagsList(ctx context.Context, e *env, args []string) error {
	if _, err := positional(newFlags("tags list"), args); err != nil {
		return err
	}
	if err := e.load(); err != nil {
		return err
	}
	s, err := e.openStore(ctx, true)
	if err != nil {
		return err
	}
	defer s.Close()
	tags, err := s.Tags(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tMODE\tMAX_ID\tSTEP\tDESCRIPTION\tUPDATE_TIME")
	for _, t := range tags {
		updated := "-"
		if !t.UpdateTime.IsZero() {
			updated = t.UpdateTime.UTC().Format(time.RFC3339)
		}
		mode := t.Mode
		if mode == "" {
			mode = "segment"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", t.Name, mode, t.MaxID, t.Step, t.Description, updated)
	}
	return tw.Flush()
}

// tagsCreate: leaf tags create TAG [--step N] [--desc TEXT] [--mode segment|snowflake].
func tagsCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlags("tags create")
	step := fs.Int64("step", 0, "the table's step (default segment.default_step)")
	desc := fs.String("desc", "", "description")
	mode := fs.String("mode", "segment", "segment (Leaf's ranges) or snowflake (time-ordered IDs, cluster.snowflake_* layout)")
	pos, err := positional(fs, args, "TAG")
	if err != nil {
		return err
	}
	name := pos[0]
	if err := tagArg(name); err != nil {
		return err
	}
	if err := e.load(); err != nil {
		return err
	}
	if *mode != "segment" && *mode != persist.ModeSnowflake {
		return fmt.Errorf("--mode %q: want segment or snowflake", *mode)
	}
	if *mode == persist.ModeSnowflake && fs.Changed("step") {
		return errors.New("--step applies to segment tags only, not to --mode snowflake")
	}
	if !fs.Changed("step") {
		*step = e.cfg.Segment.DefaultStep
	}
	if *step < 1 || *step > persist.MaxStep {
		return fmt.Errorf("--step %d: must be between 1 and %d", *step, persist.MaxStep)
	}
	s, err := e.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if *mode == persist.ModeSnowflake {
		return createSnowflake(ctx, e, s, name, *step, *desc)
	}
	created, err := s.Create(ctx, name, *step, *desc)
	if err != nil {
		return err
	}
	if !created {
		return fmt.Errorf("tag %q already exists (leaf tags list shows it)", name)
	}
	fmt.Fprintf(e.stdout, "created %s: step %d, first ID 1\n", name, *step)
	return nil
}

// createSnowflake creates a Snowflake tag with the configuration's layout.
func createSnowflake(ctx context.Context, e *env, s persist.Backend, name string, step int64, desc string) error {
	layout, err := configured.Layout(e.cfg.Cluster, time.Now())
	if err != nil {
		return err
	}
	reg, ok := s.(persist.Registry)
	if !ok {
		return errors.New("this store keeps no cluster registry: Snowflake tags need one")
	}
	created, err := reg.CreateTag(ctx, persist.Tag{Name: name, Step: step, Description: desc, Mode: persist.ModeSnowflake, Layout: layout.String()})
	if errors.Is(err, persist.ErrNoCluster) {
		return fmt.Errorf("Snowflake tags need the cluster tables (store.create_schema: true creates them): %w", err)
	}
	if err != nil {
		return err
	}
	if !created {
		return fmt.Errorf("tag %q already exists (leaf tags list shows it)", name)
	}
	fmt.Fprintf(e.stdout, "created %s: Snowflake IDs, layout %s\n", name, layout)
	return nil
}

// tagsFloor: leaf tags floor TAG N, as LEAF.FLOOR: max_id becomes at least
// N+1, never lower; a missing tag is created with segment.default_step.
func tagsFloor(ctx context.Context, e *env, args []string) error {
	name, n, err := tagAndNumber("floor", args, 0, maxFloor)
	if err != nil {
		return err
	}
	if err := e.load(); err != nil {
		return err
	}
	s, err := e.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := raiseFloor(ctx, s, name, n, e.cfg.Segment.DefaultStep, "")
	if err != nil {
		return err
	}
	switch {
	case res.created:
		fmt.Fprintf(e.stdout, "created %s with floor %d: max_id %d, every later ID is above %d\n", name, n, res.row.MaxID, n)
	case res.moved:
		fmt.Fprintf(e.stdout, "raised %s to floor %d: max_id %d, every later ID is above %d\n", name, n, res.row.MaxID, n)
	default:
		fmt.Fprintf(e.stdout, "%s already above %d: max_id %d, nothing changed\n", name, n, res.row.MaxID)
	}
	if res.moved && !res.created {
		return confirm(ctx, e, s, fmt.Sprintf("floor %d of %s", n, name), persist.Change{Kind: persist.ChangeFloor, Tag: name, Value: n})
	}
	return nil
}

// confirm announces changes made in the store to the running servers, as
// LEAF.FLOOR and LEAF.STEP do, and waits until every live one confirmed
// (cluster.ack_timeout); what names them for the error. Without the
// cluster registry it says what the servers will do instead.
func confirm(ctx context.Context, e *env, s persist.Backend, what string, changes ...persist.Change) error {
	reg, ok := s.(persist.Registry)
	if !ok {
		return nil
	}
	n, err := cluster.Announce(ctx, reg, changes, e.cfg.Cluster.AckTimeout, e.cfg.Cluster.Heartbeat/10)
	switch {
	case errors.Is(err, persist.ErrNoCluster):
		fmt.Fprintln(e.stderr, "note: without the cluster tables, running leaf servers first hand out the IDs they have cached "+
			"(at most two segments each); LEAF.FLOOR through each server, or a restart, skips them at once")
		return nil
	case err != nil:
		return fmt.Errorf("%s is set in the store, but %w", what, err)
	}
	if n > 0 {
		fmt.Fprintf(e.stdout, "confirmed by %s\n", plural(n, "the running server", "the %d running servers"))
	}
	return nil
}

// tagsStep: leaf tags step TAG N.
func tagsStep(ctx context.Context, e *env, args []string) error {
	name, step, err := tagAndNumber("step", args, 1, persist.MaxStep)
	if err != nil {
		return err
	}
	if err := e.load(); err != nil {
		return err
	}
	s, err := e.openStore(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := segmentOnly(ctx, s, name, "a step"); err != nil {
		return err
	}
	if err := s.SetStep(ctx, name, step); err != nil {
		if errors.Is(err, persist.ErrNotFound) {
			return fmt.Errorf("unknown tag %q (create it with leaf tags create)", name)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "%s: step %d (servers use it from their next segment)\n", name, step)
	return confirm(ctx, e, s, fmt.Sprintf("step %d of %s", step, name), persist.Change{Kind: persist.ChangeStep, Tag: name, Value: step})
}

// floorResult is what raiseFloor did.
type floorResult struct {
	row     persist.Tag // the row afterwards
	created bool        // the tag had no row
	moved   bool        // max_id was raised
}

// raiseFloor makes every later ID of the tag greater than n, creating the
// tag with step and desc when it has no row, as Allocator.Floor does.
// A Snowflake tag is refused, as LEAF.FLOOR and SET refuse it: it has no
// max_id that its IDs come from.
func raiseFloor(ctx context.Context, s persist.Backend, name string, n, step int64, desc string) (floorResult, error) {
	if err := segmentOnly(ctx, s, name, "a floor"); err != nil {
		return floorResult{}, err
	}
	row, moved, err := s.RaiseFloor(ctx, name, n)
	if !errors.Is(err, persist.ErrNotFound) {
		return floorResult{row: row, moved: moved}, err
	}
	created, err := s.Create(ctx, name, step, desc)
	if err != nil {
		return floorResult{}, err
	}
	row, moved, err = s.RaiseFloor(ctx, name, n)
	return floorResult{row: row, created: created, moved: moved || created}, err
}

// segmentOnly refuses what (a floor, a step) on a tag of another mode with
// the words of the Redis commands; a missing tag passes.
func segmentOnly(ctx context.Context, s persist.Backend, name, what string) error {
	row, err := s.Tag(ctx, name)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		return nil
	case err != nil:
		return err
	case row.Mode != "":
		return segment.ModeError(name, row.Mode, what)
	}
	return nil
}

// plural is one when n is 1, else many with n in it.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}
