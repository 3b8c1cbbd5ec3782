package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/tron"
)

func TestBlocklistFileReadsAddressesAndRefusesABadLine(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("# scam reports\nTLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7  # 2026-11 phishing\n\n  41a614f803b6fd780986a42c78ec9c7f77e6ded13c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := loadBlocklist(good)
	if err != nil {
		t.Fatal(err)
	}
	want := []tron.Address{tron.MustParseAddress("TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"), tron.USDTContract}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7\nTNotAnAddress\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadBlocklist(bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad line: %v", err)
	}
}
