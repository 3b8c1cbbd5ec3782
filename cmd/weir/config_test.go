package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// configEngine starts an engine on the shared NATS at url with the given
// principals/custody files ("" = dev mode) and the shared event key.
func configEngine(url, eventKey, principals, custodyFile string, publish bool) (*engine, error) {
	cfg := serveConfig{
		Data: "", HTTP: "127.0.0.1:0", NATSURL: url, Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn", PolicyQuorum: 1,
		NATSCreds: natsCreds{user: "weir", password: refWeirPassword}, EventKey: eventKey,
		Principals: principals, Custody: custodyFile, PublishConfig: publish, TronHTTP: "",
	}
	return startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
}

// TestConfigDriftIsRefusedAtStartAndPublishedOnRequest: two serve engines
// on one NATS started with different custody files. The second refuses to
// start, naming the drift; with --publish-config its files become the next
// configuration version (recorded with who and when), and from then on
// both processes route a custodied destination the same way — the first
// one included, which reads the configuration in force from the log, not
// from its own files.
func TestConfigDriftIsRefusedAtStartAndPublishedOnRequest(t *testing.T) {
	url := startReferenceNATS(t)
	dir := t.TempDir()
	eventKey := filepath.Join(dir, "event.key")
	if err := os.WriteFile(eventKey, []byte("k1 "+strings.Repeat("7a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	principals, _ := devFlagFiles(t)
	toOps := filepath.Join(dir, "custody-ops.json")
	if err := os.WriteFile(toOps, []byte(`[{"address":"`+devCustodyAddress+`","account":"ops"}]`), 0o600); err != nil {
		t.Fatal(err)
	}

	a, err := configEngine(url, eventKey, "", "", false) // dev mode: the first start publishes v1
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	v1, err := a.repo.Config(t.Context())
	if err != nil || v1.Version != 1 {
		t.Fatalf("first start on an empty log: config v%d (%v), want v1", v1.Version, err)
	}
	if acc, _ := v1.Config.CustodyAccount(devCustodyAddress); acc != "treasury" {
		t.Fatalf("v1 custody of %s: %q, want treasury", devCustodyAddress, acc)
	}

	_, err = configEngine(url, eventKey, principals, toOps, false)
	var drift *sagas.ConfigDriftError
	if !errors.As(err, &drift) {
		t.Fatalf("second engine with another custody file: err %v, want a configuration drift refusal", err)
	}
	for _, want := range []string{"configuration drift", "custody " + devCustodyAddress + ": treasury → ops", "--publish-config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if s, _ := a.repo.Config(t.Context()); s.Version != 1 {
		t.Fatalf("a refused start changed the configuration: v%d", s.Version)
	}

	before := time.Now().UTC()
	b, err := configEngine(url, eventKey, principals, toOps, true)
	if err != nil {
		t.Fatalf("--publish-config: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	v2, err := a.repo.Config(t.Context())
	if err != nil || v2.Version != 2 {
		t.Fatalf("after --publish-config: v%d (%v), want v2", v2.Version, err)
	}
	if v2.ChangedBy != aggregate.SystemActor || v2.ChangedAt.Before(before) {
		t.Errorf("v2 recorded by %q at %s", v2.ChangedBy, v2.ChangedAt)
	}
	recs, _, err := a.repo.Store().Load(t.Context(), configKey())
	if err != nil || len(recs) != 2 || !strings.Contains(string(recs[1].Payload), `"process":`) || strings.Contains(string(recs[1].Payload), "token") {
		t.Fatalf("config stream: %d records (%v); v2 must name its process and hold no token: %s", len(recs), err, lastPayload(recs))
	}

	// Both route the custodied destination to ops, whichever worker
	// claims each withdrawal.
	if _, _, err := a.intake.Credit(t.Context(), sagas.CreditInput{Account: "pool", CreditID: "seed", Amount: []byte(`"100"`), By: "olivia"}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = fmt.Sprintf("22222222-3333-4444-8555-%012d", i+1)
		in := a.intake
		if i%2 == 1 {
			in = b.intake
		}
		if _, _, err := in.Request(t.Context(), sagas.RequestInput{OperationID: ids[i], Account: "pool", ToAddress: devCustodyAddress, Amount: []byte(`"1"`), Asset: "USDT-TRC20", By: "alice"}); err != nil {
			t.Fatal(err)
		}
		if _, err := in.Approve(t.Context(), ids[i], "bob"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		w := waitTerminal(t, a, id)
		if w.State != aggregate.StateConfirmed || w.Route.Account() != "ops" {
			t.Errorf("%s: %s routed %s %q, want confirmed internally to ops (the custody in force)", id, w.State, w.Route.Rail(), w.Route.Account())
		}
	}
}

func configKey() eventstore.Key {
	return eventstore.Key{Type: eventlog.TypeConfig, ID: eventlog.ConfigStreamID}
}

func lastPayload(recs []eventstore.Record) string {
	if len(recs) == 0 {
		return "(none)"
	}
	return string(recs[len(recs)-1].Payload)
}

// waitTerminal polls the withdrawal until it ends (the workers run on their
// own; internal routes need no chain).
func waitTerminal(t *testing.T, e *engine, id string) aggregate.Withdrawal {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, err := e.intake.Withdrawal(t.Context(), id)
		if err == nil && w.Terminal() {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ended within 30s: %s (%v)", id, w.State, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
