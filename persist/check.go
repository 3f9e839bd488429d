package persist

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Limits of Leaf's columns. Every backend checks them in Go, with the
// functions below, so that a tag accepted by one database is accepted by
// all and nothing is ever truncated or rounded by a database. Lengths
// count characters, as VARCHAR does; the allocator's own limit on tag
// names (segment.MaxTagLen) counts bytes, and is the stricter of the two.
const (
	// MaxTagLen is the most characters a tag may have (VARCHAR(128)).
	MaxTagLen = 128
	// MaxDescriptionLen is the most characters a description may have
	// (VARCHAR(256)).
	MaxDescriptionLen = 256
	// MaxStep is the largest step the table can hold (INT).
	MaxStep = math.MaxInt32
)

// CheckTag returns nil for a tag every backend stores byte-exact and tells
// apart, else an error wrapping ErrInvalid: non-empty valid UTF-8 of at most
// MaxTagLen characters, without NUL (PostgreSQL's text cannot hold it), not
// ending in a space (MySQL's PAD SPACE collations compare "a" and "a " as
// equal).
func CheckTag(tag string) error {
	switch {
	case tag == "":
		return fmt.Errorf("%w: empty tag", ErrInvalid)
	case !utf8.ValidString(tag):
		return fmt.Errorf("%w: tag is not valid UTF-8", ErrInvalid)
	case strings.IndexByte(tag, 0) >= 0:
		return fmt.Errorf("%w: tag holds a NUL byte", ErrInvalid)
	case utf8.RuneCountInString(tag) > MaxTagLen:
		return fmt.Errorf("%w: tag longer than %d characters", ErrInvalid, MaxTagLen)
	case strings.HasSuffix(tag, " "):
		return fmt.Errorf("%w: tag ends with a space", ErrInvalid)
	}
	return nil
}

// CheckStep returns nil for a step in [1, MaxStep], else an error wrapping
// ErrInvalid.
func CheckStep(step int64) error {
	if step < 1 || step > MaxStep {
		return fmt.Errorf("%w: step %d not in [1, %d]", ErrInvalid, step, MaxStep)
	}
	return nil
}

// CheckDescription returns nil for valid UTF-8 of at most
// MaxDescriptionLen characters without NUL, else an error wrapping
// ErrInvalid.
func CheckDescription(d string) error {
	if !utf8.ValidString(d) {
		return fmt.Errorf("%w: description is not valid UTF-8", ErrInvalid)
	}
	if strings.IndexByte(d, 0) >= 0 {
		return fmt.Errorf("%w: description holds a NUL byte", ErrInvalid)
	}
	if utf8.RuneCountInString(d) > MaxDescriptionLen {
		return fmt.Errorf("%w: description longer than %d characters", ErrInvalid, MaxDescriptionLen)
	}
	return nil
}
