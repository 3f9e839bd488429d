package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// leafCLI runs the binary with args in dir and returns stdout, stderr and
// the exit code.
func leafCLI(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(leafBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), goraceEnv()}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run leaf %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// TestCLIBinary: main hands `leaf tags ...` to the subcommands: exit 0 on
// success and on --help, 1 with "leaf: ..." on stderr on an error, which
// never shows a password. The subcommands use the server's default store
// (data/leaf.db in the working directory), and a server started there
// continues above a floor the CLI raised.
func TestCLIBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name       string
		args       []string
		code       int
		stdout     string // prefix
		stderr     string // prefix
		notContain string
	}{
		{"create", []string{"tags", "create", "order", "--step=100"}, 0, "created order: step 100, first ID 1\n", "", ""},
		{"floor", []string{"tags", "floor", "order", "5000"}, 0, "raised order to floor 5000: max_id 5001", "", "note:"},
		{"list", []string{"tags", "list"}, 0, "TAG    MODE     MAX_ID  STEP  DESCRIPTION  UPDATE_TIME\norder  segment  5001    100", "", ""},
		{"help", []string{"tags", "--help"}, 0, "Usage:\n  leaf tags list", "", ""},
		{"error", []string{"tags", "create", "order"}, 1, "", "leaf: tags: tag \"order\" already exists", ""},
		{"bad dsn", []string{"tags", "list", "--store.driver=mysql", "--store.dsn=leaf:hunter2@tcp(127.0.0.1:1)/leaf"}, 1, "",
			"leaf: tags: store.driver=mysql store.dsn=leaf:REDACTED@tcp(127.0.0.1:1)/leaf: persist: open mysql:", "hunter2"},
		{"server flags still work", []string{"--help"}, 0, "Usage: leaf [flags]", "", ""},
		// leaf's error first, with no line of go-redis's own before it.
		{"health unreachable", []string{"health", "--server.addr=127.0.0.1:1", "--timeout=5s"}, 1, "", "leaf: health: PING 127.0.0.1:1: ", "pool.go"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := leafCLI(t, dir, tc.args...)
			if code != tc.code || !strings.HasPrefix(out, tc.stdout) || !strings.HasPrefix(errOut, tc.stderr) {
				t.Fatalf("leaf %v: exit %d, want %d\nstdout %q\nwant prefix %q\nstderr %q\nwant prefix %q",
					tc.args, code, tc.code, out, tc.stdout, errOut, tc.stderr)
			}
			if tc.notContain != "" && strings.Contains(out+errOut, tc.notContain) {
				t.Fatalf("output shows %q:\n%s%s", tc.notContain, out, errOut)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "leaf.db")); err != nil {
		t.Fatalf("the default store: %v", err)
	}
	p := startLeaf(t, dir)
	if id := redistest.Incr(t, p.client(t), "order"); id != 5001 {
		t.Fatalf("INCR order after leaf tags floor order 5000 = %d, want 5001", id)
	}
	p.Stop(syscall.SIGTERM)
}

// TestAdminPasswordProcess: server.admin_password reaches the server.
func TestAdminPasswordProcess(t *testing.T) {
	t.Parallel()
	p := startLeaf(t, t.TempDir(), "LEAF_SERVER_ADMIN_PASSWORD=adm1n")
	ctx := context.Background()
	c := p.client(t)
	want := "NOPERM User default has no permissions to run the 'leaf.floor' command (administrative: AUTH admin <password> first)"
	if err := c.Do(ctx, "LEAF.FLOOR", "order", "100").Err(); err == nil || err.Error() != want {
		t.Fatalf("LEAF.FLOOR as default: %v, want %q", err, want)
	}
	admin := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, Username: "admin", Password: "adm1n", PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { admin.Close() })
	if v, err := admin.Do(ctx, "LEAF.FLOOR", "order", "100").Int64(); err != nil || v != 100 {
		t.Fatalf("LEAF.FLOOR as admin = %d, %v; want 100", v, err)
	}
	if id := redistest.Incr(t, c, "order"); id != 101 {
		t.Fatalf("INCR after LEAF.FLOOR 100 = %d, want 101", id)
	}
	p.Stop(syscall.SIGTERM)
}
