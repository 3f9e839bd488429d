package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRun: the address printed forwards to the target, each way delayed,
// and the proxy stops when its context ends.
func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the target: greets, as a database does, and closes
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("hello\n"))
	}()

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	const delay = 10 * time.Millisecond
	go func() {
		done <- run(ctx, []string{"-target", ln.Addr().String(), "-delay", delay.String()}, pw)
		pw.Close()
	}()
	addr, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the address: %v", err)
	}
	start := time.Now()
	c, err := net.Dial("tcp", strings.TrimSpace(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	greeting, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || greeting != "hello\n" {
		t.Fatalf("through the proxy: %q, %v; want the target's greeting", greeting, err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("the greeting came after %s, want at least the delay, %s", took, delay)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRunNeedsTarget: without -target it refuses to start.
func TestRunNeedsTarget(t *testing.T) {
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "-target") {
		t.Fatalf("run without -target: %v, want an error naming -target", err)
	}
}
