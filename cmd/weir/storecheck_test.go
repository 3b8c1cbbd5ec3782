package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas"
)

// What weir relies on, checked at start and by /healthz. The edits below
// are what a NATS admin (or a leaked admin credential) could do to the
// stream and the ledger's consumer; none may pass silently.

func fileEngineConfig(dir string) serveConfig {
	return serveConfig{
		Data: dir, HTTP: "127.0.0.1:0", NATSAddr: "", Sync: "lazy", Workers: 1,
		SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
	}
}

func startEngineT(t *testing.T, cfg serveConfig) *engine {
	t.Helper()
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return eng
}

// adminStream is the event stream as an admin with every right sees it.
func adminStream(t *testing.T, eng *engine) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	nc, err := eng.emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	s, err := js.Stream(t.Context(), "WEIR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	return js, s
}

func wantUnhealthy(t *testing.T, eng *engine, names ...string) {
	t.Helper()
	eng.verified = cachedCheck{} // the next call checks again
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	code, _, body := c.do("GET", "/healthz", "", "")
	msg := fmt.Sprint(body)
	if code != 503 {
		t.Fatalf("healthz %d %s, want 503", code, msg)
	}
	for _, n := range names {
		if !strings.Contains(msg, n) {
			t.Fatalf("healthz does not name %q: %s", n, msg)
		}
	}
}

// TestAnEditedStreamIsA503AndARefusalAtStart: `nats stream edit
// --max-msgs=5` on a running weir makes /healthz 503 naming the limit, and
// weir refuses to start on it again (it used to keep the limit and carry
// on with a cut log).
func TestAnEditedStreamIsA503AndARefusalAtStart(t *testing.T) {
	dir := t.TempDir()
	eng := startEngineT(t, fileEngineConfig(dir))
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz before: %d %v", code, body)
	}
	js, s := adminStream(t, eng)
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = 5
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	wantUnhealthy(t, eng, "max_msgs 5")
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := startEngine(context.Background(), fileEngineConfig(dir), slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "max_msgs 5") {
		t.Fatalf("restart on the cut stream: %v, want a refusal naming max_msgs", err)
	}
}

// TestASealedStreamIsA503: `nats stream seal` made every write fail while
// /healthz said ok.
func TestASealedStreamIsA503(t *testing.T) {
	eng := startEngineT(t, fileEngineConfig(t.TempDir()))
	js, s := adminStream(t, eng)
	cfg := s.CachedInfo().Config
	cfg.Sealed = true
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	wantUnhealthy(t, eng, "sealed")
	// The write probe on its own says the same.
	if err := eng.store.Verify(t.Context()); err == nil {
		t.Fatal("Verify passed a sealed stream")
	}
}

// TestTheLedgerConsumerRemovedOrEditedIsA503: `nats consumer rm … weir-ledger`
// stopped settlement silently; an edited filter would too.
func TestTheLedgerConsumerRemovedOrEditedIsA503(t *testing.T) {
	eng := startEngineT(t, fileEngineConfig(t.TempDir()))
	js, _ := adminStream(t, eng)
	cons, err := js.Consumer(t.Context(), "WEIR_EVENTS", sagas.LedgerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.FilterSubject = "weir.evt.nothing.*"
	if _, err := js.UpdateConsumer(t.Context(), "WEIR_EVENTS", cc); err != nil {
		t.Fatal(err)
	}
	wantUnhealthy(t, eng, sagas.LedgerConsumer, "filter")
	if err := js.DeleteConsumer(t.Context(), "WEIR_EVENTS", sagas.LedgerConsumer); err != nil {
		t.Fatal(err)
	}
	wantUnhealthy(t, eng, sagas.LedgerConsumer)
}

// TestShutdownIsBoundedWhenTheStreamIsGone: `nats stream rm` under a
// running weir: /healthz names it, and shutdown still ends (an ordered
// consumer used to retry re-creating itself forever under a lock).
func TestShutdownIsBoundedWhenTheStreamIsGone(t *testing.T) {
	eng := startEngineT(t, fileEngineConfig(t.TempDir()))
	js, _ := adminStream(t, eng)
	if err := js.DeleteStream(t.Context(), "WEIR_EVENTS"); err != nil {
		t.Fatal(err)
	}
	wantUnhealthy(t, eng, "WEIR_EVENTS")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- eng.Close(ctx) }()
	select {
	case <-done:
		t.Logf("closed in %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown did not end with the stream gone")
	}
}
