package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas/notify"
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

	fundHotWallet(c, p, "100")
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)
}

// fundHotWallet adds usdt to the hot wallet through the simulated node's
// POST /sim/fund.
func fundHotWallet(c httpClient, p *servedProcess, usdt string) {
	c.t.Helper()
	_, _, w := c.do("GET", "/v1/wallet", "dev-alice-token", "")
	resp, err := http.Post(p.tronURL+"/sim/fund", "application/json", strings.NewReader(`{"address":"`+w["address"].(string)+`","usdt":"`+usdt+`"}`))
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
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

// The same run as an operator's NATS consumer sees it on WEIR_NOTIFY: the
// USDT low mark crossed (at the first reading), sending paused (the
// withdrawal held back), and after the refill the mark recovered and
// sending resumed — each once, while the wallet is read every 50 ms.
func TestServeAnnouncesTheWalletOnWEIR_NOTIFY(t *testing.T) {
	p := startServe(t, "--sim-wallet-usdt", "5", "--wallet-interval", "50ms", "--wallet-low-usdt", "8")
	c := httpClient{t: t, base: p.httpURL}
	nc, err := nats.Connect(p.natsURL, nats.Token("dev-olivia-token"), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A consumer under a name the principal owns (natsauth.NotifyConsumerNames).
	cons, err := js.CreateOrUpdateConsumer(t.Context(), notify.Stream, jetstream.ConsumerConfig{Durable: "olivia",
		FilterSubjects: []string{notify.WalletSubjectPrefix + ".>"}, AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	next := func() (string, notify.WalletNotification) {
		t.Helper()
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("waiting for a wallet notification: %v", err)
		}
		var n notify.WalletNotification
		if err := json.Unmarshal(m.Data(), &n); err != nil {
			t.Fatal(err)
		}
		return m.Subject(), n
	}
	if subj, n := next(); subj != "weir.notify.wallet.usdt.low" || n.Type != "wallet.low" || n.Asset != "USDT" || n.LowMark != "8" || n.Wallet.USDT != "5" {
		t.Fatalf("first wallet notification %s %+v", subj, n)
	}
	const id = "6d3c1f0a-7b2e-4d8a-9c11-2f4e5a6b7c81"
	c.approvedPayout(id, "dry-2", "10")
	subj, n := next()
	if subj != "weir.notify.wallet.sending.paused" || n.Wallet.PausedReason == nil || !strings.Contains(*n.Wallet.PausedReason, "USDT short") {
		t.Fatalf("second wallet notification %s %+v", subj, n)
	}
	fundHotWallet(c, p, "100")
	c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)
	got := map[string]bool{}
	for range 2 {
		subj, _ := next()
		got[subj] = true
	}
	if !got["weir.notify.wallet.usdt.recovered"] || !got["weir.notify.wallet.sending.resumed"] {
		t.Fatalf("after the refill: %v", got)
	}
	if m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond)); err == nil {
		t.Fatalf("one more wallet notification: %s %s", m.Subject(), m.Data())
	}
}
