package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress shows an import's progress on stderr: on a terminal one line
// redrawn in place (with a bar when the total is known), elsewhere (a log,
// a pipe) a plain line every `every` keys.
type progress struct {
	w     io.Writer
	tty   bool
	every int64
	total int64  // DBSIZE: the keys SCAN will return when the pattern is "*"
	exact bool   // the pattern is "*", so total is the number to expect
	verb  string // "imported", or "would be imported" in a dry run

	drawn time.Time // last redraw on a terminal
	width int       // length of the line drawn last, to blank its rest
}

func newProgress(w io.Writer, every int, total int64, exact, dryRun bool) *progress {
	verb := "imported"
	if dryRun {
		verb = "would be imported"
	}
	return &progress{w: w, tty: isTerminal(w), every: int64(every), total: total, exact: exact, verb: verb}
}

// isTerminal reports whether w is a character device (a terminal), without
// a dependency: os.File's mode says so.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update is called after every key.
func (p *progress) update(s summary) {
	if p.tty {
		// Redraw at most ten times a second: drawing is not free.
		if now := time.Now(); now.Sub(p.drawn) >= 100*time.Millisecond {
			p.drawn = now
			p.draw(s)
		}
		return
	}
	if s.keys%p.every == 0 {
		fmt.Fprintln(p.w, p.line(s))
	}
}

// done draws the final state and ends the terminal's line.
func (p *progress) done(s summary) {
	if p.tty {
		p.draw(s)
		fmt.Fprintln(p.w)
		return
	}
	if s.keys%p.every != 0 || s.keys == 0 {
		fmt.Fprintln(p.w, p.line(s))
	}
}

func (p *progress) draw(s summary) {
	l := p.line(s)
	pad := max(p.width-len(l), 0)
	p.width = len(l)
	fmt.Fprint(p.w, "\r"+l+strings.Repeat(" ", pad))
}

// line is the progress text: "[=====>    ]  52% 5200/10000 keys, 5100
// imported, ..." when the total is known, else the counts alone.
func (p *progress) line(s summary) string {
	counts := fmt.Sprintf("%d keys: %d %s, %d already above, %d skipped, %d invalid",
		s.keys, s.imported, p.verb, s.above, s.nonInt+s.nonString+s.vanished, s.invalid)
	if !p.exact || p.total <= 0 {
		return "progress: " + counts
	}
	const width = 30
	frac := min(float64(s.keys)/float64(p.total), 1)
	n := int(frac * width)
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	return fmt.Sprintf("[%s] %3.0f%% of %d, %s", bar, frac*100, p.total, counts)
}
