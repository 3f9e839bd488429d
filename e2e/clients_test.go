package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/redistest"
)

// The counter idioms through the Redis clients of other languages, as
// their users write them (testdata/clients/): MULTI; INCR; EXPIRE; EXEC
// twice, the "INCR, and EXPIRE if it is 1" script by each client's script
// API, SET n NX then INCR, SCAN over 1,000 tags, SELECT 1, and (but
// phpredis) a transaction that EXECABORT refuses, after which INCR shows
// that it took no ID. Each runs
// against leaf and against redis-server; the results are the same but
// where leaf documents its answer: EXPIRE answers 0 and TTL -1, as tags
// never expire.

// langClient is one client library and how to run its script.
type langClient struct {
	name   string
	cmd    []string // the interpreter and the script, before HOST PORT
	probe  []string // succeeds when the library is installed
	env    []string
	needed string // what installs it
	skips  string // a line of redisIdioms its script cannot print
}

func langClients() []langClient {
	nodeModules := os.Getenv("LEAF_TEST_NODE_MODULES")
	nodeEnv := []string{"NODE_PATH=" + nodeModules}
	script := func(name string) string { return filepath.Join(moduleRoot, "e2e", "testdata", "clients", name) }
	return []langClient{
		{"redis-py", []string{"/usr/bin/python3", script("client.py")}, []string{"/usr/bin/python3", "-c", "import redis"}, nil,
			"the Debian package python3-redis", ""},
		{"ioredis", []string{"node", script("client_ioredis.js")}, []string{"node", "-e", "require('ioredis')"}, nodeEnv,
			"npm's ioredis in LEAF_TEST_NODE_MODULES (scripts/test.sh)", ""},
		{"node-redis", []string{"node", script("client_node_redis.js")}, []string{"node", "-e", "require('redis')"}, nodeEnv,
			"npm's redis in LEAF_TEST_NODE_MODULES (scripts/test.sh)", ""},
		{"ruby-redis", []string{"ruby", script("client.rb")}, []string{"ruby", "-e", "require 'redis'"}, nil,
			"the Debian package ruby-redis", ""},
		{"phpredis", []string{"php", script("client.php")}, []string{"php", "-r", "exit(class_exists('Redis') ? 0 : 1);"}, nil,
			"the Debian packages php-cli and php-redis", "abort=refused,1"},
		{"perl-redis", []string{"perl", script("client.pl")}, []string{"perl", "-MRedis", "-e", "1"}, nil,
			"the Debian package libredis-perl", ""},
	}
}

// What every script prints against redis-server, and what leaf answers
// differently.
var (
	redisIdioms = []string{"tx1=1,1", "tx2=2,1",
		"abort=refused,1", // a transaction with an unknown command: EXECABORT; it took no ID
		"lua1=1", "lua2=2", "lua_ttl=positive",
		"nx=OK,nil,1001", "scan=1000", "select=1,2,1"}
	leafDiffers = map[string]string{
		"tx1=1,1":          "tx1=1,0", // EXPIRE answers 0: tags never expire
		"tx2=2,1":          "tx2=2,0",
		"lua_ttl=positive": "lua_ttl=-1", // TTL -1: no expiry
	}
)

func TestOtherLanguageClients(t *testing.T) {
	t.Parallel()
	for _, lc := range langClients() {
		t.Run(lc.name, func(t *testing.T) {
			t.Parallel() // a leaf and a redis-server of its own
			if err := clientCmd(context.Background(), lc.env, lc.probe...).Run(); err != nil {
				how := lc.name + " is not installed: install " + lc.needed
				if os.Getenv("CI") == "true" {
					t.Fatal(how)
				}
				t.Skip(how)
			}
			// The first touches of 1,000 tags wait on SQLite's writes: on
			// a busy machine they may take longer than the 2 s default.
			leaf := startLeaf(t, t.TempDir(), "LEAF_SEGMENT_LOAD_TIMEOUT=1m")
			raddr := redistest.Start(t)
			var wantRedis, want []string
			for _, line := range redisIdioms {
				if line == lc.skips {
					continue
				}
				wantRedis = append(wantRedis, line)
				if d, ok := leafDiffers[line]; ok {
					line = d
				}
				want = append(want, line)
			}
			if got := runClient(t, lc, raddr); got != strings.Join(wantRedis, "\n") {
				t.Fatalf("%s against redis-server:\n%s\nwant\n%s", lc.name, got, strings.Join(wantRedis, "\n"))
			}
			if got := runClient(t, lc, leaf.Addr); got != strings.Join(want, "\n") {
				t.Fatalf("%s against leaf:\n%s\nwant\n%s\nleaf's log:\n%s", lc.name, got, strings.Join(want, "\n"), leaf.Log())
			}
		})
	}
}

// runClient runs a client's script against addr and returns what it
// printed.
func runClient(t *testing.T, lc langClient, addr string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	// A safety net against a hung client, not an assertion on time.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append([]string{}, lc.cmd...), host, port)
	cmd := clientCmd(ctx, lc.env, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s against %s: %v\n%s%s", lc.name, addr, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func clientCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
