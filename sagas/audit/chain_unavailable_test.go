package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// A simulated chain restarted while the log persisted (weir serve in dev
// mode, restarted) does not hold the earlier payments: the audit says
// "chain unavailable" for them, never "violation"; the same payment
// audited against the chain it was paid on passes its chain checks.
func TestAuditSaysChainUnavailableForPaymentsBeforeTheChainBegan(t *testing.T) {
	h := newHistoryWith(t, nil)
	id := h.pay("25", "bob")
	h.all(true) // against the chain it was paid on: every check holds

	restarted := tron.NewSimNode(tron.SimConfig{Start: time.Now().Add(time.Minute).UTC()})
	restarted.Advance(30)
	rep, err := audit.All(t.Context(), h.store, audit.Options{Node: restarted, NodeURL: "restarted sim"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Violations) != 0 {
		t.Fatalf("a restarted chain made violations:\n%s", findingsText(rep.Violations))
	}
	if rep.Chain.Unavailable != 1 || !strings.Contains(rep.Chain.Note, "chain unavailable") {
		t.Fatalf("chain summary %+v", rep.Chain)
	}
	found := false
	for _, f := range rep.Notes {
		if f.Withdrawal == id && strings.HasPrefix(f.What, "chain unavailable: ") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no chain-unavailable note for %s:\n%s", id, findingsText(rep.Notes))
	}

	// A chain that began before the payment but does not hold it is still
	// a violation: "cannot know" is only for what predates the chain.
	other := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 7})
	other.Advance(30)
	rep, err = audit.All(t.Context(), h.store, audit.Options{Node: other, NodeURL: "another chain"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Chain.Unavailable != 0 {
		t.Fatalf("a chain that predates the payment and lacks it passed: %+v", rep.Chain)
	}
}
