// Command delayproxy makes a database distant, for benchmarks: it
// forwards TCP connections to a target and delays every byte by a fixed
// time in each direction (internal/roundtrip), so that a round trip costs
// twice the delay more. It prints the address it listens on, alone on
// the first line of its output, and runs until SIGTERM or SIGINT.
//
//	delayproxy -target 127.0.0.1:3306 -delay 50ms [-listen 127.0.0.1:0]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leaf-id/leaf/internal/roundtrip"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "delayproxy:", err)
		os.Exit(2)
	}
}

// run forwards until ctx ends; it writes the address it listens on to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("delayproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	target := fs.String("target", "", "host:port to forward to (required)")
	delay := fs.Duration("delay", 50*time.Millisecond, "delay of every byte, in each direction")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		return errors.New("-target is required")
	}
	p, err := roundtrip.Listen(*listen, *target, *delay)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := fmt.Fprintln(out, p.Addr()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
