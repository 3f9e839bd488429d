package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

var versionRe = regexp.MustCompile(`^leaf (\S+) revision (\S+)( \(modified\))? (go\S+) \S+/\S+\n$`)

// TestVersion: leaf --version, -v and leaf version print one line with the
// version, the revision and the Go version, and exit 0; --help names
// them; a running server reports the same version in INFO and
// LEAF.NODES.
func TestVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var line string
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}, {"--server.addr=127.0.0.1:1", "--version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := leafCLI(t, dir, args...)
			if code != 0 || stderr != "" || !versionRe.MatchString(stdout) {
				t.Fatalf("leaf %v: exit %d, stdout %q, stderr %q; want exit 0 and one line matching %s", args, code, stdout, stderr, versionRe)
			}
			if line != "" && stdout != line {
				t.Errorf("leaf %v = %q, want %q as the others", args, stdout, line)
			}
			line = stdout
		})
	}
	if line == "" {
		t.FailNow()
	}
	m := versionRe.FindStringSubmatch(line)
	version, revision := m[1], m[2]

	t.Run("help", func(t *testing.T) {
		stdout, _, code := leafCLI(t, dir, "--help")
		for _, want := range []string{"leaf --version", "leaf version", "leaf health", "leaf tags list|create", "leaf import redis"} {
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("leaf --help: exit %d, lacks %q:\n%s", code, want, stdout)
			}
		}
	})

	t.Run("server", func(t *testing.T) {
		p := startLeaf(t, dir)
		c := p.client(t)
		info, err := c.Info(context.Background(), "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		sha := revision
		if sha == "unknown" {
			sha = "00000000"
		}
		for _, want := range []string{"\r\nleaf_version:" + version + "\r\n", "\r\nleaf_git_sha1:" + sha + "\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO server lacks %q:\n%s", want, info)
			}
		}
		self := liveNodes(t, c)[p.Addr]
		if v, _ := self["version"].(string); !strings.HasPrefix(v, version) {
			t.Errorf("LEAF.NODES: this server's version %q, want %q or it with the revision", v, version)
		}
	})
}
