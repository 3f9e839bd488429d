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

// sessionStep is one command of the README's session and the lines
// redis-cli prints for it.
type sessionStep struct {
	line string   // as written, "$ redis-cli -p 6380 INCR order  # ..."
	args []string // redis-cli's arguments after -p PORT
	want []string
}

// readmeSession reads the console blocks between <!-- session --> and
// <!-- /session --> in the README, in order.
func readmeSession(t *testing.T, readme string) []sessionStep {
	t.Helper()
	var steps []sessionStep
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
		in := false
		for _, l := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(l, "```console"):
				in = true
			case strings.HasPrefix(l, "```"):
				in = false
			case !in:
			case strings.HasPrefix(l, "$ "):
				steps = append(steps, sessionStep{line: l, args: sessionArgs(t, l)})
			case len(steps) == 0:
				t.Fatalf("README.md session: output before any command: %q", l)
			default:
				steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
			}
		}
	}
	if len(steps) == 0 {
		t.Fatal("README.md has no <!-- session --> block")
	}
	return steps
}

// sessionArgs parses "$ redis-cli -p 6380 ARGS...   # comment": the
// arguments are plain words (the session quotes nothing).
func sessionArgs(t *testing.T, line string) []string {
	t.Helper()
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(strings.TrimPrefix(line, "$ "))
	if len(f) < 4 || f[0] != "redis-cli" || f[1] != "-p" || f[2] != "6380" {
		t.Fatalf("README.md session: %q is not `redis-cli -p 6380 COMMAND ...`", line)
	}
	for _, a := range f[3:] {
		if strings.ContainsAny(a, `"'\`) {
			t.Fatalf("README.md session: %q quotes an argument; the test splits on spaces only", line)
		}
	}
	return f[3:]
}

// varyingFields are the LEAF.INFO fields whose values no two runs share:
// a time, and the runway at the rate measured so far.
var varyingFields = []string{`"last_load"`, `"runway_seconds"`}

// itemRe is one element of an array as redis-cli prints it: " 7) value".
var itemRe = regexp.MustCompile(`^(\s*\d+\) )(.*)$`)

// normalise replaces the values of varyingFields by a placeholder.
func normalise(lines []string) []string {
	out := append([]string(nil), lines...)
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

// TestReadmeSession runs the README's sample session with redis-cli
// against leaf as `make run` starts it (its defaults, a fresh SQLite file
// in data/) and fails on any line that differs but the varying ones.
func TestReadmeSession(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	readme, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := readmeSession(t, string(readme))
	p := startLeaf(t, t.TempDir())
	_, port, ok := strings.Cut(p.Addr, ":")
	if !ok {
		t.Fatalf("address %q", p.Addr)
	}
	for _, s := range steps {
		// Bounded only so that a hang fails instead of stalling the run.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		// --no-raw: the output redis-cli prints on a terminal, as shown.
		cmd := exec.CommandContext(ctx, cli, append([]string{"--no-raw", "-h", "127.0.0.1", "-p", port}, s.args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.line, err, out)
		}
		got := normalise(strings.Split(strings.TrimRight(string(out), "\n"), "\n"))
		want := normalise(s.want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("README.md session, %s\n got:\n%s\n README.md shows:\n%s",
				s.line, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
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
	docs, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"README.md", "CHANGELOG.md"}, docs...)
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
				body, err := os.ReadFile(tpath)
				if err != nil {
					if _, serr := os.Stat(tpath); serr == nil { // a directory
						continue
					}
					t.Errorf("link %s: %v", link, err)
					continue
				}
				if anchor != "" && !anchors(string(body))[anchor] {
					t.Errorf("link %s: no heading #%s in %s", link, anchor, target)
				}
			}
		})
	}
}
