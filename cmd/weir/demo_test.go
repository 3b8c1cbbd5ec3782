package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var demoSceneHeadings = []string{
	"Scene 1 — A duplicated request",
	"Scene 2 — An internal transfer",
	"Scene 3 — A large withdrawal",
	"Scene 4 — A worker killed mid-broadcast",
	"Scene 5 — A node that accepts, then times out",
	"Scene 6 — A transaction that expires while every worker is down",
	"Scene 7 — A hot wallet that runs dry",
	"Check — every withdrawal paid exactly once",
	"All checks hold: 7 withdrawals: 6 paid on chain and 1 on the ledger",
}

func runDemoForTest(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := runMain(ctx, append([]string{"demo"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The demo plays every scene against the real engine and exits 0 only when
// its own final check — one payment per withdrawal, balanced accounts —
// holds. A scene that did not go as narrated prints ✗ and makes it exit 1.
func TestDemoPaysEveryWithdrawalExactlyOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	code, out, errOut := runDemoForTest(t, "--keep", dir)
	if code != 0 {
		t.Fatalf("weir demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, h := range demoSceneHeadings {
		if !strings.Contains(out, h) {
			t.Errorf("output lacks %q", h)
		}
	}
	if strings.Contains(out, "✗") {
		t.Errorf("a claim failed although the exit status is 0:\n%s", out)
	}
	for _, evidence := range []string{
		"Idempotent-Replayed: true", "409 idempotency_conflict", "403 self_approval",
		"result=found_pending", "withdrawal.rebuilt", "scanned, none holds", "the proof holds on the chain", "calls worker-2 made to the node: 0",
		"sending paused — USDT short", "weir.notify.wallet.sending.paused", "weir.notify.wallet.sending.resumed", "each change announced once",
	} {
		if !strings.Contains(out, evidence) {
			t.Errorf("output lacks the evidence %q", evidence)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
		t.Errorf("--keep %s: the store is not there (%v)", dir, err)
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestDemoFlags(t *testing.T) {
	t.Run("help", func(t *testing.T) {
		code, _, errOut := runDemoForTest(t, "--help")
		if code != 0 || !strings.Contains(errOut, "Usage: weir demo") || !strings.Contains(errOut, "-keep") {
			t.Fatalf("exit %d, help:\n%s", code, errOut)
		}
	})
	t.Run("bad storage", func(t *testing.T) {
		if code, _, _ := runDemoForTest(t, "--storage", "tape"); code != 2 {
			t.Fatalf("exit %d, want 2", code)
		}
	})
	t.Run("keep refuses a non-empty directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runDemoForTest(t, "--keep", dir)
		if code != 1 || !strings.Contains(errOut, "not empty") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}
