package sagas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
)

// payeesPolicy: one approver; the rig's account may pay only listed
// without more approvers, and anywhere else as unlisted says.
func payeesPolicy(t *testing.T, listed, unlisted string) aggregate.Policy {
	t.Helper()
	d := aggregate.DestinationRule{Name: "payer-payees", Accounts: []string{bcAccount}, Allow: []string{listed}, Unlisted: unlisted}
	if unlisted == aggregate.UnlistedExtraApprovers {
		d.ExtraApprovers = 1
	}
	p, err := aggregate.Policy{Name: "payees", Rules: []aggregate.Rule{{Name: "single", Approvers: 1}}, Destinations: []aggregate.DestinationRule{d}}.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *bcRig) setPolicy(p aggregate.Policy) {
	r.t.Helper()
	if _, err := r.repo.SetPolicy(r.ctx, aggregate.SetPolicy{Policy: p, By: "ops", At: r.clock.Now()}); err != nil {
		r.t.Fatal(err)
	}
}

// Failure matrix, "rule tightened while approved": a destination rule that
// refuses the destination comes into force after the approvals and after
// the envelope was written ahead. The re-check right before signing
// refuses to sign: the unsigned envelope is retired, the withdrawal goes
// back to requested with reason destination_not_allowed, nothing is sent
// (the resuming worker never calls the node), and no approval can make it ready while the rule holds.
// Once the policy allows it again it pays once.
func TestDestinationRefusedWhileApprovedIsNotSigned(t *testing.T) {
	r := newBCRig(t)
	to, listed := bcAddress("unlisted payee"), bcAddress("listed payee")
	r.setPolicy(payeesPolicy(t, listed, aggregate.UnlistedExtraApprovers))
	id := r.ready(to, "500") // bob and carol: 1 + 1 for the unlisted destination
	if w := r.load(id); w.State != aggregate.StateApproved || len(w.Approvals) != 2 || len(w.AppliedRules) != 1 {
		t.Fatalf("%s with %d approvals, applied %v", w.State, len(w.Approvals), w.AppliedRules)
	}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterBuild, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	if w := r.load(id); w.State != aggregate.StateSigning {
		t.Fatalf("after the build: %s", w.State)
	}
	r.setPolicy(payeesPolicy(t, listed, aggregate.UnlistedRefuse))
	r.clock.Advance(bcLease + time.Second)
	w2 := r.worker("w2")
	r.round(w2)
	w := r.load(id)
	if w.State != aggregate.StateRequested || w.Reason != aggregate.ReasonDestinationNotAllowed || w.Signature != "" {
		t.Fatalf("%s %s signed=%v", w.State, w.Reason, w.Signature != "")
	}
	if w.Invalidation == nil || w.Invalidation.RefusedBy != "payer-payees" || w.Invalidation.PolicyVersion != 2 {
		t.Fatalf("invalidation %+v", w.Invalidation)
	}
	if len(w.Retired) != 1 || !w.Retired[0].Unsigned || len(r.sim.BroadcastLog()) != 0 || r.node.Calls("w2") != 0 {
		t.Fatalf("retired %+v, sends %d, w2 node calls %d", w.Retired, len(r.sim.BroadcastLog()), r.node.Calls("w2"))
	}
	if _, _, err := r.repo.UpdateWithdrawal(r.ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Approve{By: "dave", Policy: r.policy(), At: r.clock.Now()}, nil
	}); !errors.Is(err, aggregate.ErrDestinationNotAllowed) {
		t.Fatalf("an approval while the destination is refused: %v", err)
	}
	n := len(r.events(id))
	r.round(w2)
	if len(r.events(id)) != n || len(r.sim.BroadcastLog()) != 0 {
		t.Fatal("the worker touched a withdrawal waiting for approvals")
	}
	// Allowed again (extra approver): the two approvals still count.
	r.setPolicy(payeesPolicy(t, listed, aggregate.UnlistedExtraApprovers))
	r.approve(id, "dave")
	r.until(40, r.terminal(id), w2)
	r.paidOnce(id)
	signed := bcOfType[aggregate.Signed](r.events(id))
	if len(signed) != 1 || signed[0].PolicyVersion != 3 {
		t.Fatalf("signed %+v", signed)
	}
}
