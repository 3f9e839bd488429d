//go:build !linux

package resp

import (
	"errors"
	"net"
	"time"
)

// Event loops are Linux's (loop_linux.go); elsewhere every connection has
// a goroutine of its own.

const haveLoops = false

type loop struct{}

func newLoop(*Server, int) (*loop, error)         { return nil, errors.ErrUnsupported }
func (l *loop) adopt(*net.TCPConn) (*Conn, error) { return nil, errors.ErrUnsupported }
func (l *loop) give(*Conn)                        {}
func (l *loop) shut(time.Time)                    {}
func (l *loop) cut()                              {}
func (l *loop) kill(*Conn)                        {}
func (l *loop) pushed(*Conn)                      {}
func (l *loop) stop()                             {}
func closeFD(int)                                 {}

// Loop is -1: without event loops every connection has a goroutine.
func (c *Conn) Loop() int { return -1 }
