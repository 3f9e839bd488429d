// Package logbuf is a log sink for tests: a bytes.Buffer that is safe for
// a logger's concurrent writes, read back with String.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it; the zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
