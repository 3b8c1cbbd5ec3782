package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// newFlagSet returns a flag set for one subcommand that writes its help to
// stderr and continues on error so the caller can map it to exit status 2.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: weir %s\n\nFlags (each also read from env WEIR_<FLAG_NAME>):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags applies WEIR_<FLAG_NAME_UPPER_SNAKE> env vars as defaults for
// every flag not given on the command line, then parses args. Flags given
// explicitly win over the environment.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || envErr != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("env %s: %w", envName(f.Name), err)
			}
		}
	})
	return envErr
}

// envName maps a flag name to its environment variable: "nats-url" → "WEIR_NATS_URL".
func envName(flagName string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
