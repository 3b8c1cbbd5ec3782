package audit_test

import (
	"errors"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
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
