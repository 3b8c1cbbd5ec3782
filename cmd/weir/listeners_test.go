package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// A port clash on any of serve's listeners is refused at once, naming the
// flag, before NATS or anything else starts.
func TestAPortClashIsReportedAtOnceNamingItsFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, tc := range []struct {
		flag string
		set  func(*serveConfig)
	}{
		{"--nats-addr", func(c *serveConfig) { c.NATSAddr = addr }},
		{"--http", func(c *serveConfig) { c.HTTP = addr }},
		{"--tron-http", func(c *serveConfig) { c.TronHTTP = addr }},
	} {
		cfg := integrityConfig(t.TempDir())
		cfg.memory = true
		tc.set(&cfg)
		start := time.Now()
		eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
		if err == nil {
			_ = eng.Close(context.Background())
			t.Fatalf("%s on a taken port: started", tc.flag)
		}
		if !strings.HasPrefix(err.Error(), tc.flag+" "+addr) {
			t.Fatalf("%s: error %q does not start with the flag and address", tc.flag, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: took %s to report the clash", tc.flag, d)
		}
	}
	// The same address for two listeners is a clash too.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	same := free.Addr().String()
	free.Close()
	cfg := integrityConfig(t.TempDir())
	cfg.NATSAddr, cfg.HTTP = same, same
	if err := checkListeners(cfg); err == nil || !strings.HasPrefix(err.Error(), "--http "+same) {
		t.Fatalf("same address twice: %v", err)
	}
}
