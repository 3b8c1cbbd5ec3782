package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

// loadBlocklist reads the --destination-blocklist file: one TRON address a
// line (base58 "T…" or hex "41…"); blank lines and text after '#' are
// ignored. An address that does not parse stops start-up with its line
// number: a list silently missing an entry would let that payment through.
func loadBlocklist(path string) ([]tron.Address, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--destination-blocklist: %w", err)
	}
	var out []tron.Address
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		a, err := tron.ParseAddress(line)
		if err != nil {
			return nil, fmt.Errorf("--destination-blocklist %s line %d: %w", path, n, err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--destination-blocklist %s: %w", path, err)
	}
	return out, nil
}
