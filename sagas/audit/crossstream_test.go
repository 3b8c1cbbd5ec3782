package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// TestAuditOfOneWithdrawalRunsTheCrossStreamChecks: `audit ID` sees what
// only other streams can show — its txid written ahead by another
// withdrawal too, a reservation for it on an account it does not draw on —
// as `audit --all` does.
func TestAuditOfOneWithdrawalRunsTheCrossStreamChecks(t *testing.T) {
	h := newHistory(t)
	first := h.request("10")
	h.approve(first, "bob")
	h.route(first, external(t))
	w, _ := h.build(first, h.policy())

	// A second withdrawal of the same amount to the same payee writes ahead
	// the first one's envelope: same bytes, same txid.
	second := h.request("10")
	h.approve(second, "bob")
	h.route(second, external(t))
	h.forge(second, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: w.Envelope, PolicyVersion: h.policy().Version, At: h.at()}) // v5

	// A third is reserved on its own account and, forged, on another.
	third := h.request("5")
	h.credit("other", "seed", "100")
	if _, _, err := h.repo.UpdateAccount(t.Context(), "other", aggregate.Reserve{Account: "other", WithdrawalID: third, Amount: aggregate.MustParseAmount(aggregate.USDT, "5"), At: h.at()}); err != nil {
		t.Fatal(err)
	}

	rep := h.one(second, false)
	wantViolation(t, rep, second, 5, "is also written ahead by withdrawal "+first)
	rep = h.one(first, false)
	wantViolation(t, rep, first, 5, "is also written ahead by withdrawal "+second)
	rep = h.one(third, false)
	wantFinding(t, rep, "reservation", 0, "reservation for withdrawal "+third+", which draws on account acme")
	if rep.Accounts != 2 {
		t.Fatalf("audited %d accounts, want acme and other", rep.Accounts)
	}

	all := h.all(false)
	wantViolation(t, all, second, 5, "was already written ahead by withdrawal "+first)
	wantFinding(t, all, "reservation", 0, "reservation for withdrawal "+third+", which draws on account acme")
}

// TestAuditNamesABrokenBackPointerAndGoesOn: an event whose version is
// right but whose Weir-Prev-Seq points elsewhere is a violation named by
// its stream sequence, under `audit --all` and `audit ID` alike; the rest
// of the log is still audited.
func TestAuditNamesABrokenBackPointerAndGoesOn(t *testing.T) {
	// Without the event key: with it, the tag check catches the forgery
	// first (TestAuditNamesAQuarantinedEventByItsSequence).
	h := newHistoryWith(t, nil)
	id := h.request("10") // v1 requested, v2 funds_reserved
	clean := h.request("11")
	k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
	recs, _, err := h.store.Load(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	seq := h.forgeRaw(k, aggregate.Rejected{Reason: "cancelled", By: "alice", At: h.at()}, 3, recs[0].Sequence)
	h.approve(clean, "bob")

	all := h.all(false)
	wantFinding(t, all, "stream", seq, "back-pointer (Weir-Prev-Seq) names stream sequence")
	for _, f := range all.Violations {
		if f.Withdrawal == clean {
			t.Fatalf("the clean withdrawal was blamed: %+v", f)
		}
	}
	if all.Withdrawals != 2 || all.States["approved"] != 1 {
		t.Fatalf("the rest was not audited: %d withdrawals, states %v", all.Withdrawals, all.States)
	}
	one := h.one(id, false)
	wantFinding(t, one, "stream", seq, "back-pointer")
	if one.Withdrawal.State != aggregate.StateRejected {
		t.Fatalf("the stream was not replayed past the bad pointer: %s", one.Withdrawal.State)
	}
}

// TestAuditJudgesLeasesOnServerTime: a worker whose clock runs two minutes
// fast claims with a lease that, by its own clock, runs long; the server
// recorded the claim now, so the lease ended 30 s of server time later and
// another worker's takeover a minute on was legal — the decider allowed
// it, and the audit, judging on the record time, agrees.
func TestAuditJudgesLeasesOnServerTime(t *testing.T) {
	h := newHistory(t)
	id := h.ready("10")
	fast := time.Now().UTC().Add(2 * time.Minute)
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.ClaimWithdrawal{Worker: "fast-clock", LeaseUntil: fast.Add(30 * time.Second), At: fast}
	})
	later := time.Now().UTC().Add(time.Minute)
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.ClaimWithdrawal{Worker: "honest", LeaseUntil: later.Add(30 * time.Second), At: later}
	})
	rep := h.one(id, true)
	if w := rep.Withdrawal; w.Version != 6 {
		t.Fatalf("both claims should be in the log: version %d", w.Version)
	}
}

// TestAuditNotesProofsANodeCannotServe: a node that answers lookups but
// not blocks cannot refute a proof or a confirmation: each is a note
// ("could not be checked"), never a violation, and the report says so.
func TestAuditNotesProofsANodeCannotServe(t *testing.T) {
	h := newHistory(t)
	h.rebuiltAndPaid("40", "bob")
	node := tron.NewObserved(h.chain.sim)
	node.Before = func(_ context.Context, m tron.NodeMethod) error {
		if m == tron.NodeSolidBlockByNum || m == tron.NodeSolidTxInfosByBlockNum {
			return errors.New("backend gone")
		}
		return nil
	}
	rep, err := audit.All(t.Context(), h.store, audit.Options{Node: node, NodeURL: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || !rep.Chain.Checked || rep.Chain.LookupErrors != 2 || !strings.Contains(rep.Chain.Note, "2 proof(s) could not be checked") {
		t.Fatalf("ok %v chain %+v\nviolations:\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}
	var notes int
	for _, f := range rep.Notes {
		if strings.Contains(f.What, "could not be checked: ") && strings.Contains(f.What, "backend gone") {
			notes++
		}
	}
	if notes != 2 {
		t.Fatalf("notes:\n%s", findingsText(rep.Notes))
	}
}

// TestAuditFollowsBackPointersThroughAQuarantinedEvent: the event after a
// quarantined one points back to it; that is the stream's real chain, not
// a second violation.
func TestAuditFollowsBackPointersThroughAQuarantinedEvent(t *testing.T) {
	h := newHistoryWith(t, nil)
	id := h.request("10") // v1, v2
	k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
	bad := h.forgeMsg(k, "withdrawal.paid_to_mallory", []byte(`{}`), 3, h.last(k), nil)
	data, _ := json.Marshal(aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "alice", At: h.at()})
	next := h.forgeAfter(k, bad, aggregate.EventRejected, data, 4, bad, nil)
	rep := h.all(false)
	wantFinding(t, rep, "integrity", bad, "quarantined")
	for _, f := range rep.Violations {
		if f.Sequence == next && strings.Contains(f.What, "back-pointer") {
			t.Fatalf("the pointer to the quarantined event was blamed: %s", f.What)
		}
	}
}
