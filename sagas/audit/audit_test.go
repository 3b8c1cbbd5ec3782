package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// TestAuditPassesACleanHistory: payouts on chain (one of them rebuilt
// after a proven expiry), an internal transfer, a cancellation and a
// request still waiting — every check holds, against the node too.
func TestAuditPassesACleanHistory(t *testing.T) {
	h := newHistory(t)
	paid := h.pay("12.5", "bob")
	// Signed with the first send's intent in one event, as the worker
	// writes it.
	inOne := h.payInOne("2500", "bob", "carol")

	// An envelope that was signed and never reached the chain, proven dead
	// on chain time, rebuilt, then paid.
	rebuilt, env1 := h.rebuiltAndPaid("40", "bob")

	// An internal transfer to a custodied account.
	moved := h.request("7")
	h.approve(moved, "carol")
	h.route(moved, internal(t, "treasury"))
	h.finish(h.do(moved, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.SettleInternally{Policy: h.policy(), At: h.at()}
	}))

	cancelled := h.request("3")
	if _, err := h.intake.Cancel(t.Context(), cancelled, "alice", false); err != nil {
		t.Fatal(err)
	}
	h.request("5") // waiting for approval

	rep := h.all(true)
	if rep.Withdrawals != 6 || rep.Accounts != 2 || !rep.Chain.Checked || rep.Chain.TxIDs != 4 {
		t.Fatalf("report: withdrawals %d accounts %d chain %+v", rep.Withdrawals, rep.Accounts, rep.Chain)
	}
	if len(rep.Warnings) != 0 || rep.States["confirmed"] != 4 || rep.States["rejected"] != 1 || rep.States["requested"] != 1 {
		t.Fatalf("states %v warnings:\n%s", rep.States, findingsText(rep.Warnings))
	}

	// One withdrawal: its timeline, with the rebuild's evidence.
	one := h.one(rebuilt, true)
	var sawRebuild bool
	for _, e := range one.Withdrawal.Timeline {
		if e.Type == aggregate.EventRebuilt {
			sawRebuild = strings.Contains(e.Details.String(), "retired_txid="+env1.TxIDHex()) && strings.Contains(e.Details.String(), "lookup not_found")
		}
	}
	if !sawRebuild || one.Withdrawal.State != aggregate.StateConfirmed || !one.Chain.Checked {
		t.Fatalf("timeline of %s: %+v", rebuilt, one.Withdrawal.Timeline)
	}
	one = h.one(paid, true)
	if tl := one.Withdrawal.Timeline; tl[0].Type != aggregate.EventRequested || tl[len(tl)-1].State != aggregate.StateConfirmed {
		t.Fatalf("timeline %+v", tl)
	}
	// The signature that is also the first intent: the signer recovered,
	// the send shown, and the withdrawal broadcasting after it.
	one = h.one(inOne, true)
	var sawSigned bool
	for _, e := range one.Withdrawal.Timeline {
		if e.Type == aggregate.EventSigned {
			d := e.Details.String()
			sawSigned = strings.Contains(d, "send=1") && strings.Contains(d, "signer=") && e.State == aggregate.StateBroadcasting && len(e.Findings) == 0
		}
	}
	if !sawSigned || one.Withdrawal.State != aggregate.StateConfirmed {
		t.Fatalf("timeline of %s: %+v", inOne, one.Withdrawal.Timeline)
	}
}

// TestAuditNamesForgedViolations: events appended around the deciders —
// a second approval by the requester, an envelope whose txid is not
// sha256(raw), a rebuild whose evidence proves nothing, an envelope paying
// someone else, a confirmation the chain does not know — each named with
// its withdrawal and event version.
func TestAuditNamesForgedViolations(t *testing.T) {
	h := newHistory(t)

	// 1. The requester approves her own withdrawal (after bob).
	selfApproved := h.request("2500") // four-eyes: 2 approvals
	h.approve(selfApproved, "bob")    // v3
	pol := h.policy()
	h.forge(selfApproved, aggregate.Approved{
		Approval:          aggregate.Approval{By: "alice", At: h.at(), Rule: "four-eyes", PolicyVersion: pol.Version},
		RequiredApprovals: 2, At: h.now,
	}) // v4

	// 2. An envelope whose txid is not sha256(raw_data).
	badTxID := h.request("10")
	h.approve(badTxID, "bob")     // v3
	h.route(badTxID, external(t)) // v4
	env, _ := h.chain.envelope(t, h.withdrawal(badTxID))
	wrong := sha256.Sum256([]byte("not these bytes"))
	env.TxID = hex.EncodeToString(wrong[:])
	h.forge(badTxID, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: pol.Version, At: h.at()}) // v5

	// 3. A rebuild whose evidence does not prove the old envelope expired.
	badProof := h.request("11")
	h.approve(badProof, "bob")
	h.route(badProof, external(t))
	w, env1 := h.build(badProof, pol) // v5
	h.sign(badProof, env1)            // v6
	solid := h.chain.sim.CurrentSolidHead()
	env2, _ := h.chain.envelope(t, w)
	h.forge(badProof, aggregate.Rebuilt{Attempt: 2, RetiredTxID: env1.TxIDHex(), Evidence: aggregate.Evidence{
		SolidBlockNumber: solid.Number, SolidBlockTime: solid.Timestamp, Expiration: w.Envelope.Expiration,
		Margin: 30_000, Lookup: aggregate.LookupNotFound,
	}, Envelope: env2, At: h.at()}) // v7

	// 4. An envelope (well formed, txid right) paying another address.
	otherPayee := h.request("12")
	h.approve(otherPayee, "bob")
	h.route(otherPayee, external(t))
	w = h.withdrawal(otherPayee)
	w.ToAddress = tron.USDTContract.String()
	env, _ = h.chain.envelope(t, w)
	h.forge(otherPayee, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: pol.Version, At: h.at()}) // v5

	// 5. Decided by the real deciders, but confirmed with a txid the chain
	// never saw: only the chain check can tell.
	ghost := h.request("13")
	h.approve(ghost, "bob")
	h.route(ghost, external(t))
	_, genv := h.build(ghost, pol)
	gtx := h.sign(ghost, genv)
	h.send(ghost, gtx, false)
	h.confirm(ghost, genv.TxIDHex(), 4242) // v9

	// 6. A confirmation of a withdrawal nobody approved: not in the table.
	skipped := h.request("14")
	h.forge(skipped, aggregate.Confirmed{TxID: genv.TxIDHex(), BlockNumber: 7, Receipt: "SUCCESS", At: h.at()}) // v3

	rep := h.all(false)
	wantViolation(t, rep, skipped, 3, "withdrawal.confirmed in state requested: not in the transition table")
	wantViolation(t, rep, selfApproved, 4, "self-approval")
	wantViolation(t, rep, badTxID, 5, "is not sha256(raw_data)")
	wantViolation(t, rep, badProof, 7, "does not prove")
	wantViolation(t, rep, otherPayee, 5, "not the withdrawal's to_address")
	wantViolation(t, rep, ghost, 9, "is not on chain")

	// One withdrawal: the violation sits under its event in the timeline.
	one := h.one(badProof, false)
	var under bool
	for _, e := range one.Withdrawal.Timeline {
		for _, f := range e.Findings {
			under = under || (e.Version == 7 && f.Check == "evidence" && strings.Contains(f.What, "the evidence does not prove txid "+env1.TxIDHex()+" dead"))
		}
	}
	if !under {
		t.Fatalf("timeline of %s: %+v", badProof, one.Withdrawal.Timeline)
	}

	// Without a node the log's own checks still fail, and the chain is a note.
	noNode, err := audit.All(t.Context(), h.store, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if noNode.OK || noNode.Chain.Checked || strings.Contains(findingsText(noNode.Violations), "is not on chain") {
		t.Fatalf("without a node: ok %v chain %+v\n%s", noNode.OK, noNode.Chain, findingsText(noNode.Violations))
	}
}

// TestAuditJudgesPolicyThenAndNow: two withdrawals approved by one
// approver under the default policy, then the policy tightens to two
// approvers for every amount. The one authorised before the change is a
// warning (its approvals no longer satisfy the policy now); the one whose
// envelope was written after the change — by a worker holding the old
// policy — is a violation.
func TestAuditJudgesPolicyThenAndNow(t *testing.T) {
	h := newHistory(t)
	v0 := h.policy()
	before := h.request("500")
	h.approve(before, "bob")
	h.route(before, external(t))
	h.build(before, v0)

	after := h.request("600")
	h.approve(after, "bob")
	h.route(after, external(t))

	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.intake.SetPolicy(t.Context(), strict, "olivia"); err != nil {
		t.Fatal(err)
	}
	h.build(after, v0) // the decider trusts the policy it is handed: a stale one passes

	waiting := h.request("700")
	h.approve(waiting, "bob", "carol") // under v1: two approvals

	rep := h.all(false)
	wantViolation(t, rep, after, 5, "after policy v1")
	if len(rep.Violations) != 1 {
		t.Fatalf("violations:\n%s", findingsText(rep.Violations))
	}
	found := false
	for _, f := range rep.Warnings {
		if f.Withdrawal == before && f.Check == "policy_now" && strings.Contains(f.What, "no longer satisfy the current policy v1") {
			found = true
		}
		if f.Withdrawal == waiting {
			t.Fatalf("a withdrawal approved under the policy in force was warned about: %+v", f)
		}
	}
	if !found {
		t.Fatalf("no policy_now warning for %s:\n%s", before, findingsText(rep.Warnings))
	}
	if rep.Policy.Version != 1 || rep.Policy.ChangedBy != "olivia" {
		t.Fatalf("policy %+v", rep.Policy)
	}

	// The one authorised before the change passes on its own, with the warning.
	one := h.one(before, true)
	if len(one.Warnings) != 1 || one.Warnings[0].Check != "policy_now" {
		t.Fatalf("warnings:\n%s", findingsText(one.Warnings))
	}
}

// TestAuditChecksAccountsAgainstWithdrawals: a reservation with no
// withdrawal behind it, and a settlement for a withdrawal that did not pay,
// are violations of the account side, each named with its event.
func TestAuditChecksAccountsAgainstWithdrawals(t *testing.T) {
	h := newHistory(t)
	id := h.request("20")
	if _, err := h.intake.Cancel(t.Context(), id, "alice", false); err != nil {
		t.Fatal(err)
	}
	// A reservation for a withdrawal id that has no stream.
	orphan := uuid.NewString()
	if _, _, err := h.repo.UpdateAccount(t.Context(), "acme", aggregate.Reserve{Account: "acme", WithdrawalID: orphan, Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), At: h.at()}); err != nil {
		t.Fatal(err)
	}
	// And a settlement of the released reservation of the cancelled one: an
	// account event no decider would write (event 5 of the account).
	h.forgeAccount("acme", aggregate.AccountSettled{Account: "acme", WithdrawalID: id, Amount: aggregate.MustParseAmount(aggregate.USDT, "20"), At: h.at()})
	rep, err := audit.All(t.Context(), h.store, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found, settled := false, false
	for _, f := range rep.Violations {
		if f.Account == "acme" && f.Check == "reservation" && strings.Contains(f.What, orphan) {
			found = true
		}
		if f.Account == "acme" && f.Check == "account" && f.Version == 5 && f.Event == aggregate.EventAccountSettled {
			settled = true
		}
	}
	if rep.OK || !found || !settled || rep.Chain.Checked {
		t.Fatalf("violations:\n%s chain %+v", findingsText(rep.Violations), rep.Chain)
	}
}

// TestAuditRefusesWhatIsNotAWithdrawal: an id that is not a UUID and an
// unknown withdrawal are errors (the audit could not run), not findings.
func TestAuditRefusesWhatIsNotAWithdrawal(t *testing.T) {
	h := newHistory(t)
	if _, err := audit.Withdrawal(t.Context(), h.store, "not-a-uuid", audit.Options{}); !errors.Is(err, audit.ErrNotWithdrawalID) {
		t.Fatalf("not a uuid: %v", err)
	}
	if _, err := audit.Withdrawal(t.Context(), h.store, uuid.NewString(), audit.Options{}); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}
