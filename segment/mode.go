package segment

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// Tags in other modes than Leaf's segments, and what the cluster registry
// asks of the allocator: to stop serving cached IDs while it cannot vouch
// for them (Hold), and to apply the changes other servers made (SkipTo,
// ApplyStep, DropCached).

// ErrMode: the tag's mode does not allow the call (a floor on a Snowflake
// tag), or this server cannot serve the tag's mode.
var ErrMode = errors.New("not in this tag's mode")

// Generator makes the IDs of a tag in a mode other than segments (a
// Snowflake tag), with no store call per ID.
type Generator interface {
	// NextN makes n consecutive IDs and returns the last.
	NextN(ctx context.Context, n int64) (int64, error)
	// TryNextN is NextN when it can answer without waiting; false, with
	// nothing taken, otherwise.
	TryNextN(n int64) (int64, bool)
}

// Modes makes the generators of tags in other modes (Options.Modes).
type Modes interface {
	// Generator returns the generator of a tag created with mode and
	// layout, or why this server cannot serve it (the tag's requests
	// answer that error).
	Generator(mode, layout string) (Generator, error)
	// Layout is what a new tag of mode records with its row.
	Layout(mode string) (string, error)
}

// failing is the generator of a tag this server cannot serve.
type failing struct{ err error }

func (f failing) NextN(context.Context, int64) (int64, error) { return 0, f.err }
func (f failing) TryNextN(int64) (int64, bool)                { return 0, false }

// newTagOf makes the tag of a row, in the row's mode.
func (a *Allocator) newTagOf(row persist.Tag) *Tag {
	t := a.newTag(row.Name)
	if row.Mode == "" {
		return t
	}
	t.mode = row.Mode
	if a.opts.Modes == nil {
		t.gen = failing{fmt.Errorf("%w: tag %q is a %s tag and this server serves segment tags only (cluster features are off)",
			ErrMode, row.Name, row.Mode)}
		return t
	}
	g, err := a.opts.Modes.Generator(row.Mode, row.Layout)
	if err != nil {
		g = failing{fmt.Errorf("tag %q: %w", row.Name, err)}
	}
	t.gen = g
	return t
}

// Mode is the tag's mode: "" for segments, persist.ModeSnowflake.
func (t *Tag) Mode() string { return t.mode }

// CreateMode creates a tag in mode (persist.ModeSnowflake) with the layout
// Options.Modes gives it. ErrExists when the tag exists; ErrNotSupported
// when the store has no cluster registry.
func (a *Allocator) CreateMode(ctx context.Context, name, mode, desc string) error {
	if err := validTag(name); err != nil {
		return err
	}
	reg, ok := a.store.(persist.Registry)
	if !ok || a.opts.Modes == nil {
		return fmt.Errorf("%w: %s tags need the cluster registry", ErrNotSupported, mode)
	}
	if a.tags.get(name) != nil {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	layout, err := a.opts.Modes.Layout(mode)
	if err != nil {
		return err
	}
	release, err := a.reserveTag(name)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	row := persist.Tag{Name: name, Step: a.opts.DefaultStep, Description: desc, Mode: mode, Layout: layout}
	created, err := reg.CreateTag(ctx, row)
	if errors.Is(err, persist.ErrNoCluster) {
		return fmt.Errorf("%w: %s tags need the cluster registry: %w", ErrNotSupported, mode, err)
	}
	if err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	if !created {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	a.forgetUnknown(name)
	a.tags.add(a.newTagOf(row))
	a.noteCreated("tag", name, "mode", mode, "layout", layout)
	return nil
}

// SkipTo applies a floor set through another server: this server's cached
// IDs of the tag at or below n are skipped, and ranges at or below it
// refused from now on, including the range of a load already on its way.
// A name not in the map may have its first load on its way (Prepare): the
// floor is applied to it, whose range is then refused and the name looked
// up again. Otherwise there is nothing to do for a name this server does
// not know: it has nothing cached, and its loads start after this call,
// from the store, which holds the floor since before it was published.
func (a *Allocator) SkipTo(name string, n int64) {
	t := a.tags.get(name)
	if t == nil {
		a.mu.Lock()
		if t = a.tags.get(name); t == nil {
			if c := a.pending[name]; c != nil {
				t = c.first
			}
		}
		a.mu.Unlock()
	}
	if t != nil && t.gen == nil {
		t.skipTo(n)
		a.log.Info("tag floor applied", "tag", name, "floor", n)
	}
}

// ApplyStep applies a step changed through another server: the floor of
// the tag's adaptive step, from its next load.
func (a *Allocator) ApplyStep(name string, step int64) {
	if t := a.tags.get(name); t != nil && t.gen == nil {
		t.mu.Lock()
		t.setStepLocked(step)
		t.mu.Unlock()
	}
}

// DropCached skips every ID cached by every segment tag, and refuses the
// ranges of loads in flight: for a server that missed changes it cannot
// read any more (the log moved on, or was emptied), whose floors may be
// anywhere. Later loads come from the store, which holds them all.
func (a *Allocator) DropCached() {
	a.drops.Add(1)
	for _, t := range a.tags.all() {
		if t.gen != nil {
			continue
		}
		t.mu.Lock()
		n := t.high - 1
		t.mu.Unlock()
		if n > 0 {
			t.skipTo(n)
		}
	}
	a.log.Warn("dropped every cached ID: changes made through other servers could not be read")
}

// modeError is the error of a call that only segment tags take.
func (t *Tag) modeError(what string) error {
	return ModeError(t.name, t.mode, what)
}

// ModeError is the ErrMode of a call that only segment tags take, made on
// the tag name of the given mode; what is the thing refused ("a floor").
// The leaf tags subcommands refuse with the same words as the commands.
func ModeError(name, mode, what string) error {
	return fmt.Errorf("%w: tag %q is a %s tag: %s applies to segment tags", ErrMode, name, mode, what)
}
