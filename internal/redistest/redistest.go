// Package redistest is Redis test support: it starts a throwaway
// redis-server for tests (tests that compare leaf with Redis, or read from
// it, run against the real thing), and gives tests' go-redis clients
// timeouts a busy machine cannot run out (Options).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Start starts a throwaway redis-server on a free loopback port, without
// persistence, and stops it (by its PID) at cleanup; it returns its
// host:port. It skips the test when redis-server is not installed, except
// under CI=true, where it fails (scripts/test.sh installs it).
func Start(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		const how = "redis-server not found: install the Debian package redis-server (scripts/test.sh does as root)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(how)
		}
		tb.Skip(how)
	}
	// The free port is found by listening on port 0 and closing; another
	// process may take it before redis-server binds, so a failed bind is
	// retried on a new port.
	var lastLog string
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		addr, log, ok := run(tb, bin, port)
		if ok {
			return addr
		}
		lastLog = log
	}
	tb.Fatalf("redis-server did not start:\n%s", lastLog)
	return ""
}

// run starts redis-server on port and waits for its "Ready to accept
// connections" line; false (and its output) when it exits first.
func run(tb testing.TB, bin string, port int) (addr, log string, ok bool) {
	tb.Helper()
	dir := tb.TempDir()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "",
		"--protected-mode", "yes")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	ready := make(chan struct{})
	exited := make(chan struct{})
	var b strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "Ready to accept connections") {
				signalled = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		return "", b.String(), false
	case <-time.After(60 * time.Second): // a hung start, not an assertion on timing
		_ = cmd.Process.Kill()
		<-exited
		tb.Fatalf("redis-server (pid %d) not ready within 60s", cmd.Process.Pid)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port), "", true
}
