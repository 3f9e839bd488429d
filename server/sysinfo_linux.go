package server

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// What INFO reads from the system (Linux): the kernel's name, the
// process's resident memory and CPU times, the machine's memory.

// osName is INFO's os, as Redis writes it: "Linux 6.1.0 x86_64".
func osName() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "Linux"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " +
		unix.ByteSliceToString(u.Machine[:])
}

// processRSS is the process's resident memory in bytes, 0 when unknown.
func processRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// systemMemory is the machine's memory in bytes.
func systemMemory() (int64, bool) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, false
	}
	return int64(si.Totalram) * int64(si.Unit), true
}

// cpuUsage are the CPU seconds INFO cpu shows.
type cpuUsage struct {
	sys, user, childSys, childUser float64
}

// cpuTimes is the CPU time of the process and of its children.
func cpuTimes() (cpuUsage, bool) {
	var self, children unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &self) != nil || unix.Getrusage(unix.RUSAGE_CHILDREN, &children) != nil {
		return cpuUsage{}, false
	}
	secs := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return cpuUsage{secs(self.Stime), secs(self.Utime), secs(children.Stime), secs(children.Utime)}, true
}
