//go:build !linux

package server

import "runtime"

// What INFO reads from the system is Linux's (sysinfo_linux.go);
// elsewhere those fields are left out.

func osName() string { return runtime.GOOS + " " + runtime.GOARCH }

func processRSS() int64 { return 0 }

func systemMemory() (int64, bool) { return 0, false }

type cpuUsage struct {
	sys, user, childSys, childUser float64
}

func cpuTimes() (cpuUsage, bool) { return cpuUsage{}, false }
