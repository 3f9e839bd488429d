package e2e

// The documents tested as a reader uses them: the README's sample session
// is run against a real server and must print what the README shows, the
// Commands table lists the fields LEAF.INFO answers, and every link
// between the documents leads somewhere.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// sessionStep is one command of a README session and the lines it
// prints: `redis-cli -p 6380 ...` against the block's server, or
// `bin/leaf ...` on the block's store.
type sessionStep struct {
	line string   // as written, "$ redis-cli -p 6380 INCR order  # ..."
	leaf bool     // bin/leaf, not redis-cli
	args []string // after `redis-cli -p 6380` or `bin/leaf`
	want []string
}

// readmeSessions reads the console blocks between <!-- session --> and
// <!-- /session --> in the README, in order: each runs on a store of its
// own.
func readmeSessions(t *testing.T, readme string) [][]sessionStep {
	t.Helper()
	var blocks [][]sessionStep
	rest := readme
	for {
		i := strings.Index(rest, "<!-- session -->")
		if i < 0 {
			break
		}
		rest = rest[i+len("<!-- session -->"):]
		j := strings.Index(rest, "<!-- /session -->")
		if j < 0 {
			t.Fatal("README.md: <!-- session --> without <!-- /session -->")
		}
		block := rest[:j]
		rest = rest[j:]
		var steps []sessionStep
		in := false
		for _, l := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(l, "```console"):
				in = true
			case strings.HasPrefix(l, "```"):
				in = false
			case !in:
			case strings.HasPrefix(l, "$ "):
				steps = append(steps, sessionCommand(t, l))
			case len(steps) == 0:
				t.Fatalf("README.md session: output before any command: %q", l)
			default:
				steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
			}
		}
		if len(steps) == 0 {
			t.Fatal("README.md: a <!-- session --> block without a console block")
		}
		blocks = append(blocks, steps)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no <!-- session --> block")
	}
	return blocks
}

// sessionCommand parses "$ redis-cli -p 6380 ARGS...   # comment" or
// "$ bin/leaf ARGS...": words, or quoted with "..." (no escapes).
func sessionCommand(t *testing.T, line string) sessionStep {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	text := strings.TrimPrefix(line, "$ ")
scan:
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"':
			quoted, inWord = !quoted, true
		case quoted:
			cur.WriteByte(c)
		case c == '#' && !inWord:
			break scan
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'' || c == '\\':
			t.Fatalf("README.md session: %q: the test reads plain words and \"...\" only", line)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("README.md session: %q: unterminated quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	switch {
	case len(words) >= 2 && words[0] == "bin/leaf":
		return sessionStep{line: line, leaf: true, args: words[1:]}
	case len(words) >= 4 && words[0] == "redis-cli" && words[1] == "-p" && words[2] == "6380":
		return sessionStep{line: line, args: words[3:]}
	}
	t.Fatalf("README.md session: %q is neither `redis-cli -p 6380 COMMAND ...` nor `bin/leaf ...`", line)
	return sessionStep{}
}

// varyingFields are the LEAF.INFO fields whose values no two runs share:
// a time, and the runway at the rate measured so far.
var varyingFields = []string{`"last_load"`, `"runway_seconds"`}

// itemRe is one element of an array as redis-cli prints it: " 7) value".
var itemRe = regexp.MustCompile(`^(\s*\d+\) )(.*)$`)

// timeRe is a time as leaf tags prints it (UPDATE_TIME).
var timeRe = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// normalise replaces the values of varyingFields, and times, by
// placeholders.
func normalise(lines []string) []string {
	out := append([]string(nil), lines...)
	for i := range out {
		out[i] = timeRe.ReplaceAllString(out[i], "<time>")
	}
	for i := 0; i+1 < len(out); i++ {
		m := itemRe.FindStringSubmatch(out[i])
		if m == nil {
			continue
		}
		for _, f := range varyingFields {
			if m[2] == f {
				if v := itemRe.FindStringSubmatch(out[i+1]); v != nil {
					out[i+1] = v[1] + "<varies>"
				}
			}
		}
	}
	return out
}

// TestReadmeSession runs the README's sample sessions, each on a fresh
// SQLite file in data/ as `make run` makes it: redis-cli against leaf
// started with its defaults (at the block's first redis-cli), bin/leaf on
// the same store. It fails on any line that differs but the varying ones.
func TestReadmeSession(t *testing.T) {
	t.Parallel()
	cli := needTool(t, "redis-cli", "redis-tools")
	readme, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var p *proc // the first block's server, for LEAF.INFO's fields below
	for _, steps := range readmeSessions(t, string(readme)) {
		dir := t.TempDir()
		var port string
		for _, s := range steps {
			// Bounded only so that a hang fails instead of stalling the run.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			var cmd *exec.Cmd
			if s.leaf {
				cmd = exec.CommandContext(ctx, leafBin, s.args...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), goraceEnv()}
			} else {
				if port == "" {
					srv := startLeaf(t, dir)
					if p == nil {
						p = srv
					}
					var ok bool
					if _, port, ok = strings.Cut(srv.Addr, ":"); !ok {
						t.Fatalf("address %q", srv.Addr)
					}
				}
				// --no-raw: the output redis-cli prints on a terminal, as shown.
				cmd = exec.CommandContext(ctx, cli, append([]string{"--no-raw", "-h", "127.0.0.1", "-p", port}, s.args...)...)
			}
			cmd.Dir = dir
			var stdout, stderr strings.Builder
			cmd.Stdout = &stdout
			cmd.Stderr = &stderr
			if !s.leaf {
				cmd.Stderr = &stdout // redis-cli's errors are part of what it shows
			}
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Fatalf("%s: %v\n%s%s", s.line, err, stdout.String(), stderr.String())
			}
			got := normalise(strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n"))
			want := normalise(s.want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("README.md session, %s\n got:\n%s\n README.md shows:\n%s",
					s.line, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
	if p == nil {
		t.Fatal("README.md's sessions run no redis-cli")
	}

	// The Commands table names LEAF.INFO's fields in the order they come.
	row := tableRow(t, string(readme), "| `LEAF.INFO tag` |")
	_, row, _ = strings.Cut(row, "in this order:")
	row, _, _ = strings.Cut(row, "; integers")
	listed := regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(row, -1)
	var doc []string
	for _, m := range listed {
		if m[1] == "segment" || m[1] == "snowflake" { // mode's values
			continue
		}
		doc = append(doc, m[1])
	}
	// RESP2: the pairs in the order leaf writes them (RESP3's map has none).
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, Protocol: 2}))
	defer c.Close()
	info, err := c.Do(context.Background(), "LEAF.INFO", "order").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for i := 0; i < len(info); i += 2 {
		name, _ := info[i].(string)
		fields = append(fields, name)
	}
	if strings.Join(doc, " ") != strings.Join(fields, " ") {
		t.Errorf("README.md's Commands table lists LEAF.INFO's fields as\n %s\nleaf answers\n %s",
			strings.Join(doc, " "), strings.Join(fields, " "))
	}
}

// tableRow is the README's table row that starts with prefix.
func tableRow(t *testing.T, readme, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("README.md has no table row %q", prefix)
	return ""
}

// linkRe is a Markdown link's target; headingRe a heading.
var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fenceRe   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors are the link targets of a Markdown file's headings, as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens.
func anchors(text string) map[string]bool {
	text = fenceRe.ReplaceAllString(text, "")
	out := map[string]bool{}
	for _, m := range headingRe.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestDocLinks: every link between the project's documents names a file
// that exists and, with #, a heading in it; moving a section cannot leave
// a link behind.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"README.md", "CHANGELOG.md"}, docs...)
	headings := map[string]map[string]bool{} // by file, read once
	for _, f := range files {
		path := f
		if !filepath.IsAbs(path) {
			path = filepath.Join(moduleRoot, f)
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		t.Run(rel, func(t *testing.T) {
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range linkRe.FindAllStringSubmatch(string(text), -1) {
				link := m[1]
				if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
					continue
				}
				target, anchor, _ := strings.Cut(link, "#")
				tpath := path
				if target != "" {
					tpath = filepath.Join(filepath.Dir(path), target)
				}
				if _, err := os.Stat(tpath); err != nil {
					t.Errorf("link %s: %v", link, err)
					continue
				}
				if anchor == "" {
					continue
				}
				if headings[tpath] == nil {
					body, err := os.ReadFile(tpath)
					if err != nil {
						t.Errorf("link %s: %v", link, err)
						continue
					}
					headings[tpath] = anchors(string(body))
				}
				if !headings[tpath][anchor] {
					t.Errorf("link %s: no heading #%s in %s", link, anchor, filepath.Base(tpath))
				}
			}
		})
	}
}
