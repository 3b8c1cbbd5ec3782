package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files an operator gives weir are read as their reviewer reads them:
// a key given twice, or differing from the schema only in case, stops
// start-up instead of letting the last or the case-folded one win.
func TestPolicyAndCustodyFilesWithDuplicateOrCaseVariantKeysAreRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ doc, want string }{
		{`[{"address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","account":"treasury","account":"mallory"}]`, `"account" appears twice`},
		{`[{"address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","account":"treasury","ACCOUNT":"mallory"}]`, `"ACCOUNT" is not "account"`},
	} {
		if _, err := loadCustody(write("custody.json", c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("custody %s: %v, want %s", c.doc, err, c.want)
		}
	}
	if _, err := loadCustody(write("custody.json", `[{"address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","account":"treasury"}]`)); err != nil {
		t.Fatalf("a plain custody file: %v", err)
	}

	policy := write("policy.json", `{"name":"p","rules":[{"name":"r","threshold":"0","approvers":2,"approvers":1}]}`)
	cfg := serveConfig{Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "always", TronHTTP: "",
		DailyLimit: "0", LogLevel: "warn", Policy: policy, memory: true}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil {
		_ = eng.Close(context.Background())
		t.Fatal("a policy file with approvers twice started weir")
	}
	if !strings.Contains(err.Error(), `"approvers" appears twice`) {
		t.Fatalf("policy: %v", err)
	}
}
