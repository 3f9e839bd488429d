package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/server"
)

// warnExposure warns, once at start, of what the configuration leaves
// open: admin commands for every client beyond loopback, the profiler,
// HTTP in the clear beyond loopback, passwords given as flags.
func warnExposure(cfg config.Config, args []string, log *slog.Logger) {
	s, h := cfg.Server, cfg.HTTP
	if s.AdminPassword == "" && !config.Loopback(s.Addr) {
		log.Warn("server.admin_password is empty: every client that may run commands may also run LEAF.CREATE, LEAF.STEP, "+
			"LEAF.FLOOR and SET (floors never come down) and CLIENT LIST; set server.admin_password", "addr", s.Addr)
	}
	if h.Addr != "" && h.PProf {
		log.Warn("http.pprof is on: /debug/pprof/ shows the process's memory and burns CPU on request; turn it off in production",
			"addr", h.Addr, "behind_password", s.Password != "")
	}
	if h.Addr != "" && !h.TLS && !config.Loopback(h.Addr) {
		log.Warn("http.addr listens beyond loopback without TLS: passwords and IDs cross the network in the clear; set http.tls",
			"addr", h.Addr)
	}
	for _, key := range config.SecretFlags(args) {
		log.Warn("a password given as a flag is visible to every user of the machine (ps); use server.password_file, "+
			"server.admin_password_file or LEAF_SERVER_PASSWORD / LEAF_SERVER_ADMIN_PASSWORD", "flag", "--"+key)
	}
}

// reloadOnHangup reads the TLS certificate again on SIGHUP, until ctx ends.
func reloadOnHangup(ctx context.Context, certs *server.Certs, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := certs.Reload(); err != nil {
					log.Warn("SIGHUP: TLS certificate not reloaded; the one in use stays", "err", err)
				}
			}
		}
	}()
}
