//go:build linux

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// benchThreadCPU is the CPU time the calling OS thread has used so far,
// and the thread's id. Measured around a call on a goroutine locked to its
// thread (runtime.LockOSThread), the difference is that call's own CPU:
// nothing else runs on a locked thread.
func benchThreadCPU() (tid int, cpu time.Duration, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, 0, false
	}
	return unix.Gettid(), time.Duration(ts.Nano()), true
}
