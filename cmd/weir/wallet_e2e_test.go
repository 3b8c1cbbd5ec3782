package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The hot wallet runs dry under `weir serve`: the approved withdrawal
// waits (GET /v1/wallet says why, weir_sending_paused is 1), POST
// /sim/fund refills it, and the withdrawal pays without anyone touching it.
func TestServePausesSendingOnAnEmptyWalletAndResumesWhenFunded(t *testing.T) {
	p := startServe(t, "--sim-wallet-usdt", "5", "--wallet-interval", "50ms", "--wallet-low-usdt", "8")
	c := httpClient{t: t, base: p.httpURL}
	const id = "6d3c1f0a-7b2e-4d8a-9c11-2f4e5a6b7c80"
	c.approvedPayout(id, "dry-1", "10")
	var wallet map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, _, wallet = c.do("GET", "/v1/wallet", "dev-alice-token", "")
		if wallet["sending"] == "paused" {
			break
		}
		<-time.After(20 * time.Millisecond)
	}
	if why, _ := wallet["paused_reason"].(string); wallet["sending"] != "paused" || !strings.Contains(why, "USDT short") || wallet["usdt"] != "5" {
		t.Fatalf("wallet never paused for USDT: %v", wallet)
	}
	if _, _, w := c.do("GET", "/v1/withdrawals/"+id, "dev-alice-token", ""); w["state"] != "approved" || w["txid"] != nil {
		t.Fatalf("paused withdrawal: %v", w)
	}
	metrics := get(t, p.httpURL+"/metrics")
	for _, want := range []string{"weir_sending_paused 1", `weir_hot_wallet_balance{asset="USDT"} 5`, `weir_hot_wallet_low{asset="USDT"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	_, _, w := c.do("GET", "/v1/wallet", "dev-alice-token", "")
	resp, err := http.Post(p.tronURL+"/sim/fund", "application/json", strings.NewReader(`{"address":"`+w["address"].(string)+`","usdt":"100"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// approvedPayout credits acme 100 (credit creditID) and has alice request
// and bob approve a payout of amount under operation id.
func (c httpClient) approvedPayout(id, creditID, amount string) {
	c.t.Helper()
	if code, _, body := c.do("POST", "/v1/accounts/acme/credits", "dev-olivia-token", `{"credit_id":"`+creditID+`","amount":"100"}`); code != 201 {
		c.t.Fatalf("credit: %d %v", code, body)
	}
	req := `{"operation_id":"` + id + `","account":"acme","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"` + amount + `","asset":"USDT-TRC20"}`
	if code, _, body := c.do("POST", "/v1/withdrawals", "dev-alice-token", req); code != 201 {
		c.t.Fatalf("request: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 {
		c.t.Fatalf("approve: %d %v", code, body)
	}
}
