//go:build !(linux || darwin)

package server

import (
	"errors"
	"log/slog"
)

func getFileLimit(*slog.Logger) (cur, hard uint64, ok bool) { return 0, 0, false }

func setFileLimit(soft, hard uint64) error { return errors.ErrUnsupported }
