package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// TestDevModeIsRefusedOffOneMachine: with a real --tron-node, or a
// listener or NATS others can reach, the dev principals, dev funding and
// dev custody are refused with a message naming the flags to set; on
// loopback against the simulated chain dev mode stays.
func TestDevModeIsRefusedOffOneMachine(t *testing.T) {
	base := serveConfig{HTTP: "127.0.0.1:8080", NATSAddr: "127.0.0.1:4222"}
	for _, tc := range []struct {
		name string
		edit func(*serveConfig)
		want []string // in the refusal; nil = allowed
	}{
		{"loopback, simulated chain", func(*serveConfig) {}, nil},
		{"localhost and ::1", func(c *serveConfig) { c.HTTP, c.NATSAddr = "localhost:0", "[::1]:0" }, nil},
		{"no NATS listener", func(c *serveConfig) { c.NATSAddr = "" }, nil},
		{"real chain", func(c *serveConfig) { c.TronNode = "https://node.example:8090" }, []string{"--tron-node", "--principals FILE", "--custody FILE"}},
		{"HTTP on every interface", func(c *serveConfig) { c.HTTP = "0.0.0.0:8080" }, []string{"--http 0.0.0.0:8080", "--principals FILE"}},
		{"HTTP with no host", func(c *serveConfig) { c.HTTP = ":8080" }, []string{"--http :8080"}},
		{"NATS on a LAN address", func(c *serveConfig) { c.NATSAddr = "10.1.2.3:4222" }, []string{"--nats-addr 10.1.2.3:4222", "--principals FILE"}},
		{"a remote NATS", func(c *serveConfig) { c.NATSURL = "nats://n1.example:4222" }, []string{"--nats-url", "--principals FILE"}},
		{"a local external NATS", func(c *serveConfig) { c.NATSURL, c.NATSAddr = "nats://127.0.0.1:4222", "0.0.0.0:1" }, nil},
		{"principals given, custody not", func(c *serveConfig) { c.TronNode, c.Principals = "https://node", "p.json" }, []string{"--custody FILE"}},
		{"both given", func(c *serveConfig) { c.HTTP, c.Principals, c.Custody = "0.0.0.0:8080", "p.json", "c.json" }, nil},
	} {
		cfg := base
		tc.edit(&cfg)
		err := refuseDevDefaults(cfg)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: allowed", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
		if tc.name == "principals given, custody not" && strings.Contains(err.Error(), "--principals") {
			t.Errorf("%s: asks for --principals, which was given: %v", tc.name, err)
		}
	}
}

// TestServeRefusesDevModeOnAPublicListener: startEngine itself refuses,
// before anything listens.
func TestServeRefusesDevModeOnAPublicListener(t *testing.T) {
	cfg := serveConfig{Data: t.TempDir(), HTTP: "0.0.0.0:0", NATSAddr: "127.0.0.1:0", Sync: "lazy", memory: true, DailyLimit: "0"}
	_, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--principals FILE") {
		t.Fatalf("startEngine = %v, want the dev-mode refusal", err)
	}
}

// devFlagFiles writes the dev principals and the dev custody map as the
// files --principals and --custody take, for tests that run weir against a
// node given by --tron-node (where dev mode is refused) and still use the
// dev tokens.
func devFlagFiles(t *testing.T) (principals, custody string) {
	t.Helper()
	dir := t.TempDir()
	principals, custody = filepath.Join(dir, "principals.json"), filepath.Join(dir, "custody.json")
	p, err := json.Marshal(api.DevPrincipals().All())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal([]map[string]string{{"address": devCustodyAddress, "account": "treasury"}})
	if err := os.WriteFile(principals, p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(custody, c, 0o600); err != nil {
		t.Fatal(err)
	}
	return principals, custody
}
