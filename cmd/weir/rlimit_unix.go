//go:build unix

package main

import (
	"log/slog"
	"syscall"
)

// connCap bounds a connection cap by the open-file limit: the HTTP API,
// and the embedded NATS server's clients, may each hold a quarter of the
// process's descriptors at most, so a connection flood can never take the
// ones the store writes with. want <= 0 asks for that bound alone.
func connCap(want int, log *slog.Logger) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return want
	}
	most := int(min(lim.Cur/4, 1<<30))
	if want <= 0 {
		return most
	}
	if want > most {
		log.Warn("connection cap lowered to a quarter of the open-file limit", "wanted", want, "cap", most, "nofile", lim.Cur)
		return most
	}
	return want
}
