package main

import (
	"context"
	"encoding/hex"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

func TestFeeLimitIsTRXAboveZeroAndAtMostMainnetsMaximum(t *testing.T) {
	for in, want := range map[string]int64{"": 100_000_000, "100": 100_000_000, "0.5": 500_000, "15000": 15_000_000_000} {
		if got, err := feeLimitSun(in); err != nil || got != want {
			t.Errorf("--fee-limit %q = %d, %v; want %d sun", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "15000.000001", "1e3", "0.0000001", "lots"} {
		if got, err := feeLimitSun(in); err == nil {
			t.Errorf("--fee-limit %q = %d, want refused", in, got)
		}
	}
}

// --fee-limit reaches every envelope (and no envelope carries a memo);
// --sim-wallet-usdt/--sim-wallet-trx fund the hot wallet, the transfer's
// fee is burnt from its TRX, and POST /sim/fund refills it — all seen
// through the façade with the same client a real node would get.
func TestServeFeeLimitAndSimWalletFlagsReachTheChain(t *testing.T) {
	p := startServe(t, "--fee-limit", "30", "--sim-wallet-usdt", "20", "--sim-wallet-trx", "50")
	c := httpClient{t: t, base: p.httpURL}
	const id = "3b0f8f2e-55d1-4c7e-9a55-0d6f3f0c2a11"
	c.approvedPayout(id, "fees-1", "10")
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)

	_, _, evs := c.do("GET", "/v1/withdrawals/"+id+"/events", "dev-alice-token", "")
	var env map[string]any
	for _, e := range evs["events"].([]any) {
		ev := e.(map[string]any)
		if typ, _ := ev["type"].(string); strings.HasSuffix(typ, "envelope_built") {
			env, _ = ev["data"].(map[string]any)["envelope"].(map[string]any)
		}
	}
	if env == nil || env["fee_limit"] != float64(30*tron.SunPerTRX) {
		t.Fatalf("envelope %v: want fee_limit 30 TRX", env)
	}
	raw, _ := hex.DecodeString(env["raw_data_hex"].(string))
	if r, err := tron.DecodeRaw(raw); err != nil || len(r.Data) != 0 || r.FeeLimit != 30*tron.SunPerTRX {
		t.Fatalf("raw data %+v, %v: want no memo and the fee limit", r, err)
	}

	signer, err := tron.NewKeySigner(devSigningKey[:])
	if err != nil {
		t.Fatal(err)
	}
	wallet := signer.Address()
	node := tronhttp.NewHTTPNode(p.tronURL, &http.Client{Timeout: 10 * time.Second})
	ctx := context.Background()
	txid, _ := tron.ParseTxID(env["txid"].(string))
	st, err := node.Lookup(ctx, txid)
	if err != nil || !st.Succeeded() || st.FeeSun != tron.SimTransferEnergyNewHolder*tron.SimEnergyPriceSun {
		t.Fatalf("receipt %+v, %v: want SUCCESS burning %d sun", st, err, tron.SimTransferEnergyNewHolder*tron.SimEnergyPriceSun)
	}
	acct, err := node.Account(ctx, wallet)
	if err != nil || acct.BalanceSun != 50*tron.SunPerTRX-st.FeeSun {
		t.Fatalf("hot wallet %+v, %v: want 50 TRX less the fee", acct, err)
	}
	if bal, err := node.TokenBalance(ctx, tron.USDTContract, wallet); err != nil || bal.Cmp(big.NewInt(10_000_000)) != 0 {
		t.Fatalf("hot wallet USDT %v, %v; want 20 − 10", bal, err)
	}
	resp, err := http.Post(p.tronURL+"/sim/fund", "application/json", strings.NewReader(`{"address":"`+wallet.String()+`","usdt":"5"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if bal, err := node.TokenBalance(ctx, tron.USDTContract, wallet); resp.StatusCode != 200 || err != nil || bal.Cmp(big.NewInt(15_000_000)) != 0 {
		t.Fatalf("after /sim/fund: %d, %v, %v; want 15 USDT", resp.StatusCode, bal, err)
	}
}
