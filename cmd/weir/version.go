package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release this binary is; `make build` sets it with
// -ldflags "-X main.version=…". Empty: the module version Go recorded, or
// "dev".
var version = ""

func init() {
	register(command{name: "version", summary: "print weir's version (also --version)", run: runVersion})
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", stderr)
	if _, err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionLine())
	return nil
}

// versionLine is "weir <version> (<revision>[+dirty], <go version>)".
func versionLine() string {
	v, rev, dirty := version, "unknown", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
				if len(rev) > 12 {
					rev = rev[:12]
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if dirty {
		rev += "+dirty"
	}
	return fmt.Sprintf("weir %s (%s, %s)", v, rev, runtime.Version())
}
