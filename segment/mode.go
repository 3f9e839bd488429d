package segment

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/persist"
)

// Tags in other modes than Leaf's segments (Snowflake): the generators
// that make their IDs, and their creation. newTagOf (tag.go) makes the tag
// of a row in the row's mode.

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
