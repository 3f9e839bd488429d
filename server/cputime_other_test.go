//go:build !linux

package server

import "testing"

// reportCPU runs f b.N times (f does n ops a call); the CPU time per op
// is measured on Linux only (cputime_linux_test.go).
func reportCPU(b *testing.B, n int, f func()) {
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		f()
	}
}
