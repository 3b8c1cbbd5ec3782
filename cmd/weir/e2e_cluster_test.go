package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// TestTwoServeProcessesShareOneNATS runs two `weir serve` processes against
// one external NATS server (the reference config) and one chain node, each with its own workers, and pays a
// batch of withdrawals: every withdrawal is confirmed exactly once, with one
// envelope, and the account settles to the cent. The processes share
// nothing but NATS: claims fenced by optimistic appends keep their workers
// apart.
func TestTwoServeProcessesShareOneNATS(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "hot.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(devSigningKey[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	// Both processes sign and verify events with the same key.
	eventKey := filepath.Join(t.TempDir(), "event.key")
	if err := os.WriteFile(eventKey, []byte("k1 "+strings.Repeat("5e", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The shared NATS is an external server running the reference config
	// (docs/nats-server.conf); both processes log in as its weir user.
	url := startReferenceNATS(t)
	login := []string{"--nats-url", url, "--nats-user", "weir", "--nats-password", refWeirPassword}
	a := startServe(t, append([]string{"--workers", "2", "--signing-key", keyFile, "--event-key", eventKey}, login...)...)
	// B uses A's simulated node as a real one: no dev mode there.
	principals, custody := devFlagFiles(t)
	b := startServe(t, append([]string{"--workers", "2", "--signing-key", keyFile, "--event-key", eventKey, "--tron-node", a.tronURL, "--tron-http", "",
		"--principals", principals, "--custody", custody, "--policy-quorum", "1"}, login...)...) // the same configuration as A, or B refuses to start (drift)
	ca := httpClient{t: t, base: a.httpURL}
	cb := httpClient{t: t, base: b.httpURL}

	// Enough for every round: 24 × 12.5 = 300 per round.
	const n, maxRounds = 24, 4
	if code, _, body := ca.do("POST", "/v1/accounts/pool/credits", "dev-olivia-token", `{"credit_id":"seed","amount":"1200"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	txids := map[string]string{}
	claimers := map[string]int{}
	// Worker ids are <host>-<pid>-w<n>: both processes must have taken
	// work, or this test would not have raced them at all. A worker takes
	// many withdrawals at once, so one process can take a whole batch:
	// pay batches until both have claimed, at most maxRounds of them.
	byProcess := map[string]int{}
	rounds := 0
	for rounds < maxRounds && len(byProcess) < 2 {
		payBatch(t, ca, cb, rounds, n, txids, claimers)
		rounds++
		clear(byProcess)
		for worker, n := range claimers {
			byProcess[worker[:strings.LastIndex(worker, "-")]] += n
		}
	}
	t.Logf("claims by worker after %d round(s): %v", rounds, claimers)
	if len(byProcess) != 2 {
		t.Fatalf("claims by process %v after %d rounds: want both processes to have claimed", byProcess, rounds)
	}
	// The account settles to the cent: 12.5 for each withdrawal paid out.
	paid := decimal.NewFromInt(int64(rounds * n)).Mul(decimal.RequireFromString("12.5"))
	want := map[string]string{"settled": paid.String(), "reserved": "0", "available": decimal.NewFromInt(1200).Sub(paid).String()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, acct := cb.do("GET", "/v1/accounts/pool", "dev-alice-token", "")
		if acct["settled"] == want["settled"] && acct["reserved"] == want["reserved"] && acct["available"] == want["available"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("balance: %v, want %v", acct, want)
		}
		<-time.After(20 * time.Millisecond) // the ledger saga settles asynchronously
	}
}

// payBatch requests and approves n withdrawals of 12.5 from pool, half of
// them at each process, waits until each is confirmed, and checks that each
// was paid once: attempt 1, its own txid, one envelope. It counts the
// claims by worker into claimers.
func payBatch(t *testing.T, ca, cb httpClient, round, n int, txids map[string]string, claimers map[string]int) {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("11111111-2222-4333-8%03d-%012d", round, i+1)
		c := ca
		if i%2 == 1 {
			c = cb // requests arrive at both processes
		}
		body := `{"operation_id":"` + ids[i] + `","account":"pool","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"12.5"}`
		if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", body); code != 201 {
			t.Fatalf("request %d: %d %v", i, code, w)
		}
		if code, _, w := c.do("POST", "/v1/withdrawals/"+ids[i]+"/approve", "dev-bob-token", ""); code != 200 {
			t.Fatalf("approve %d: %d %v", i, code, w)
		}
	}
	for _, id := range ids {
		w := ca.waitForState(id, "dev-alice-token", "confirmed", 90*time.Second)
		if w["attempt"] != float64(1) {
			t.Errorf("%s: attempt %v, want 1 (no rebuild without faults)", id, w["attempt"])
		}
		txid, _ := w["txid"].(string)
		if other, dup := txids[txid]; dup || txid == "" {
			t.Fatalf("txid %q of %s also used by %s", txid, id, other)
		}
		txids[txid] = id
		_, _, evs := cb.do("GET", "/v1/withdrawals/"+id+"/events", "dev-alice-token", "")
		built := 0
		for _, e := range evs["events"].([]any) {
			// A claim is its own event, or travels in the envelope's write-ahead.
			if data, _ := e.(map[string]any)["data"].(map[string]any); data != nil && data["worker"] != nil &&
				(e.(map[string]any)["type"] == "withdrawal.claimed" || e.(map[string]any)["type"] == "withdrawal.envelope_built") {
				worker, _ := data["worker"].(string)
				claimers[worker]++
			}
			if typ := e.(map[string]any)["type"].(string); strings.HasSuffix(typ, "envelope_built") || strings.HasSuffix(typ, "rebuilt") {
				built++
			}
		}
		if built != 1 {
			t.Errorf("%s: %d envelopes written, want 1", id, built)
		}
	}
}
