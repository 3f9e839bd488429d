//go:build linux || darwin

package server

import (
	"log/slog"
	"syscall"
)

func getFileLimit(log *slog.Logger) (cur, hard uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return 0, 0, false
	}
	return lim.Cur, lim.Max, true
}

func setFileLimit(soft, hard uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: soft, Max: hard})
}
