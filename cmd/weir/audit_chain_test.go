package main

import (
	"encoding/json"
	"math/big"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// TestAuditReconcilesTheChainBothWays runs `weir serve` (dev mode: the
// simulated node behind its java-tron HTTP API) as a real process, pays a
// withdrawal, and audits over HTTP: the chain side matches the payment,
// the expected genesis holds and another one is refused (exit 1, named on
// stderr); then the hot wallet's key pays on chain without weir, and the
// audit names that transfer and exits 1.
func TestAuditReconcilesTheChainBothWays(t *testing.T) {
	data := t.TempDir()
	p := startServe(t, "--data", data)
	c := httpClient{t: t, base: p.httpURL}
	const id = "7a2d3b4c-5e6f-4a70-8b91-a2b3c4d5e6f7"
	if code, _, body := c.do("POST", "/v1/accounts/acme/credits", "dev-olivia-token", `{"credit_id":"recon-1","amount":"100"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals", "dev-alice-token", `{"operation_id":"`+id+`","account":"acme","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"10","asset":"USDT-TRC20"}`); code != 201 {
		t.Fatalf("request: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 {
		t.Fatalf("approve: %d %v", code, body)
	}
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)

	node := tronhttp.New(tronhttp.Config{URL: p.tronURL})
	g, err := node.Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	auditArgs := func(extra ...string) []string {
		return append([]string{"audit", "--all", "--nats-url", p.natsURL, "--token", "dev-olivia-token",
			"--event-key", filepath.Join(data, "event.key"), "--tron-node", p.tronURL}, extra...)
	}

	code, out, errOut := runWeir(t, auditArgs("--expect-genesis", g.IDHex())...)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "clean audit", out, "chain identity: genesis "+g.IDHex()+": block 0 is the expected genesis and the blocks the log's envelopes were built on match",
		"USDT transfer(s), 1 matched, 0 unmatched", "OK: every check holds")

	code, out, errOut = runWeir(t, auditArgs("--expect-genesis", "mainnet")...)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "wrong genesis", out, "ANOTHER CHAIN", "[chain_identity]")
	wantContains(t, "wrong genesis stderr", errOut, "weir audit: not the expected chain: the node at "+p.tronURL+" serves the chain whose genesis block is "+g.IDHex()+", not the expected "+tron.MainnetGenesisID)

	// The hot wallet's key pays on chain, not through weir.
	signer, err := tron.NewKeySigner(devSigningKey[:])
	if err != nil {
		t.Fatal(err)
	}
	head, err := node.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := node.RefBlock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	env, err := tron.BuildTransfer(tron.TransferParams{Owner: signer.Address(), To: tron.MustParseAddress("TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"),
		Amount: big.NewInt(2_500_000), RefBlock: ref, Timestamp: head.Timestamp, Expiration: head.Timestamp + 60_000})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := tron.SignEnvelope(t.Context(), signer, env)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := node.Broadcast(t.Context(), tx); err != nil || !res.IsAccepted() {
		t.Fatalf("broadcast: %v %v", res, err)
	}
	var st tron.TxStatus
	for deadline := time.Now().Add(30 * time.Second); st.State != tron.TxIncluded; time.Sleep(20 * time.Millisecond) {
		if st, err = node.SolidLookup(t.Context(), tx.TxID()); err != nil || time.Now().After(deadline) {
			t.Fatalf("the outside payment never became solid: %v %v", st, err)
		}
	}

	code, out, errOut = runWeir(t, auditArgs()...)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "outside payment", out, "VIOLATION store [chain_side]: paid outside weir or log lost events: txid "+env.TxIDHex()+
		" in block "+itoa(uint64(st.BlockNumber))+" moved 2.5 USDT from hot wallet "+signer.Address().String(), "1 unmatched")

	code, out, errOut = runWeir(t, auditArgs("--json")...)
	wantCode(t, code, 1, out, errOut)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	u := rep.Chain.UnmatchedTransfers
	if len(u) != 1 || u[0].TxID != env.TxIDHex() || u[0].Block != st.BlockNumber || u[0].AmountUnits != "2500000" ||
		rep.Chain.Matched != 1 || rep.Chain.CheckedBlocks == 0 || !rep.Chain.TwoSided || !strings.Contains(out, `"chain_checked_blocks"`) {
		t.Fatalf("chain side in --json: %+v", rep.Chain)
	}
}

// TestAuditRefusesABadChainRange: flags that name no block range, no
// genesis id or no address are usage errors, not audits.
func TestAuditRefusesABadChainRange(t *testing.T) {
	for _, args := range [][]string{
		{"--from-block", "10", "--to-block", "5"},
		{"--from-block", "-1"},
		{"--expect-genesis", "00ff"},
		{"--hot-wallet", "not-an-address"},
		{"--max-chain-blocks", "-1"},
	} {
		code, out, errOut := runWeir(t, append([]string{"audit", "--all", "--nats-url", "nats://127.0.0.1:1"}, args...)...)
		wantCode(t, code, 2, out, errOut)
		wantContains(t, strings.Join(args, " "), errOut, "weir audit: "+args[0])
	}
}

// TestAuditRequireChainExitsThreeWhenTheChainCannotBeChecked: without a
// violation, --require-chain turns "chain unavailable" (a note, exit 0)
// into exit 3 naming why: an unreachable node, a chain side that scanned
// nothing; a full scan exits 0.
func TestAuditRequireChainExitsThreeWhenTheChainCannotBeChecked(t *testing.T) {
	s := newStack(t, false)
	if _, _, err := s.intake.Credit(t.Context(), sagas.CreditInput{Account: "acme", CreditID: "seed", Amount: json.RawMessage(`"100"`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.intake.Request(t.Context(), sagas.RequestInput{OperationID: uuid.NewString(), Account: "acme", ToAddress: cliTestAddr, Amount: json.RawMessage(`"10"`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	sim := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	sim.Advance(30)
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	t.Cleanup(srv.Close)

	code, out, errOut := s.weir(t, "audit", "--all", "--tron-node", "http://127.0.0.1:1", "--node-timeout", "2s")
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "http://127.0.0.1:1", "--node-timeout", "2s", "--require-chain")
	wantCode(t, code, 3, out, errOut)
	wantContains(t, "unreachable", errOut, "weir audit: chain unavailable: tron node http://127.0.0.1:1 unreachable")

	// The log names no block and no hot wallet: the chain side scans nothing.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", srv.URL, "--require-chain")
	wantCode(t, code, 3, out, errOut)
	wantContains(t, "nothing scanned", errOut, "weir audit: chain unavailable: chain side: no hot wallet known")
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", srv.URL, "--require-chain", "--from-block", "1", "--hot-wallet", cliTestAddr)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "full scan", out, "chain side: blocks 1..", "0 USDT transfer(s)")
	// Through a rate limit (what a hosted node wants): the same scan.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", srv.URL, "--require-chain", "--from-block", "1", "--hot-wallet", cliTestAddr, "--node-rps", "5000")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "limited scan", out, "chain side: blocks 1..", "0 USDT transfer(s)")
	// A range longer than --max-chain-blocks is not scanned, and says so.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", srv.URL, "--require-chain", "--from-block", "1", "--hot-wallet", cliTestAddr, "--max-chain-blocks", "5")
	wantCode(t, code, 3, out, errOut)
	wantContains(t, "bounded", errOut, "blocks, more than the 5 allowed (--max-chain-blocks): chain side not checked")

	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "", "--require-chain")
	wantCode(t, code, 2, out, errOut)
}
