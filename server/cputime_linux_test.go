package server

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU is the calling thread's CPU time in nanoseconds.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}

// reportCPU runs f b.N times (f does n ops a call) on one locked thread
// and reports its CPU time per op as cpu-ns/op: unlike ns/op, it does not
// count the time the machine gave to other processes, so it compares
// builds on a busy machine.
func reportCPU(b *testing.B, n int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		f()
	}
	b.StopTimer()
	if end, ok2 := threadCPU(); ok && ok2 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}
