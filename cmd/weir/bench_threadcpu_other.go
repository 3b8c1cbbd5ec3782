//go:build !linux

package main

import "time"

// benchThreadCPU cannot be read here: the simulated node's CPU then stays
// in the process figure.
func benchThreadCPU() (tid int, cpu time.Duration, ok bool) { return 0, 0, false }
