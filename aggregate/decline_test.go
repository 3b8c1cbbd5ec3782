package aggregate

import "testing"

func TestDeclineOnlyWhileAwaitingApprovalRecordsWhoAndWhy(t *testing.T) {
	w := step(t, reach(t, StateRequested, pathOpts{}), Decline{By: "alice", Reason: "destination not on file", At: at(30)})
	if w.State != StateRejected || w.Reason != ReasonDeclined || w.ResolvedBy != "alice" || w.Detail != "destination not on file" {
		t.Fatalf("decline: %+v", w)
	}
	// The same decline again is a replay; another decliner or reason is not.
	decideNothing(t, w, Decline{By: "alice", Reason: "destination not on file", At: at(31)})
	decideErr(t, w, Decline{By: "bob", Reason: "other", At: at(31)}, ErrInvalidTransition)
	for _, s := range []State{StateApproved, StateSigning, StateBroadcast, StateConfirmed, StateFailed} {
		decideErr(t, reach(t, s, pathOpts{}), Decline{By: "alice", Reason: "no", At: at(30)}, ErrInvalidTransition)
	}
	decideErr(t, Withdrawal{}, Decline{By: "alice", Reason: "no", At: at(30)}, ErrInvalidTransition)
}

func TestDeclineNeedsAReasonAndADecliner(t *testing.T) {
	w := reach(t, StateRequested, pathOpts{})
	decideErr(t, w, Decline{By: "alice", Reason: "  ", At: at(30)}, ErrInvalidCommand)
	decideErr(t, w, Decline{By: "", Reason: "why", At: at(30)}, ErrInvalidCommand)
	decideErr(t, w, Reject{Reason: ReasonDeclined, At: at(30)}, ErrInvalidCommand)
}

func TestAuditRefusesADeclineWithoutDeclinerOrFromApproved(t *testing.T) {
	approved := reach(t, StateApproved, pathOpts{})
	if err := checkEvent(approved, Rejected{Reason: ReasonDeclined, By: "alice", Detail: "x", At: at(30)}); err == nil {
		t.Fatal("a decline of an approved withdrawal passed the rules")
	}
	requested := reach(t, StateRequested, pathOpts{})
	if err := checkEvent(requested, Rejected{Reason: ReasonDeclined, At: at(30)}); err == nil {
		t.Fatal("a decline naming nobody passed the rules")
	}
	if err := checkEvent(requested, Rejected{Reason: ReasonDeclined, By: "alice", Detail: "x", At: at(30)}); err != nil {
		t.Fatalf("a proper decline: %v", err)
	}
}
