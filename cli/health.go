package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// runHealth: leaf health [--timeout D]. It checks the server configured
// as the server itself reads its configuration: PING on server.addr
// (with server.password, over TLS when server.tls_cert is set) and, when
// http.addr is set, GET /healthz. Exit 0 when both answer, 1 otherwise:
// a container's HEALTHCHECK, where the image has no curl or redis-cli.
func runHealth(ctx context.Context, e *env, args []string) error {
	fs := newFlags("health")
	timeout := fs.Duration("timeout", 3*time.Second, "how long each check may take")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see leaf health --help)", fs.Args())
	}
	if err := e.load(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	addr, err := local(e.cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("server.addr: %w", err)
	}
	opts := &redis.Options{
		Addr: addr, Password: e.cfg.Server.Password,
		DialTimeout: *timeout, ReadTimeout: *timeout, WriteTimeout: *timeout,
		MaxRetries: -1, PoolSize: 1, DialerRetries: 1,
	}
	if e.cfg.Server.TLSCert != "" {
		// The check dials this host's own listener, whose certificate
		// names the service, not the loopback address.
		opts.TLSConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("PING %s: %w", addr, err)
	}
	fmt.Fprintf(e.stdout, "redis %s: PONG\n", addr)

	if e.cfg.HTTP.Addr == "" {
		return nil
	}
	haddr, err := local(e.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http.addr: %w", err)
	}
	url := "http://" + haddr + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	fmt.Fprintf(e.stdout, "http %s: %s\n", url, res.Status)
	return nil
}

// errNoPort: a listener on port 0 has a port no other process can know.
var errNoPort = errors.New("port 0 is chosen at start: nothing to check")

// local is the address to dial for a listener on addr: the loopback
// address of its family when addr listens on every interface
// (":6380", "0.0.0.0:6380", "[::]:6380").
func local(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "0" {
		return "", fmt.Errorf("%s: %w", addr, errNoPort)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}
