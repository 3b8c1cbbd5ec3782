package audit_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// TestAuditChecksTheChainTheLogRecords: a log whose configuration records
// the chain's genesis, and that has no envelope yet (nothing names a
// block), has its node's identity checked all the same: the right chain is
// "log genesis", another one a chain_identity violation naming both ids
// and the configuration version; --expect-genesis overrides the log's,
// with a note.
func TestAuditChecksTheChainTheLogRecords(t *testing.T) {
	h := newHistory(t)
	g, err := h.chain.sim.Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Before the chain is recorded: unchecked, as before.
	if rep := h.audit(audit.Options{}); !rep.OK || rep.Chain.Identity != "unchecked" || rep.Chain.LogGenesis != "" {
		t.Fatalf("no chain recorded: ok %v chain %+v", rep.OK, rep.Chain)
	}
	h.setConfig(func(c *aggregate.Config) { c.ChainGenesis = g.IDHex() })

	rep := h.audit(audit.Options{})
	if !rep.OK || rep.Chain.Identity != "log genesis" || rep.Chain.LogGenesis != g.IDHex() || rep.Chain.ExpectedGenesis != g.IDHex() || !rep.Chain.Checked {
		t.Fatalf("the recorded chain: ok %v chain %+v\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}

	other := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 7})
	other.Advance(30)
	og, err := other.Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rep = h.audit(audit.Options{Node: other, NodeURL: "other"})
	if rep.OK || len(rep.Violations) != 1 || rep.Violations[0].Check != "chain_identity" || rep.Chain.Identity != "mismatch" || rep.Chain.Checked {
		t.Fatalf("another chain: chain %+v\n%s", rep.Chain, findingsText(rep.Violations))
	}
	if what := rep.Violations[0].What; !strings.Contains(what, og.IDHex()) || !strings.Contains(what, g.IDHex()) || !strings.Contains(what, "configuration v2") {
		t.Fatalf("the violation names neither both chains nor the version: %s", what)
	}

	// --expect-genesis overrides: the other chain, expected, is checked
	// against the flag, and a note says the log records another.
	rep = h.audit(audit.Options{Node: other, NodeURL: "other", ExpectGenesis: og.IDHex()})
	if rep.Chain.Identity != "genesis" || !slices.ContainsFunc(rep.Notes, func(f audit.Finding) bool {
		return f.Check == "chain_identity" && strings.Contains(f.What, "overrides the genesis block "+g.IDHex())
	}) {
		t.Fatalf("override: chain %+v notes:\n%s", rep.Chain, findingsText(rep.Notes))
	}
	// Both agreeing, with a payment: reported as before the log recorded
	// its chain (log_genesis says it agrees), and without the flag the
	// log's genesis and its blocks.
	h.pay("10", "bob")
	rep = h.audit(audit.Options{ExpectGenesis: g.IDHex()})
	if !rep.OK || rep.Chain.Identity != "genesis+log blocks" || rep.Chain.LogGenesis != g.IDHex() || len(rep.Notes) != 0 {
		t.Fatalf("all agreeing: ok %v chain %+v\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}
	rep = h.audit(audit.Options{})
	if !rep.OK || rep.Chain.Identity != "log genesis+log blocks" {
		t.Fatalf("all agreeing: ok %v chain %+v\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}
}
