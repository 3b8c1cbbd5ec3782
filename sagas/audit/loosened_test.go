package audit_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// Finding (issue 11): a policy loosened after a request was applied to the
// queued withdrawal, and one approval approved what needed two. Decide no
// longer writes that; the audit names it in a log that holds it anyway,
// both at the approval and where the money was committed.
func TestAuditNamesALoosenedPolicyAppliedToAQueuedWithdrawal(t *testing.T) {
	h := newHistory(t)
	id := h.request("5000") // the default policy: two approvals above 1000
	loose, err := aggregate.NewPolicy("one for all", []aggregate.Rule{{Name: "one", Threshold: aggregate.Amount{}, Approvers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.intake.SetPolicy(t.Context(), loose, "olivia"); err != nil {
		t.Fatal(err)
	}
	at := h.at()
	h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "bob", At: at, Rule: "one", PolicyVersion: 1}, RequiredApprovals: 1, At: at})
	approvedAt := h.withdrawal(id).Version
	h.route(id, external(t))
	w := h.withdrawal(id)
	env, _ := h.chain.envelope(t, w)
	if _, err := aggregate.Decide(w, aggregate.BuildEnvelope{Envelope: env, Policy: h.policy(), At: h.at()}); !errors.Is(err, aggregate.ErrApprovalsInsufficient) {
		t.Fatalf("the decider builds an envelope on one approval of two: %v", err)
	}
	at = h.at()
	h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: 1, At: at})
	builtAt := h.withdrawal(id).Version

	rep := h.all(false)
	wantViolation(t, rep, id, approvedAt, "required 2 when the withdrawal was requested")
	wantViolation(t, rep, id, builtAt, "required 2 when the withdrawal was requested")
}

// A policy change by quorum passes the audit when its proposal and
// approvals bear it out, and is a violation when the only approver besides
// the proposer is the proposer again (what one operator alone could forge).
func TestAuditJudgesPolicyChangesByQuorum(t *testing.T) {
	h := newHistory(t)
	h.setConfig(func(c *aggregate.Config) { c.PolicyQuorum = 2 })
	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := h.intake.ProposePolicy(t.Context(), strict, "olivia")
	if err != nil || ch.Proposal == nil {
		t.Fatal(ch, err)
	}
	if _, err := h.intake.ApprovePolicy(t.Context(), ch.Proposal.Policy.Version, "oscar"); err != nil {
		t.Fatal(err)
	}
	if rep := h.all(true); rep.Policy.Version != 1 {
		t.Fatalf("policy %+v", rep.Policy)
	}

	loose, err := aggregate.NewPolicy("one for all", []aggregate.Rule{{Name: "one", Threshold: aggregate.Amount{}, Approvers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err = h.intake.ProposePolicy(t.Context(), loose, "olivia")
	if err != nil || ch.Proposal == nil {
		t.Fatal(ch, err)
	}
	k := eventstore.Key{Type: eventlog.TypePolicy, ID: eventlog.PolicyStreamID}
	_, pos, err := h.store.Load(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	forged := aggregate.PolicyChanged{Version: 2, Name: loose.Name, Rules: loose.Rules, By: "olivia", ApprovedBy: []string{"olivia"}, Quorum: 2, At: h.at()}
	pos, err = h.store.Append(t.Context(), k, pos, eventstore.Event{Type: forged.EventType(), Data: forged})
	if err != nil {
		t.Fatal(err)
	}
	wantFinding(t, h.all(false), "policy", pos.Sequence, "olivia approved it twice")
}

// A credit that waited for review and was then credited on its maker's
// word alone is named by the audit, as is a credit past the asset's
// maximum.
func TestAuditNamesCreditsWithoutASecondOperatorOrPastTheMaximum(t *testing.T) {
	h := newHistory(t)
	h.setConfig(func(c *aggregate.Config) { c.CreditReviewAbove = aggregate.MustParseAmount(aggregate.USDT, "10000") })
	if _, pending, _, err := h.intake.CreditWithReview(t.Context(), sagas.CreditInput{Account: "ops", CreditID: "big", Amount: json.RawMessage(`"50000"`), By: "olivia"}); err != nil || pending == nil {
		t.Fatalf("credit above review: %v %v", pending, err)
	}
	h.forgeAccount("ops", aggregate.AccountCredited{Account: "ops", CreditID: "big", Amount: aggregate.MustParseAmount(aggregate.USDT, "50000"), By: "olivia", ApprovedBy: "olivia", At: h.at()})
	top, err := aggregate.FromUnits(aggregate.USDT, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	h.forgeAccount("mint", aggregate.AccountCredited{Account: "mint", CreditID: "m1", Amount: top, By: "olivia", At: h.at()})
	h.forgeAccount("mint", aggregate.AccountCredited{Account: "mint", CreditID: "m2", Amount: top, By: "olivia", At: h.at()})
	rep := h.all(false)
	var self, past bool
	for _, f := range rep.Violations {
		self = self || (f.Check == "account" && f.Account == "ops" && strings.Contains(f.What, "approved by someone other than olivia"))
		past = past || (f.Check == "account" && f.Account == "mint" && strings.Contains(f.What, "above the maximum"))
	}
	if !self || !past {
		t.Fatalf("self-approved credit named: %v, credit past the maximum named: %v\n%s", self, past, findingsText(rep.Violations))
	}
}
