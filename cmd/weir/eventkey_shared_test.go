package main

import (
	"testing"
	"time"

	"github.com/weir-payouts/weir/eventstore"
)

// TestServeProcessesOnOneNATSWithoutAnEventKeyShareOneKey: two engines on
// one external NATS (the reference config), neither given --event-key, sign
// with the same key (kept in the WEIR_KEYS bucket): a credit written
// through one is read by the other with no event quarantined, and the other
// way round.
func TestServeProcessesOnOneNATSWithoutAnEventKeyShareOneKey(t *testing.T) {
	url := startReferenceNATS(t)
	a, b := startReferenceEngine(t, url), startReferenceEngine(t, url)
	ka, _ := a.storeCfg.Sealer.(*eventstore.Keyring)
	kb, _ := b.storeCfg.Sealer.(*eventstore.Keyring)
	if ka == nil || kb == nil || ka.CurrentKeyID() != kb.CurrentKeyID() {
		t.Fatalf("signing keys differ: %v and %v", ka, kb)
	}
	id, tag := ka.Seal([]byte("m"))
	if err := kb.Verify(id, tag, []byte("m")); err != nil {
		t.Fatalf("a tag of one engine fails in the other: %v", err)
	}

	ca := httpClient{t: t, base: "http://" + a.httpAddr}
	cb := httpClient{t: t, base: "http://" + b.httpAddr}
	if code, _, body := ca.do("POST", "/v1/accounts/shared/credits", "dev-olivia-token", `{"credit_id":"via-a","amount":"5"}`); code != 201 {
		t.Fatalf("credit through a: %d %v", code, body)
	}
	if code, _, body := cb.do("POST", "/v1/accounts/shared/credits", "dev-olivia-token", `{"credit_id":"via-b","amount":"7"}`); code != 201 {
		t.Fatalf("credit through b (it must fold a's credit first): %d %v", code, body)
	}
	for _, c := range []httpClient{ca, cb} {
		for deadline := time.Now().Add(20 * time.Second); ; {
			_, _, acct := c.do("GET", "/v1/accounts/shared", "dev-alice-token", "")
			if acct["available"] == "12" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: account %v, want both credits (12) available", c.base, acct)
			}
			<-time.After(20 * time.Millisecond) // the ledger folds the log asynchronously
		}
	}
	for name, e := range map[string]*engine{"a": a, "b": b} {
		if _, n := e.store.Violations(); n != 0 {
			t.Fatalf("engine %s quarantined %d events", name, n)
		}
	}
}
