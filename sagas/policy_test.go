package sagas_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
)

// Finding (issue 11): olivia (operator and requester) requested 50,000
// (two approvals needed), put a one-approver policy in force alone, and
// bob's single approval moved the withdrawal to approved. Now her change is
// a proposal until a second operator approves it, and even in force it
// does not lower what the queued withdrawal needs.
func TestOliviaCannotLoosenThePolicyAloneNorForAQueuedWithdrawal(t *testing.T) {
	s := newStack(t, "")
	s.intake.SetPolicyQuorum(2)
	ctx := context.Background()
	s.credit(t, "acme", "100000")
	const id = "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d51"
	w, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: id, Account: "acme", ToAddress: testAddr, Amount: jsonString("50000"), By: "olivia"})
	if err != nil || w.RequiredApprovals != 2 {
		t.Fatalf("request: %v, %d required", err, w.RequiredApprovals)
	}
	loose, err := aggregate.NewPolicy("one for all", []aggregate.Rule{{Name: "one", Threshold: aggregate.Amount{}, Approvers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.intake.ProposePolicy(ctx, loose, "olivia")
	if err != nil || ch.Proposal == nil || ch.ApprovalsNeeded != 2 || ch.InForce.Version != 0 {
		t.Fatalf("olivia's PUT: %+v %v", ch, err)
	}
	if _, err := s.intake.ApprovePolicy(ctx, ch.Proposal.Policy.Version, "olivia"); !errors.Is(err, aggregate.ErrSelfApproval) {
		t.Fatalf("olivia approving her own proposal: %v", err)
	}
	if p, _ := s.intake.Policy(ctx); p.Version != 0 || p.RuleFor(aggregate.MustParseAmount(aggregate.USDT, "50000")).Approvers != 2 {
		t.Fatalf("the proposal is in force: %+v", p)
	}
	if w, err = s.intake.Approve(ctx, id, "bob"); err != nil || w.State != aggregate.StateRequested {
		t.Fatalf("bob's approval with the proposal open: %s %v", w.State, err)
	}

	ch, err = s.intake.ApprovePolicy(ctx, ch.Proposal.Policy.Version, "carol")
	if err != nil || ch.Proposal != nil || ch.InForce.Version != 1 || !ch.InForce.SameRules(loose) {
		t.Fatalf("carol's approval of the policy: %+v %v", ch, err)
	}
	// In force now, the looser policy still does not lower what the queued
	// withdrawal needed at its request.
	if w, err = s.intake.Withdrawal(ctx, id); err != nil || w.State != aggregate.StateRequested {
		t.Fatalf("after the policy change: %s %v", w.State, err)
	}
	if w, err = s.intake.Approve(ctx, id, "dave"); err != nil || w.State != aggregate.StateApproved || w.RequiredApprovals != 2 {
		t.Fatalf("second approval: %s, %d required, %v", w.State, w.RequiredApprovals, err)
	}
}

func TestProposingTwiceOrWhatIsInForceChangesNothing(t *testing.T) {
	s := newStack(t, "")
	s.intake.SetPolicyQuorum(2)
	ctx := context.Background()
	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.intake.ProposePolicy(ctx, strict, "olivia")
	if err != nil || first.Proposal == nil {
		t.Fatal(first, err)
	}
	again, err := s.intake.ProposePolicy(ctx, strict, "olivia")
	if err != nil || again.Proposal == nil || again.Proposal.Policy.Version != first.Proposal.Policy.Version {
		t.Fatalf("proposing again: %+v %v", again, err)
	}
	if _, err := s.intake.ApprovePolicy(ctx, first.Proposal.Policy.Version, "bob"); err != nil {
		t.Fatal(err)
	}
	same, err := s.intake.ProposePolicy(ctx, strict, "carol")
	if err != nil || same.Proposal != nil || same.InForce.Version != 1 {
		t.Fatalf("proposing the policy in force: %+v %v", same, err)
	}
	if p, n, err := s.intake.PolicyProposal(ctx); err != nil || p != nil || n != 0 {
		t.Fatalf("open proposal after it came into force: %+v %d %v", p, n, err)
	}
}
