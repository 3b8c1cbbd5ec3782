package aggregate

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// policyStep decides c on s, fails the test on error, and folds what it
// emitted (through JSON, as the store would) into s.
func policyStep(t *testing.T, s PolicyState, c PolicyCommand) (PolicyState, []PolicyEvent) {
	t.Helper()
	evs, err := DecidePolicy(s, c)
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodePolicyEvent(e.EventType(), data)
		if err != nil {
			t.Fatalf("%s does not decode: %v", e.EventType(), err)
		}
		s = EvolvePolicy(s, back)
	}
	return s, evs
}

func onePerAmount(t *testing.T) Policy { return policyNeeding(t, 1, 0) }

// Finding (issue 11): one operator put a one-approver policy in force
// alone. Under a quorum of 2 a PUT is only a proposal; the proposer counts
// as one and cannot approve it again; a second operator puts it in force.
func TestOneOperatorCannotChangeThePolicyAlone(t *testing.T) {
	var s PolicyState
	s, evs := policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 2, At: at(1)})
	if len(evs) != 1 || evs[0].EventType() != PolicyProposedType {
		t.Fatalf("a PUT under quorum 2 gave %v", evs)
	}
	if s.Policy.Version != 0 || s.Pending == nil || s.Pending.Policy.Version != 1 || s.Pending.ProposedBy != "olivia" {
		t.Fatalf("after the proposal: %+v", s)
	}
	if _, err := DecidePolicy(s, ApprovePolicy{Version: 1, By: "olivia", Quorum: 2, At: at(2)}); !errors.Is(err, ErrSelfApproval) {
		t.Fatalf("the proposer approving her own proposal: %v", err)
	}
	s, evs = policyStep(t, s, ApprovePolicy{Version: 1, By: "bob", Quorum: 2, At: at(3)})
	ch, ok := evs[0].(PolicyChanged)
	if len(evs) != 1 || !ok {
		t.Fatalf("the second operator's approval gave %v", evs)
	}
	if ch.Version != 1 || ch.By != "olivia" || !slices.Equal(ch.ApprovedBy, []string{"bob"}) || ch.Quorum != 2 || !ch.At.Equal(at(3)) {
		t.Fatalf("policy.changed records who and when: %+v", ch)
	}
	if s.Policy.Version != 1 || !s.Policy.SameRules(onePerAmount(t)) || s.Pending != nil || s.ChangedBy != "olivia" {
		t.Fatalf("in force: %+v", s)
	}
	if evs, err := DecidePolicy(s, ApprovePolicy{Version: 1, By: "bob", Quorum: 2, At: at(4)}); err != nil || len(evs) != 0 {
		t.Fatalf("bob approving again: %v %v", evs, err)
	}
}

func TestAQuorumCountsDistinctOperators(t *testing.T) {
	var s PolicyState
	s, _ = policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 3, At: at(1)})
	s, evs := policyStep(t, s, ApprovePolicy{Version: 1, By: "bob", Quorum: 3, At: at(2)})
	if len(evs) != 1 || evs[0].EventType() != PolicyProposalApprovedType || s.Policy.Version != 0 {
		t.Fatalf("two of three: %v, in force v%d", evs, s.Policy.Version)
	}
	if evs, err := DecidePolicy(s, ApprovePolicy{Version: 1, By: "bob", Quorum: 3, At: at(3)}); err != nil || len(evs) != 0 {
		t.Fatalf("bob twice must count once: %v %v", evs, err)
	}
	if got := len(s.Pending.Approvals); got != 2 || !s.Pending.HasApproved("olivia") || !s.Pending.HasApproved("bob") {
		t.Fatalf("approvals %+v", s.Pending.Approvals)
	}
	s, evs = policyStep(t, s, ApprovePolicy{Version: 1, By: "carol", Quorum: 3, At: at(4)})
	if ch, ok := evs[0].(PolicyChanged); !ok || !slices.Equal(ch.ApprovedBy, []string{"bob", "carol"}) || s.Policy.Version != 1 {
		t.Fatalf("three of three: %v", evs)
	}
}

// A quorum lowered in configuration after a proposal does not lower what
// that proposal needs.
func TestAProposalNeedsTheLargerOfItsQuorumAndTheConfiguredOne(t *testing.T) {
	var s PolicyState
	s, _ = policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 3, At: at(1)})
	s, evs := policyStep(t, s, ApprovePolicy{Version: 1, By: "bob", Quorum: 2, At: at(2)})
	if evs[0].EventType() != PolicyProposalApprovedType || s.Policy.Version != 0 {
		t.Fatalf("quorum 3 proposal met with 2: %v", evs)
	}
}

func TestANewProposalSupersedesTheOpenOne(t *testing.T) {
	var s PolicyState
	s, _ = policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 2, At: at(1)})
	if evs, err := DecidePolicy(s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 2, At: at(2)}); err != nil || len(evs) != 0 {
		t.Fatalf("proposing the open proposal again: %v %v", evs, err)
	}
	s, _ = policyStep(t, s, SetPolicy{Policy: policyNeeding(t, 3, 0), By: "carol", Quorum: 2, At: at(3)})
	if s.Pending.Policy.Version != 2 || s.LastVersion != 2 {
		t.Fatalf("second proposal: %+v", s.Pending)
	}
	if _, err := DecidePolicy(s, ApprovePolicy{Version: 1, By: "bob", Quorum: 2, At: at(4)}); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("approving the superseded v1: %v", err)
	}
	if _, err := DecidePolicy(s, ApprovePolicy{Version: 9, By: "bob", Quorum: 2, At: at(4)}); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("approving a version never proposed: %v", err)
	}
	s, _ = policyStep(t, s, ApprovePolicy{Version: 2, By: "bob", Quorum: 2, At: at(5)})
	if s.Policy.Version != 2 || s.Policy.RuleFor(usdt("1")).Approvers != 3 {
		t.Fatalf("in force: %+v", s.Policy)
	}
	s, evs := policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 2, At: at(6)})
	if evs[0].(PolicyProposed).Version != 3 {
		t.Fatalf("the next proposal after v2 in force: %+v", evs[0])
	}
	if _, err := DecidePolicy(s, ApprovePolicy{Version: 2, By: "dave", Quorum: 2, At: at(7)}); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("approving the version in force by someone who did not: %v", err)
	}
}

func TestQuorumOfOnePutsThePolicyInForceAtOnce(t *testing.T) {
	for _, q := range []int{0, 1} {
		s, evs := policyStep(t, PolicyState{}, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: q, At: at(1)})
		if ch, ok := evs[0].(PolicyChanged); !ok || ch.Version != 1 || len(ch.ApprovedBy) != 0 || s.Pending != nil {
			t.Fatalf("quorum %d: %v", q, evs)
		}
	}
}

func TestPolicyApprovalsAreChecked(t *testing.T) {
	var s PolicyState
	s, _ = policyStep(t, s, SetPolicy{Policy: onePerAmount(t), By: "olivia", Quorum: 2, At: at(1)})
	for name, c := range map[string]ApprovePolicy{
		"no approver": {Version: 1, Quorum: 2, At: at(2)},
		"no time":     {Version: 1, By: "bob", Quorum: 2},
		"version 0":   {Version: 0, By: "bob", Quorum: 2, At: at(2)},
	} {
		if _, err := DecidePolicy(s, c); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
