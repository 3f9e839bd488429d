package persist

// The checks of Leaf's column limits, for backends that do not run on Core:
// every backend accepts and refuses the same tags, steps and descriptions.

// CheckTag returns nil for a tag every backend stores byte-exact and tells
// apart, else an error wrapping ErrInvalid: non-empty valid UTF-8 of at most
// MaxTagLen characters, without NUL, not ending in a space.
func CheckTag(tag string) error { return checkTag(tag) }

// CheckStep returns nil for a step in [1, MaxStep], else an error wrapping
// ErrInvalid.
func CheckStep(step int64) error { return checkStep(step) }

// CheckDescription returns nil for valid UTF-8 of at most
// MaxDescriptionLen characters without NUL, else an error wrapping
// ErrInvalid.
func CheckDescription(d string) error { return checkDescription(d) }
