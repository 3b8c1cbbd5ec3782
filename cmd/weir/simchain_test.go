package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// devRestartConfig is dev-mode `weir serve` on file storage, the simulated
// node served over HTTP (for `weir audit --tron-node`).
func devRestartConfig(dir string) serveConfig {
	return serveConfig{
		Data: dir, HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "always", Workers: 1,
		TronHTTP: "127.0.0.1:0", SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
	}
}

// creditAndRequest credits account "keep" with 100 and requests withdrawal
// id of 30 from it (reserved, awaiting one approval); it returns the
// request's body.
func creditAndRequest(c httpClient, id string) string {
	c.t.Helper()
	if code, _, body := c.do("POST", "/v1/accounts/keep/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"100"}`); code != 201 {
		c.t.Fatalf("credit: %d %v", code, body)
	}
	body := `{"operation_id":"` + id + `","account":"keep","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"30"}`
	if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", body); code != 201 || w["reserved"] != true {
		c.t.Fatalf("request: %d %v", code, w)
	}
	return body
}

// auditAll runs `weir audit --all --json` as the dev operator against eng.
func auditAll(t *testing.T, eng *engine) (int, audit.Report) {
	t.Helper()
	code, out, errOut := runWeir(t, "audit", "--all", "--json", "--nats-url", eng.natsURL, "--token", "dev-olivia-token", "--tron-node", eng.tronURL)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit --json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	return code, rep
}

// TestSimChainSurvivesADevRestartSoTheAuditStillFindsThePayment: dev-mode
// serve pays a withdrawal, stops, and starts again on the same --data: the
// simulated chain is the same chain (the txid is still on it, same block,
// SUCCESS), so `weir audit --all` checks the payment against it and exits
// 0 with nothing "unavailable". Deleting simchain.json is the documented
// reset: the next start makes a new chain, which no longer vouches for the
// payment. A corrupt file is refused, naming it, and left as it was.
func TestSimChainSurvivesADevRestartSoTheAuditStillFindsThePayment(t *testing.T) {
	dir := t.TempDir()
	cfg := devRestartConfig(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	const id = "5e0b7c1a-1111-4222-8333-00000000c4a1"

	eng, err := startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	creditAndRequest(c, id)
	if code, _, w := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 {
		t.Fatalf("approve: %d %v", code, w)
	}
	w := c.waitForState(id, "dev-alice-token", "confirmed", 30*time.Second)
	txid, err := tron.ParseTxID(w["txid"].(string))
	if err != nil {
		t.Fatal(err)
	}
	before, ok := eng.sim.TransferByTxID(txid)
	if !ok || before.Receipt != tron.ReceiptSuccess {
		t.Fatalf("paid txid on the chain: %+v %v", before, ok)
	}
	genesis := eng.sim.CurrentHead()
	if err := eng.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	path := filepath.Join(dir, simChainFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want a 0600 file", path, fi, err)
	}

	// Restart on the same --data: the same chain.
	eng, err = startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	after, ok := eng.sim.TransferByTxID(txid)
	if !ok || after.BlockNumber != before.BlockNumber || after.Receipt != before.Receipt || after.Amount.Cmp(before.Amount) != 0 {
		t.Fatalf("after restart the txid is %+v %v, was %+v", after, ok, before)
	}
	if h := eng.sim.CurrentHead(); h.Number < genesis.Number {
		t.Fatalf("head went back from %d to %d", genesis.Number, h.Number)
	}
	// The same chain: the same genesis, which the first start recorded in
	// the log's configuration and this one found again.
	cs, err := eng.repo.ConfigLatest(ctx)
	recorded, recordedVersion := cs.Config.ChainGenesis, cs.Version
	if err != nil || recorded == "" || recorded != genesisID(t, eng) {
		t.Fatalf("configuration after a dev restart: %+v %v; node genesis %s", cs, err, genesisID(t, eng))
	}
	code, rep := auditAll(t, eng)
	if code != 0 || !rep.OK || !rep.Chain.Checked || rep.Chain.TxIDs < 1 || rep.Chain.Unavailable != 0 || rep.Chain.LookupErrors != 0 ||
		rep.Chain.LogGenesis != recorded || !strings.HasPrefix(rep.Chain.Identity, "log genesis") {
		t.Fatalf("audit after a dev restart: exit %d, ok %v, chain %+v, violations %+v", code, rep.OK, rep.Chain, rep.Violations)
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The reset: delete the file, and the chain starts over — a new chain
	// (its own genesis), which the log does not record: refused, naming
	// both chains and the flags, until the operator publishes it.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eng, err = startEngine(ctx, cfg, log, io.Discard)
	if err == nil {
		_ = eng.Close(ctx)
		t.Fatal("dev mode started on a new simulated chain over a log of another one")
	}
	if !errors.Is(err, sagas.ErrChainMismatch) || !strings.Contains(err.Error(), recorded) || !strings.Contains(err.Error(), "--tron-node") ||
		!strings.Contains(err.Error(), "--publish-config") || !strings.Contains(err.Error(), path) {
		t.Fatalf("refusal on a new chain: %v", err)
	}
	reset := cfg
	reset.PublishConfig = true
	eng, err = startEngine(ctx, reset, log, io.Discard)
	if err != nil {
		t.Fatalf("start after the reset with --publish-config: %v", err)
	}
	if cs, err := eng.repo.ConfigLatest(ctx); err != nil || cs.Version != recordedVersion+1 || cs.Config.ChainGenesis == recorded || cs.Config.ChainGenesis != genesisID(t, eng) {
		t.Fatalf("after --publish-config: %+v %v, want v%d recording the new chain (not %s)", cs, err, recordedVersion+1, recorded)
	}
	if _, ok := eng.sim.TransferByTxID(txid); ok {
		t.Fatal("a new chain holds the old txid")
	}
	// The new chain cannot vouch for the payment: the audit says "chain
	// unavailable" when the payment predates the chain's genesis (three
	// seconds before its start), and a violation when the restart came
	// sooner than that, as it may in this test.
	code, rep = auditAll(t, eng)
	if code == 0 && rep.Chain.Unavailable != 1 {
		t.Fatalf("audit on a new chain: exit %d, chain %+v", code, rep.Chain)
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A corrupt file: refused by name, not replaced.
	corrupt := []byte(`{"format":1,"start_number":`)
	if err := os.WriteFile(path, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	eng, err = startEngine(ctx, cfg, log, io.Discard)
	if err == nil {
		_ = eng.Close(ctx)
		t.Fatal("serve started over a corrupt simulated chain")
	}
	if !errors.Is(err, tron.ErrSimStateUnreadable) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete "+path) {
		t.Fatalf("refusal: %v; want it to name %s and how to reset", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != string(corrupt) {
		t.Fatalf("the corrupt file was rewritten: %q", got)
	}
}

// TestSimSaverKeepsTheFileUpToDateWhileServing: between start and
// shutdown the saver writes the chain's changes by itself (a crash loses
// only the last moments), and writes nothing while nothing changes.
func TestSimSaverKeepsTheFileUpToDateWhileServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), simChainFile)
	sim := tron.NewSimNode(tron.SimConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runSimSaver(ctx, sim, path, 0, 20*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })

	want := sim.Advance(3).Number
	deadline := time.Now().Add(10 * time.Second)
	for {
		if loaded, err := tron.LoadSimNodeFile(path, tron.SimConfig{}); err == nil && loaded.CurrentHead().Number == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the saver did not write head %d within 10 s", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	// Nothing changes: the file is not rewritten (ten more ticks).
	time.Sleep(200 * time.Millisecond)
	if fi2, err := os.Stat(path); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("rewritten while nothing changed: %v %v", fi2, err)
	}
}

// genesisID is the genesis block id of the chain eng's node serves.
func genesisID(t *testing.T, eng *engine) string {
	t.Helper()
	g, err := eng.node.(tron.ChainReader).Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return g.IDHex()
}
