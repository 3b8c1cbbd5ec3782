package aggregate

import (
	"errors"
	"testing"
)

// Finding (issue 11): olivia (operator + requester) requested 50,000 (two
// approvals needed), put a one-approver policy in force, and bob's single
// approval moved the withdrawal to approved. The requirement snapshotted at
// request time is a floor no later policy lowers.
func TestALoosenedPolicyDoesNotLowerWhatAQueuedWithdrawalNeeds(t *testing.T) {
	c := requestCmd(t)
	c.RequestedBy, c.Amount = "olivia", usdt("50000")
	w := step(t, Withdrawal{}, c)
	if w.AtRequest.Approvers != 2 || w.AtRequest.PolicyVersion != 1 || w.AtRequest.Rule != "four-eyes" {
		t.Fatalf("request-time requirement: %+v", w.AtRequest)
	}
	loose := policyNeeding(t, 1, 2)
	evs, err := Decide(w, Approve{By: "bob", Policy: loose, At: at(5)})
	if err != nil || len(evs) != 1 {
		t.Fatalf("bob's approval: %v %v", evs, err)
	}
	rec, ok := evs[0].(ApprovalRecorded)
	if !ok {
		t.Fatalf("one approval under a loosened policy gave %T, want %s", evs[0], EventApprovalRecorded)
	}
	if rec.RequiredApprovals != 2 || rec.Approval.PolicyVersion != 1 || rec.Approval.Rule != "four-eyes" {
		t.Fatalf("the approval must name the binding rule (v1 four-eyes, 2): %+v", rec)
	}
	w = Evolve(w, rec)
	if w.State != StateRequested {
		t.Fatalf("state %s after one approval", w.State)
	}
	if err := EnsureApproved(w, loose); !errors.Is(err, ErrApprovalsInsufficient) {
		t.Fatalf("EnsureApproved under the loosened policy: %v", err)
	}
	w = step(t, w, Approve{By: "carol", Policy: loose, At: at(6)})
	if w.State != StateApproved || w.RequiredApprovals != 2 {
		t.Fatalf("two approvals: %s, %d required", w.State, w.RequiredApprovals)
	}
}

func TestATightenedPolicyStillAppliesToQueuedWithdrawals(t *testing.T) {
	c := requestCmd(t)
	c.Amount = usdt("500") // one approval under four-eyes above 1000
	w := step(t, Withdrawal{}, c)
	tight := policyNeeding(t, 2, 2)
	if got := RequirementFor(w, tight); got.Approvers != 2 || got.PolicyVersion != 2 {
		t.Fatalf("RequirementFor: %+v", got)
	}
	evs, err := Decide(w, Approve{By: "bob", Policy: tight, At: at(5)})
	if err != nil || len(evs) != 1 || evs[0].EventType() != EventApprovalRecorded {
		t.Fatalf("one approval under a tightened policy: %v %v", evs, err)
	}
}

// A log in which an approval counts against less than the request-time
// requirement could only come from a loosening applied to a queued
// withdrawal; Audit (and so Decide) refuses it.
func TestAuditRefusesAnApprovalBelowTheRequestTimeRequirement(t *testing.T) {
	c := requestCmd(t)
	req, err := Decide(Withdrawal{}, c)
	if err != nil {
		t.Fatal(err)
	}
	forged := Approved{Approval: Approval{By: "bob", At: at(5), Rule: "flat", PolicyVersion: 2}, RequiredApprovals: 1, At: at(5)}
	if _, err := Audit([]Event{req[0], forged}); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("Audit accepted a one-approval approve of a two-approval request: %v", err)
	}
}
