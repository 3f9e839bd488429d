// Package redistest is Redis test support: it starts a throwaway
// redis-server for tests (tests that compare leaf with Redis, or read from
// it, run against the real thing), gives tests' go-redis clients
// timeouts a busy machine cannot run out (Options), and holds the helpers
// that the tests of several packages share (Incr, LeafInfo, Pairs,
// WaitFor).
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
	return start(tb, "Ready to accept connections", nil, nil)
}

// StartCluster starts a throwaway redis-server in cluster mode, alone in
// its cluster with every slot (CLUSTER ADDSLOTSRANGE 0 16383) and
// announcing 127.0.0.1, as Start does, and waits until its cluster state
// is ok: the replies of a real one-node Redis Cluster, to compare with.
func StartCluster(tb testing.TB) string {
	tb.Helper()
	addr := start(tb, "Ready to accept connections", func(dir string) []string {
		return []string{"--cluster-enabled", "yes", "--cluster-config-file", dir + "/nodes.conf",
			"--cluster-announce-ip", "127.0.0.1"}
	}, nil)
	if out := command(tb, addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); out != "+OK\r\n" {
		tb.Fatalf("redis-server CLUSTER ADDSLOTSRANGE 0 16383: %q", out)
	}
	deadline := time.Now().Add(time.Minute) // a safety net, not an assertion on time
	for !strings.Contains(command(tb, addr, "CLUSTER", "INFO"), "cluster_state:ok") {
		if time.Now().After(deadline) {
			tb.Fatal("redis-server's cluster state is not ok within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr
}

// StartSentinel starts a throwaway Redis Sentinel, as Start does, that
// monitors the redis-server at master under the name mymaster with a
// quorum of 1; it returns its host:port.
func StartSentinel(tb testing.TB, master string) string {
	tb.Helper()
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		tb.Fatal(err)
	}
	return start(tb, "+monitor master mymaster", nil, func(dir string, listen int) []string {
		conf := dir + "/sentinel.conf"
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster %s %s 1\n", listen, host, port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		return []string{conf, "--sentinel"}
	})
}

// start runs redis-server on a free port until its log shows ready. extra
// adds arguments to a redis-server's; sentinel, when set, gives the whole
// command line of a Sentinel instead.
func start(tb testing.TB, ready string, extra func(dir string) []string, sentinel func(dir string, port int) []string) string {
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
		dir := tb.TempDir()
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "",
			"--protected-mode", "yes"}
		if extra != nil {
			args = append(args, extra(dir)...)
		}
		if sentinel != nil {
			args = sentinel(dir, port)
		}
		addr, log, ok := run(tb, bin, port, args, ready)
		if ok {
			return addr
		}
		lastLog = log
	}
	tb.Fatalf("redis-server did not start:\n%s", lastLog)
	return ""
}

// run starts redis-server with args and waits for its ready line; false
// (and its output) when it exits first.
func run(tb testing.TB, bin string, port int, args []string, readyLine string) (addr, log string, ok bool) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
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
			if !signalled && strings.Contains(sc.Text(), readyLine) {
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

// command sends one command to addr and returns its raw reply (as far as
// one read gets it: short replies only).
func command(tb testing.TB, addr string, args ...string) string {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", addr, time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := nc.Write([]byte(b.String())); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := nc.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return string(buf[:n])
}
