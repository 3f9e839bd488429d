package segment

import (
	"slices"
	"strings"
)

// Reading many tags with bounded memory: the status page, /cache and the
// metrics read tags a page or one at a time, so that what a request holds
// does not grow with the tag count beyond a slice of pointers (Tags copies
// every tag's state at once: about 300 bytes a tag).

// EachTag calls fn with the state of every known tag until it returns
// false, sorted by name when sorted is set (else in no order). It holds no
// lock between calls.
func (a *Allocator) EachTag(sorted bool, fn func(TagInfo) bool) {
	tags := a.tags.all()
	if sorted {
		slices.SortFunc(tags, func(x, y *Tag) int { return strings.Compare(x.name, y.name) })
	}
	for _, t := range tags {
		if !fn(t.Info()) {
			return
		}
	}
}

// TagPage returns the state of the tags whose name contains q, sorted by
// name, from the offset-th (0-based) on, at most n of them, and how many
// tags match in all.
func (a *Allocator) TagPage(q string, offset, n int) (page []TagInfo, matching int) {
	tags := a.tags.all()
	match := tags[:0]
	for _, t := range tags {
		if strings.Contains(t.name, q) {
			match = append(match, t)
		}
	}
	slices.SortFunc(match, func(x, y *Tag) int { return strings.Compare(x.name, y.name) })
	if offset < 0 {
		offset = 0
	}
	end := min(offset+max(n, 0), len(match))
	for _, t := range match[min(offset, len(match)):end] {
		page = append(page, t.Info())
	}
	return page, len(match)
}
