package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
)

// TestAuditFindsNoViolationInABusyCleanLog: 200 withdrawals of every kind
// the deciders make — paid with one or two approvers, rebuilt after a
// proven expiry and paid, moved internally, cancelled, failed, waiting,
// approved and then sent back to requested by a tightened policy and
// approved again — with the policy tightened midway: not one violation
// (authorisations made before the tightening are warnings at most), against
// the chain too.
func TestAuditFindsNoViolationInABusyCleanLog(t *testing.T) {
	start := time.Now()
	h := newHistory(t)
	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Ten payers: one account's stream is loaded whole on every reservation.
	payers := make([]string, 10)
	for i := range payers {
		payers[i] = fmt.Sprintf("payer-%d", i)
		h.credit(payers[i], "seed", "100000")
	}
	var pending []string // approved under the old policy, not yet sent
	approvers := []string{"bob"}
	const n = 200
	for i := range n {
		if i == n/2 {
			if _, err := h.intake.SetPolicy(t.Context(), strict, "olivia"); err != nil {
				t.Fatal(err)
			}
			approvers = []string{"bob", "carol"}
			// The pre-send re-check sends them back; a second approver
			// satisfies the new rule; then they are paid.
			for _, id := range pending {
				h.do(id, func(aggregate.Withdrawal) aggregate.Command {
					return aggregate.RecheckApprovals{Policy: h.policy(), At: h.at()}
				})
				h.approve(id, "carol")
				h.route(id, external(t))
				h.payReady(id)
			}
		}
		h.payer = payers[i%len(payers)]
		switch i % 8 {
		case 0:
			h.pay("12.5", approvers...)
		case 1:
			h.pay("2500", "bob", "carol")
		case 2:
			id := h.request("7")
			h.approve(id, approvers...)
			h.route(id, internal(t, "treasury"))
			h.finish(h.do(id, func(aggregate.Withdrawal) aggregate.Command {
				return aggregate.SettleInternally{Policy: h.policy(), At: h.at()}
			}))
		case 3:
			id := h.request("3")
			if _, err := h.intake.Cancel(t.Context(), id, "alice", false); err != nil {
				t.Fatal(err)
			}
		case 4:
			h.rebuiltAndPaid("40", approvers...)
		case 5:
			h.request("5") // waiting for approval
		case 6:
			id := h.request("8")
			h.approve(id, approvers...)
			h.route(id, external(t))
			w, env := h.build(id, h.policy())
			h.send(id, h.sign(id, env), false) // rejected: it never lands
			proof := h.proveDead(w.Envelope)
			h.finish(h.do(id, func(aggregate.Withdrawal) aggregate.Command {
				return aggregate.Fail{Reason: aggregate.ReasonNodeRejected, Detail: "CONTRACT_VALIDATE_ERROR", Evidence: &proof, At: h.at()}
			}))
		case 7:
			id := h.request("6")
			h.approve(id, approvers...)
			if i < n/2 {
				pending = append(pending, id)
			}
		}
	}
	rep := h.all(true)
	if rep.Withdrawals != n || !rep.Chain.Checked || rep.Chain.LookupErrors != 0 || rep.Policy.Version != 1 {
		t.Fatalf("withdrawals %d chain %+v policy %+v", rep.Withdrawals, rep.Chain, rep.Policy)
	}
	for _, s := range []aggregate.State{aggregate.StateConfirmed, aggregate.StateRejected, aggregate.StateFailed, aggregate.StateRequested, aggregate.StateApproved} {
		if rep.States[string(s)] == 0 {
			t.Errorf("no withdrawal ended %s: %v", s, rep.States)
		}
	}
	for _, f := range rep.Warnings {
		if f.Check != "policy_now" {
			t.Errorf("unexpected warning: %s [%s]: %s", f.Where(), f.Check, f.What)
		}
	}
	t.Logf("%d withdrawals, %d events, states %v, %d warnings; built and audited in %s (audit %s)",
		rep.Withdrawals, rep.Events, rep.States, len(rep.Warnings), time.Since(start).Round(time.Millisecond), rep.Elapsed)
}
