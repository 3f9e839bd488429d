//go:build !linux

package server

import (
	"errors"
	"net"
)

// Event loops are Linux's (loop_linux.go); elsewhere every connection has
// a goroutine of its own.

const haveLoops = false

type loop struct{}

func newLoop(*Server) (*loop, error)              { return nil, errors.ErrUnsupported }
func (l *loop) adopt(*net.TCPConn) (*conn, error) { return nil, errors.ErrUnsupported }
func (l *loop) add(*conn)                         {}
func (l *loop) shut()                             {}
func (l *loop) stop()                             {}
func closeFD(int)                                 {}
