package e2e

// Process-level test harness: TestMain builds the real binary once, from
// the module's root, and the tests drive it as users do, over real
// sockets, with real signals.
//
// The tests run in parallel (go test's -parallel: make test sets at least
// four), and so do their subtests on each store: every leaf process
// listens on a port of its own, and every test has a store of its own (a
// SQLite file in its temporary directory, a fresh database of the shared
// MariaDB or PostgreSQL, a fresh prefix of the shared etcd cluster, or a
// server of its own that it crashes). Most of what they wait for is time:
// leases and acknowledgements running out, databases restarting. The few
// whose checks lean on a short deadline (a lease of a second or two, a
// node timeout, the shutdown's deadline) are not parallel: they run first,
// one at a time (a test's subtests on different stores side by side). The
// replicated clusters the tests share are held by file locks
// (mysqltest.GaleraLock, lockPatroni).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/redistest"
)

// leafBin is the binary built by TestMain; moduleRoot the directory of
// go.mod, where the binary is built from and the scripts are.
var leafBin, moduleRoot string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds leaf with -race into a temporary directory, runs the
// tests and removes the binary.
func buildAndRun(m *testing.M) int {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		fmt.Fprintln(os.Stderr, "go env GOMOD: no module:", err)
		return 1
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(gomod)))
	dir, err := os.MkdirTemp("", "leaf-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	leafBin = filepath.Join(dir, "leaf")
	build := exec.Command("go", "build", "-race", "-o", leafBin, ".")
	build.Dir = moduleRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building leaf:", err)
		return 1
	}
	return m.Run()
}

// scriptPath is the path of one of the project's scripts (scripts/NAME).
func scriptPath(name string) string { return filepath.Join(moduleRoot, "scripts", name) }

// proc is one running leaf process.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	Addr string
	done chan struct{}
	err  error // exit status, valid after done

	mu  sync.Mutex
	log strings.Builder
}

var servingRe = regexp.MustCompile(`msg=serving addr=(\S+)`)

// startLeaf runs the binary in dir with the given environment (added to a
// minimal one: listen on 127.0.0.1:0, text logs) and waits until it serves.
// The process is killed at cleanup if still running.
func startLeaf(t testing.TB, dir string, env ...string) *proc {
	t.Helper()
	return startCmd(t, leafCmd(dir, env...))
}

// leafCmd is the command startLeaf runs: the binary in dir, with env added
// to a minimal environment (later entries win).
func leafCmd(dir string, env ...string) *exec.Cmd {
	cmd := exec.Command(leafBin)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		goraceEnv(),
		"LEAF_SERVER_ADDR=127.0.0.1:0",
		"LEAF_LOG_FORMAT=text",
		"LEAF_LOG_LEVEL=debug",
	}, env...)
	return cmd
}

// goraceEnv is the GORACE setting of the race-built programs the tests
// run (leaf, testdata/idclient): the race runtime's atexit_sleep_ms,
// 1000 by default, holds every clean exit a second for reports of
// goroutines still running after main returned, and the tests wait for
// hundreds of exits. A race found before the exit is still reported and
// still fails the exit (code 66). The caller's GORACE is kept, and an
// atexit_sleep_ms in it wins.
func goraceEnv() string {
	gorace := os.Getenv("GORACE")
	if !strings.Contains(gorace, "atexit_sleep_ms") {
		gorace = strings.TrimSpace(gorace + " atexit_sleep_ms=0")
	}
	return "GORACE=" + gorace
}

// runLeafToExit runs the binary as startLeaf does and expects it to stop
// by itself (start-up refused), within a generous safety net; it returns
// the exit code and what it wrote to stderr.
func runLeafToExit(t testing.TB, dir string, env ...string) (code int, stderr string) {
	t.Helper()
	cmd := leafCmd(dir, env...)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("leaf did not exit within 60s\n%s", out.String())
	}
	return 0, ""
}

// startCmd starts cmd (leaf, possibly behind a shell) and waits until it
// serves, as startLeaf.
func startCmd(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingRe.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case p.Addr = <-addr:
	case <-p.done:
		t.Fatalf("leaf exited before serving: %v\n%s", p.err, p.Log())
	case <-time.After(60 * time.Second):
		t.Fatalf("leaf did not serve within 60s\n%s", p.Log())
	}
	return p
}

// Log is what the process wrote to stderr so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Stop sends sig and waits for the exit; SIGTERM must exit 0.
func (p *proc) Stop(sig syscall.Signal) {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	<-p.done
	if sig == syscall.SIGTERM && p.err != nil {
		p.t.Fatalf("leaf exited with %v on SIGTERM\n%s", p.err, p.Log())
	}
}

// Pause stops the process (SIGSTOP) and waits until it is stopped: kill
// returns once the signal is queued, and a process on a busy machine may
// still answer a request or two before it is scheduled and stops.
func (p *proc) Pause() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	redistest.WaitFor(p.t, "leaf stopped by SIGSTOP", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
	})
}

// client is a single-connection go-redis client to p, closed at cleanup.
func (p *proc) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(redistest.Options(&redis.Options{Addr: p.Addr, PoolSize: 1, MaxRetries: -1}))
	t.Cleanup(func() { _ = c.Close() })
	return c
}
