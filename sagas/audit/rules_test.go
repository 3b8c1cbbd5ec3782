package audit_test

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// listedPayee is on acme's allow-list; payee is not.
const listedPayee = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"

func rulesPolicy(t *testing.T, unlisted string) aggregate.Policy {
	t.Helper()
	extra := ``
	if unlisted == aggregate.UnlistedExtraApprovers {
		extra = `,"extra_approvers":1`
	}
	p, err := aggregate.ParsePolicyJSON([]byte(`{"name":"acme rules","rules":[{"name":"single","threshold":"0","approvers":1}],
	  "destinations":[{"name":"acme-payees","accounts":["acme"],"allow":["` + listedPayee + `"],"unlisted":"` + unlisted + `"` + extra + `}],
	  "velocity":[{"name":"busy","above":"100","extra_approvers":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The audit re-checks the destination and velocity rules a decision
// records: THEN against the policy version it names with the window sum the
// request measured, NOW against the policy in force.
func TestAuditJudgesDestinationAndVelocityRulesThenAndNow(t *testing.T) {
	h := newHistory(t)
	if _, err := h.intake.SetPolicy(t.Context(), rulesPolicy(t, aggregate.UnlistedExtraApprovers), "olivia"); err != nil {
		t.Fatal(err)
	}
	first := h.request("60") // payee is off the list: 1 + 1
	if w := h.withdrawal(first); w.RequiredApprovals != 2 || w.WindowSum == nil || !w.WindowSum.IsZero() || len(w.AppliedRules) != 1 {
		t.Fatalf("first: %d required, window sum %v, applied %v", w.RequiredApprovals, w.WindowSum, w.AppliedRules)
	}
	second := h.request("50") // 60 sent before + 50 > 100: 1 + 1 + 1
	if w := h.withdrawal(second); w.RequiredApprovals != 3 || w.WindowSum == nil || w.WindowSum.String() != "60" {
		t.Fatalf("second: %d required, window sum %v", w.RequiredApprovals, w.WindowSum)
	}
	h.approve(first, "bob", "carol")
	h.approve(second, "bob")
	h.all(true) // what weir decided passes

	// A forged approval that drops the rules the request recorded.
	at := h.at()
	h.forge(second, aggregate.Approved{Approval: aggregate.Approval{By: "carol", At: at, Rule: "single", PolicyVersion: 1}, RequiredApprovals: 2, At: at})
	forgedAt := h.withdrawal(second).Version

	// A forged request whose recorded window sum puts it in the velocity
	// tier, recording no tier.
	third := uuid.NewString()
	sum := aggregate.MustParseAmount(aggregate.USDT, "200")
	at = h.at()
	h.forge(third, aggregate.Requested{ID: third, Account: "acme", ToAddress: listedPayee, Amount: aggregate.MustParseAmount(aggregate.USDT, "1"),
		Asset: aggregate.USDT.Code, RequestedBy: "alice", RequiredApprovals: 1, Rule: "single", PolicyName: "acme rules", PolicyVersion: 1, WindowSum: &sum, At: at})

	// NOW: the destination is refused from v2 on; first is approved.
	if _, err := h.intake.SetPolicy(t.Context(), rulesPolicy(t, aggregate.UnlistedRefuse), "olivia"); err != nil {
		t.Fatal(err)
	}
	rep := h.all(false)
	wantViolation(t, rep, second, forgedAt, `records rule "single" needing 2; policy v1 says rule "single" + destination "acme-payees" +1 + velocity "busy" +1 (window sum 60) needing 3`)
	wantViolation(t, rep, third, 1, `policy v1 says rule "single" + velocity "busy" +1 (window sum 200) needing 2`)
	if !slices.ContainsFunc(rep.Notes, func(f audit.Finding) bool {
		return f.Withdrawal == first && f.Check == "policy_now" && strings.Contains(f.What, `destination rule "acme-payees" refuses the destination`)
	}) {
		t.Fatalf("no NOW note on %s:\n%s", first, findingsText(rep.Notes))
	}
	for _, f := range rep.Violations {
		if f.Withdrawal == first {
			t.Fatalf("a withdrawal approved under the rules of its time is a violation: %s", f.What)
		}
	}
}

// A signature recorded while the policy in force refused the destination
// is a violation at the signed event: the re-check right before signing
// refuses a refused destination whatever the approvals, though the amount
// rule alone would be met.
func TestAuditFlagsASignatureWhileThePolicyInForceRefusedTheDestination(t *testing.T) {
	h := newHistory(t)
	if _, err := h.intake.SetPolicy(t.Context(), rulesPolicy(t, aggregate.UnlistedExtraApprovers), "olivia"); err != nil {
		t.Fatal(err)
	}
	id := h.request("60") // payee is off the list: 1 + 1
	h.approve(id, "bob", "carol")
	h.route(id, external(t))
	_, env := h.build(id, h.policy())
	if _, err := h.intake.SetPolicy(t.Context(), rulesPolicy(t, aggregate.UnlistedRefuse), "olivia"); err != nil {
		t.Fatal(err)
	}
	tx, err := tron.SignEnvelope(t.Context(), h.chain.signer, env)
	if err != nil {
		t.Fatal(err)
	}
	// Signed on the word of v1, read just before v2 refused the payee.
	h.forge(id, aggregate.Signed{TxID: env.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), PolicyVersion: 1, At: h.at()})
	wantViolation(t, h.one(id, false), id, h.withdrawal(id).Version,
		`said destination rule "acme-payees" refuses the destination: the re-check right before signing refuses that`)
}

// A request recorded without a window sum under a policy whose velocity
// tier names its account is a violation: its tiers were judged as if the
// account had sent nothing.
func TestAuditFlagsARequestWithoutTheWindowSumItsPolicyMeasures(t *testing.T) {
	h := newHistory(t)
	if _, err := h.intake.SetPolicy(t.Context(), rulesPolicy(t, aggregate.UnlistedExtraApprovers), "olivia"); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	h.forge(id, aggregate.Requested{ID: id, Account: "acme", ToAddress: listedPayee, Amount: aggregate.MustParseAmount(aggregate.USDT, "1"),
		Asset: aggregate.USDT.Code, RequestedBy: "alice", RequiredApprovals: 1, Rule: "single", PolicyName: "acme rules", PolicyVersion: 1, At: h.at()})
	wantViolation(t, h.one(id, false), id, 1, `records no window_sum, though policy v1 has a velocity tier for account acme`)
}
