package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestWithdrawalAndReservationSurviveRestart stops weir (file storage,
// fsync every write) with a reserved withdrawal awaiting approval and starts
// it again on the same directory: the withdrawal, its reservation and the
// account balance are all there, and the approval then pays it.
func TestWithdrawalAndReservationSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := devRestartConfig(dir)
	cfg.TronHTTP = ""
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	const id = "5e0b7c1a-1111-4222-8333-000000000001"

	eng, err := startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	body := creditAndRequest(c, id)
	// The queues read their own writes: the request just made is listed.
	if _, _, q := c.do("GET", "/v1/queues/approvals", "dev-bob-token", ""); !queueHas(q, id) {
		t.Fatalf("approvals queue right after the request: %v", q)
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	eng, err = startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	c = httpClient{t: t, base: "http://" + eng.httpAddr}
	_, _, w := c.do("GET", "/v1/withdrawals/"+id, "dev-alice-token", "")
	if w["state"] != "requested" || w["reserved"] != true || w["amount"] != "30" {
		t.Fatalf("after restart: %v", w)
	}
	_, _, acct := c.do("GET", "/v1/accounts/keep", "dev-alice-token", "")
	if acct["available"] != "70" || acct["reserved"] != "30" {
		t.Fatalf("balance after restart: %v", acct)
	}
	// A replay after the restart is still a replay, not a second withdrawal.
	if code, h, _ := c.do("POST", "/v1/withdrawals", "dev-alice-token", body); code != 200 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after restart: %d", code)
	}
	if code, _, w := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 {
		t.Fatalf("approve: %d %v", code, w)
	}
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)
}

func queueHas(q map[string]any, id string) bool {
	items, _ := q["items"].([]any)
	for _, it := range items {
		if w, _ := it.(map[string]any); w["id"] == id {
			return true
		}
	}
	return false
}

// A background loop that stops on its own (the ledger saga, a worker, the
// simulated chain) means money stops moving: /healthz must answer 503.
func TestHealthFailsWhenABackgroundLoopDies(t *testing.T) {
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSAddr: "", Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := startEngine(context.Background(), cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, _ := c.do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz before: %d", code)
	}
	eng.fail("ledger saga", errors.New("durable consumer: unknown event type"))
	if code, _, body := c.do("GET", "/healthz", "", ""); code != 503 {
		t.Fatalf("healthz after the ledger died: %d %v", code, body)
	}
}
