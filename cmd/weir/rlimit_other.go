//go:build !unix

package main

import "log/slog"

// httpConnCap: no open-file limit to respect here.
func httpConnCap(want int, _ *slog.Logger) int { return want }
