package api_test

import (
	"context"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

func TestWalletIsReadableByEveryAuthenticatedPrincipalAndSaysWhySendingPauses(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	sim.SetBalance(hotWallet, mustUnits(t, "25"))
	sim.SetTRX(hotWallet, 300*tron.SunPerTRX)
	mon, err := hotwallet.New(hotwallet.Config{Reader: sim, Address: hotWallet, FeeLimit: 100 * tron.SunPerTRX})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{wallet: mon})

	// Not a secret and not an act: every role may look, nobody anonymous.
	for _, tok := range []string{tokAlice, tokBob, tokDave, tokOlivia, tokRia, tokAbe} {
		r := e.do(t, "GET", "/v1/wallet", tok, nil)
		wantStatus(t, r, http.StatusOK)
		m := r.json(t)
		for _, k := range []string{"address", "usdt", "trx", "energy", "bandwidth", "sending", "paused_reason"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("GET /v1/wallet lacks %q: %s", k, r.body)
			}
		}
		if m["address"] != hotWallet.String() || m["usdt"] != "25" || m["trx"] != "300" || m["sending"] != "active" || m["paused_reason"] != nil {
			t.Fatalf("wallet %s", r.body)
		}
	}
	wantErr(t, e.do(t, "GET", "/v1/wallet", "", nil), http.StatusUnauthorized, "unauthenticated", "")
	wantErr(t, e.do(t, "GET", "/v1/wallet", "not-a-token-at-all", nil), http.StatusUnauthorized, "unauthenticated", "")

	// The gate refuses a payout the wallet cannot make: the reply says why.
	if ok, _ := mon.MaySend(context.Background(), aggregate.Withdrawal{Amount: aggregate.MustParseAmount(aggregate.USDT, "40")}); ok {
		t.Fatal("40 USDT let through from 25")
	}
	r := e.do(t, "GET", "/v1/wallet", tokDave, nil)
	wantStatus(t, r, http.StatusOK)
	m := r.json(t)
	if why, _ := m["paused_reason"].(string); m["sending"] != "paused" || !strings.Contains(why, "USDT short") {
		t.Fatalf("paused wallet: %s", r.body)
	}
}

func TestWalletIsNotFoundWhenNoWalletIsWatched(t *testing.T) {
	e := newEnv(t)
	wantErr(t, e.do(t, "GET", "/v1/wallet", tokAlice, nil), http.StatusNotFound, "not_found", "")
}

func mustUnits(t *testing.T, s string) *big.Int {
	t.Helper()
	v, err := tron.ParseUnits(s, tron.USDTDecimals)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
