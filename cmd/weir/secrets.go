package main

import (
	"fmt"
	"os"
	"runtime"
)

// checkPrivateFile refuses a secret file (principals, a signing key) that
// group or others may read or write, as ssh refuses such a key: a file
// anyone on the host can read is a secret anyone on the host has.
func checkPrivateFile(flag, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if runtime.GOOS == "windows" {
		return nil // no POSIX modes to judge by
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s is open to group or others (mode %#o): run chmod 600 %s", flag, path, perm, path)
	}
	return nil
}
