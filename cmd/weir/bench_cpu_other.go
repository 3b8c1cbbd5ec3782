//go:build !unix

package main

import "time"

func benchProcessCPU() (time.Duration, bool) { return 0, false }

func benchLoadAverage() (float64, bool) { return 0, false }

func benchRSS() (int64, bool) { return 0, false }
