package tronhttp_test

import (
	"context"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

var (
	walletOwner = tron.MustParseAddress("TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC")
	walletPayee = tron.MustParseAddress("TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY")
)

// Answers in java-tron's own shapes (mainnet, visible=false), as the
// client must read them from a real node.
var javaTronAnswers = map[string]func(body string) string{
	"/wallet/triggerconstantcontract": func(body string) string {
		if strings.Contains(body, "balanceOf") {
			return `{"result":{"result":true},"energy_used":535,"constant_result":["00000000000000000000000000000000000000000000000000000002540be400"],"transaction":{"ret":[{}],"visible":false,"txID":"ab"}}`
		}
		// transfer: the owner's USDT is short → REVERT, message as hex.
		return `{"result":{"result":true,"message":"524556455254206f70636f6465206578656375746564"},"energy_used":1024,"constant_result":[""],"transaction":{"ret":[{"ret":"FAILED"}],"txID":"cd"}}`
	},
	"/wallet/getaccount": func(string) string {
		return `{"address":"` + walletOwner.Hex() + `","balance":123456789,"create_time":1600000000000,"net_window_size":28800000,"account_resource":{"energy_window_size":28800000},"frozenV2":[{},{"type":"ENERGY"}]}`
	},
	"/wallet/getaccountresource": func(string) string {
		return `{"freeNetUsed":345,"freeNetLimit":600,"NetLimit":1200,"TotalNetLimit":43200000000,"TotalNetWeight":26400000000,"EnergyUsed":10000,"EnergyLimit":90000,"TotalEnergyLimit":180000000000,"TotalEnergyWeight":19500000000}`
	},
	"/wallet/getchainparameters": func(string) string {
		return `{"chainParameter":[{"key":"getMaintenanceTimeInterval","value":21600000},{"key":"getTransactionFee","value":1000},{"key":"getAllowUpdateAccountName"},{"key":"getEnergyFee","value":210},{"key":"getMemoFee","value":1000000}]}`
	},
	"/walletsolidity/getblockbynum": func(body string) string {
		if strings.Contains(body, `"num":0`) {
			// Mainnet's genesis: no number, no timestamp (both zero).
			return `{"blockID":"` + tron.MainnetGenesisID + `","block_header":{"raw_data":{"txTrieRoot":"0000000000000000000000000000000000000000000000000000000000000000","parentHash":"957dc2d350daecc7bb6a38f3938ebde0a0c1cedafe15f0edae4256a2907449f6"},"witness_signature":""},"transactions":[{"ret":[{"contractRet":"SUCCESS"}],"txID":"` + strings.Repeat("1", 64) + `","raw_data":{"contract":[{"parameter":{"value":{"amount":1000000,"owner_address":"` + walletOwner.Hex() + `","to_address":"` + walletPayee.Hex() + `"},"type_url":"type.googleapis.com/protocol.TransferContract"},"type":"TransferContract"}],"ref_block_bytes":"","ref_block_hash":"","expiration":0}}]}`
		}
		// A block with one USDT transfer rendered without raw_data_hex
		// (older nodes), one TRX transfer, and a reverted USDT transfer.
		call := "a9059cbb000000000000000000000000" + walletPayee.Hex()[2:] + "00000000000000000000000000000000000000000000000000000000000f4240"
		trigger := func(txid, ret string) string {
			return `{"ret":[{"contractRet":"` + ret + `"}],"txID":"` + txid + `","raw_data":{"contract":[{"parameter":{"value":{"data":"` + call + `","owner_address":"` + walletOwner.Hex() + `","contract_address":"` + tron.USDTContract.Hex() + `"},"type_url":"type.googleapis.com/protocol.TriggerSmartContract"},"type":"TriggerSmartContract"}],"ref_block_bytes":"1d7f","ref_block_hash":"0011223344556677","expiration":1735000060000,"fee_limit":100000000,"timestamp":1735000000000}}`
		}
		return `{"blockID":"00000000042c1d80aabbccddeeff00112233445566778899aabbccddeeff0011","block_header":{"raw_data":{"number":70000000,"timestamp":1735000003000,"parentHash":"00000000042c1d7faabbccddeeff00112233445566778899aabbccddeeff0011"}},"transactions":[` +
			trigger(strings.Repeat("a", 64), "SUCCESS") + `,` +
			`{"ret":[{"contractRet":"SUCCESS"}],"txID":"` + strings.Repeat("b", 64) + `","raw_data":{"contract":[{"parameter":{"value":{"amount":5,"owner_address":"` + walletOwner.Hex() + `","to_address":"` + walletPayee.Hex() + `"},"type_url":"type.googleapis.com/protocol.TransferContract"},"type":"TransferContract"}]}},` +
			trigger(strings.Repeat("c", 64), "REVERT") + `]}`
	},
}

// The wallet and chain calls read java-tron's real shapes, send the API
// key, and send nothing internal: no worker header, and never a /sim/
// path (those exist only on weir's simulated node).
func TestWalletCallsReadJavaTronShapesAndSendNothingInternal(t *testing.T) {
	const key = "k-123"
	ctx := tron.WithWorker(context.Background(), "worker-3")
	rec := recorder{answer: func(_ int, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		answer, ok := javaTronAnswers[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, answer(string(body)))
	}}
	c := tronhttp.New(tronhttp.Config{URL: rec.serve(t), APIKey: key})

	if bal, err := c.TokenBalance(ctx, tron.USDTContract, walletOwner); err != nil || bal.Cmp(big.NewInt(10_000_000_000)) != 0 {
		t.Fatalf("balanceOf: %v, %v; want 10000000000", bal, err)
	}
	if e, err := c.EstimateTransferEnergy(ctx, walletOwner, tron.USDTContract, walletPayee, big.NewInt(1)); !errors.Is(err, tron.ErrCallFailed) || !strings.Contains(err.Error(), "REVERT opcode executed") {
		t.Fatalf("reverting estimate: %d, %v; want ErrCallFailed saying REVERT", e, err)
	}
	acct, err := c.Account(ctx, walletOwner)
	want := tron.Account{Address: walletOwner, Exists: true, BalanceSun: 123456789, EnergyLimit: 90000, EnergyUsed: 10000,
		FreeNetLimit: 600, FreeNetUsed: 345, NetLimit: 1200}
	if err != nil || acct != want {
		t.Fatalf("account %+v, %v; want %+v", acct, err, want)
	}
	if p, err := c.ChainPrices(ctx); err != nil || p != (tron.ChainPrices{EnergySun: 210, BandwidthSun: 1000, MemoSun: 1_000_000}) {
		t.Fatalf("prices %+v, %v", p, err)
	}
	if g, err := c.Genesis(ctx); err != nil || g.IDHex() != tron.MainnetGenesisID || g.Number != 0 {
		t.Fatalf("genesis %+v, %v; want mainnet's", g, err)
	}
	got, err := c.SolidBlockTransfers(ctx, 70_000_000)
	if err != nil || len(got) != 2 {
		t.Fatalf("transfers %+v, %v; want the two USDT transfers", got, err)
	}
	for i, r := range []tron.ReceiptResult{tron.ReceiptSuccess, tron.ReceiptRevert} {
		g := got[i]
		if g.From != walletOwner || g.To != walletPayee || g.Contract != tron.USDTContract || g.Amount.Int64() != 1_000_000 ||
			g.Receipt != r || g.BlockNumber != 70_000_000 || g.BlockTime != 1735000003000 {
			t.Fatalf("transfer %d: %+v", i, g)
		}
	}

	paths, headers := rec.seen()
	for i, h := range headers {
		if strings.HasPrefix(paths[i], "/sim/") {
			t.Fatalf("the client called %s on a real node", paths[i])
		}
		if v := h.Get(tronhttp.WorkerHeader); v != "" {
			t.Fatalf("%s sent %s: %q to a third-party node", paths[i], tronhttp.WorkerHeader, v)
		}
		if h.Get(tronhttp.APIKeyHeader) != key {
			t.Fatalf("%s without the API key", paths[i])
		}
	}
}

// A node that is not the chain it claims: a block 0 whose id does not
// start with block number 0 is no genesis.
func TestGenesisWithoutABlockZeroIDIsABadResponse(t *testing.T) {
	c := stubPaths(t, map[string]string{"/walletsolidity/getblockbynum": `{"blockID":"00000000042c1d80aabbccddeeff00112233445566778899aabbccddeeff0011","block_header":{"raw_data":{"number":70000000,"timestamp":1}}}`})
	if g, err := c.Genesis(context.Background()); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("genesis %+v, %v; want ErrBadResponse", g, err)
	}
}

// POST /sim/fund credits the simulated chain and is the only way to; it
// refuses other methods and amounts that are not amounts.
func TestSimFundCreditsOnlyByPOSTAndRefusesNonAmounts(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{})
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	defer srv.Close()
	addr := walletOwner.String()

	status, out := postJSON(t, srv.URL+"/sim/fund", `{"address":"`+addr+`","usdt":"12.5","trx":40}`)
	if status != http.StatusOK || out["usdt"] != "12.5" || out["trx"] != "40" || out["address"] != addr {
		t.Fatalf("fund: %d %v", status, out)
	}
	if status, out = postJSON(t, srv.URL+"/sim/fund", `{"address":"`+addr+`","usdt":"0.5"}`); status != http.StatusOK || out["usdt"] != "13" {
		t.Fatalf("second credit: %d %v; want the balances to add up", status, out)
	}
	if sim.Balance(walletOwner).Int64() != 13_000_000 || sim.TRX(walletOwner) != 40*tron.SunPerTRX {
		t.Fatalf("chain holds %v USDT units, %d sun", sim.Balance(walletOwner), sim.TRX(walletOwner))
	}
	for name, body := range map[string]string{
		"negative":         `{"address":"` + addr + `","usdt":"-1"}`,
		"too precise":      `{"address":"` + addr + `","trx":"0.0000001"}`,
		"not a number":     `{"address":"` + addr + `","usdt":"lots"}`,
		"bad address":      `{"address":"Tnotanaddress","usdt":"1"}`,
		"TRX beyond int64": `{"address":"` + addr + `","trx":"99999999999999999999"}`,
	} {
		if status, out := postJSON(t, srv.URL+"/sim/fund", body); status != http.StatusBadRequest || out["Error"] == nil {
			t.Errorf("%s: %d %v; want 400 with an Error", name, status, out)
		}
	}
	resp, err := http.Get(srv.URL + "/sim/fund?address=" + addr + "&usdt=1000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || sim.Balance(walletOwner).Int64() != 13_000_000 {
		t.Fatalf("GET /sim/fund: %d, balance %v; want 405 and nothing credited", resp.StatusCode, sim.Balance(walletOwner))
	}
	// What the façade then says, in java-tron's shapes.
	_, acct := postJSON(t, srv.URL+"/wallet/getaccount", `{"address":"`+walletOwner.Hex()+`"}`)
	if acct["balance"] != float64(40*tron.SunPerTRX) || acct["address"] != walletOwner.Hex() {
		t.Fatalf("getaccount %v", acct)
	}
	if _, none := postJSON(t, srv.URL+"/wallet/getaccount", `{"address":"`+walletPayee.Hex()+`"}`); len(none) != 0 {
		t.Fatalf("getaccount of an unknown address %v, want {}", none)
	}
	if _, none := postJSON(t, srv.URL+"/wallet/getaccountresource", `{"address":"`+walletPayee.Hex()+`"}`); len(none) != 0 {
		t.Fatalf("getaccountresource of an unknown address %v, want {}", none)
	}
}
