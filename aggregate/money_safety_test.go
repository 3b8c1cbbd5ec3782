package aggregate

import (
	"errors"
	"testing"
	"time"
)

// Issue 16's domain rules: what the decider itself refuses, whatever a
// worker asks.

func TestSignatureIsRefusedWhenThePolicyInForceWantsMoreApprovals(t *testing.T) {
	w := reach(t, StateSigning, pathOpts{})
	decideErr(t, w, RecordSignature{Policy: policyNeeding(t, 3, 2), TxID: w.TxID(), Signature: signature(0xaa), At: at(30)}, ErrApprovalsInsufficient)
	// Signed records the policy version it was re-checked against.
	w = step(t, w, RecordSignature{Policy: fourEyes(t), TxID: w.TxID(), Signature: signature(0xaa), At: at(30)})
	if w.State != StateSigned {
		t.Fatalf("state %s", w.State)
	}
}

func TestApprovalsOfARevokedApproverDoNotCountAtSigning(t *testing.T) {
	w := reach(t, StateSigning, pathOpts{})
	decideErr(t, w, RecordSignature{Policy: fourEyes(t), Revoked: []string{"carol"}, TxID: w.TxID(), Signature: signature(0xaa), At: at(30)}, ErrApprovalsInsufficient)
	// The re-check retires the unsigned envelope back to requested and
	// drops carol's approval: a new approver makes it ready again.
	old := w.TxID()
	w = step(t, w, RecheckApprovals{Policy: fourEyes(t), Revoked: []string{"carol", "zed"}, At: at(31)})
	if w.State != StateRequested || w.Reason != ReasonApproverRevoked || len(w.Approvals) != 1 || w.Approvals[0].By != "bob" {
		t.Fatalf("after re-check: %s %s %+v", w.State, w.Reason, w.Approvals)
	}
	if !w.Envelope.IsZero() || len(w.Retired) != 1 || !w.Retired[0].Unsigned || w.Retired[0].TxID != old || w.SpentAttempts() != 0 {
		t.Fatalf("retired %+v, envelope %+v, spent %d", w.Retired, w.Envelope, w.SpentAttempts())
	}
	w = step(t, w, Approve{By: "dave", Policy: fourEyes(t), At: at(32)})
	if w.State != StateApproved {
		t.Fatalf("state %s", w.State)
	}
	decideErr(t, w, BuildEnvelope{Envelope: envelope("one", exp1), Policy: fourEyes(t), At: at(33)}, ErrInvalidTransition)
	w = step(t, w, BuildEnvelope{Envelope: envelope("again", exp1+600_000), Policy: fourEyes(t), At: at(33)})
	if w.Attempt != 2 || w.State != StateSigning || w.SpentAttempts() != 1 {
		t.Fatalf("attempt %d state %s spent %d", w.Attempt, w.State, w.SpentAttempts())
	}
	if _, err := Audit(eventsOf(t, reach(t, StateSigning, pathOpts{}), []Command{
		RecheckApprovals{Policy: policyNeeding(t, 3, 2), At: at(31)},
		Approve{By: "dave", Policy: policyNeeding(t, 3, 2), At: at(32)},
		BuildEnvelope{Envelope: envelope("again", exp1+600_000), Policy: policyNeeding(t, 3, 2), At: at(33)},
	})); err != nil {
		t.Fatal(err)
	}
}

func TestUnsignedEnvelopeIsReplacedWithoutProofSignedOneIsNot(t *testing.T) {
	w := reach(t, StateSigning, pathOpts{})
	next := envelope("new owner", exp1+600_000)
	c := ReplaceUnsigned{RetiredTxID: w.TxID(), Reason: ReasonSignerChanged, Envelope: next, At: at(30)}
	w2 := step(t, w, c)
	if w2.State != StateSigning || w2.Attempt != 2 || w2.TxID() != next.TxID || !w2.Retired[0].Unsigned || w2.Retired[0].ReplacedBy != next.TxID {
		t.Fatalf("%+v", w2)
	}
	decideNothing(t, w2, c)
	signed := step(t, w, RecordSignature{Policy: fourEyes(t), TxID: w.TxID(), Signature: signature(0xaa), At: at(30)})
	decideErr(t, signed, c, ErrInvalidTransition)
}

func TestFailureOfASignedEnvelopeNeedsItsProof(t *testing.T) {
	w := reach(t, StateBroadcast, pathOpts{})
	exp := w.Envelope.Expiration
	good := proof(exp)
	mismatched := proof(exp)
	mismatched.Scan.From = refBlock + 1
	mismatched.Scan.FromID = blockIDHex(refBlock + 1)
	otherChain := proof(exp)
	otherChain.Scan.FromID = blockIDHex(refBlock)[:16] + blockIDHex(refBlock + 7)[16:]
	cases := []struct {
		name string
		cmd  Fail
		want *Error
	}{
		{"no proof", Fail{Reason: ReasonAttemptsExhausted}, ErrInvalidEvidence},
		{"receipt that proves nothing", Fail{Reason: ReasonReverted, Receipt: &FailureReceipt{BlockNumber: 9, BlockTime: 9, Result: "DEFAULT"}}, ErrInvalidEvidence},
		{"receipt of another failure", Fail{Reason: ReasonOutOfEnergy, Receipt: &FailureReceipt{BlockNumber: 9, BlockTime: 9, Result: "REVERT"}}, ErrInvalidEvidence},
		{"receipt without its block", Fail{Reason: ReasonReverted, Receipt: &FailureReceipt{Result: "REVERT"}}, ErrInvalidEvidence},
		{"scan that skips the reference block", Fail{Reason: ReasonAttemptsExhausted, Evidence: &mismatched}, ErrInvalidEvidence},
		{"scan of another chain", Fail{Reason: ReasonAttemptsExhausted, Evidence: &otherChain}, ErrInvalidEvidence},
		{"both proofs", Fail{Reason: ReasonReverted, Receipt: &FailureReceipt{BlockNumber: 9, BlockTime: 9, Result: "REVERT"}, Evidence: &good}, ErrInvalidEvidence},
		{"failing receipt", Fail{Reason: ReasonReverted, Receipt: &FailureReceipt{BlockNumber: 9, BlockTime: 9, Result: "REVERT"}}, nil},
		{"proof of death", Fail{Reason: ReasonAttemptsExhausted, Evidence: &good}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cmd
			c.At = at(40)
			if tc.want != nil {
				decideErr(t, w, c, tc.want)
				return
			}
			if w2 := step(t, w, c); w2.State != StateFailed {
				t.Fatalf("state %s", w2.State)
			}
		})
	}
	// Before a signature nothing can land: no proof is needed.
	if w := step(t, reach(t, StateSigning, pathOpts{}), Fail{Reason: "signer_refused", At: at(20)}); w.State != StateFailed {
		t.Fatal(w.State)
	}
}

func TestRebuildScanMustStartAtTheEnvelopesReferenceBlock(t *testing.T) {
	w := reach(t, StateBroadcast, pathOpts{})
	ev := proof(w.Envelope.Expiration)
	ev.Scan.From, ev.Scan.FromID = refBlock+3, blockIDHex(refBlock+3)
	decideErr(t, w, Rebuild{RetiredTxID: w.TxID(), Evidence: ev, Envelope: envelope("two", exp1+3_600_000), At: at(30)}, ErrInvalidEvidence)
	ev = proof(w.Envelope.Expiration)
	ev.Scan = BlockScan{}
	decideErr(t, w, Rebuild{RetiredTxID: w.TxID(), Evidence: ev, Envelope: envelope("two", exp1+3_600_000), At: at(30)}, ErrInvalidEvidence)
}

func TestLeaseIsBoundedByTheServersRecordTimeOfTheClaim(t *testing.T) {
	w := reach(t, StateSigning, pathOpts{})
	server := at(20)
	ahead := server.Add(365 * 24 * time.Hour) // the claimant's clock is a year fast
	evs, err := Decide(w, ClaimWithdrawal{Worker: "fast", LeaseUntil: ahead.Add(30 * time.Second), At: ahead})
	if err != nil {
		t.Fatal(err)
	}
	folded := Evolve(w, evs[0])
	if !folded.Claim.HeldAt(server.Add(time.Hour)) {
		t.Fatal("without the record time the claimant's clock rules (what an unstamped state can know)")
	}
	w = EvolveRecorded(w, evs[0], server)
	if w.Claim.Until() != server.Add(30*time.Second) || w.Claim.HeldAt(server.Add(31*time.Second)) {
		t.Fatalf("lease until %s, want the server's record time + 30s", w.Claim.Until())
	}
	// Another worker with an honest clock takes over once that has passed,
	// and the audit, given the record times, agrees.
	take := ClaimWithdrawal{Worker: "honest", LeaseUntil: server.Add(2 * time.Minute), At: server.Add(time.Minute)}
	evs2, err := Decide(w, take)
	if err != nil {
		t.Fatal(err)
	}
	log := append(eventsOf(t, Withdrawal{}, happyPath(t, pathOpts{})[:7]), evs[0], evs2[0])
	times := make([]time.Time, len(log))
	times[len(log)-2], times[len(log)-1] = server, server.Add(time.Minute)
	if _, err := AuditRecorded(log, times); err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(log); !errors.Is(err, ErrClaimHeld) {
		t.Fatalf("without record times the takeover looks early: %v", err)
	}
	// A clock that is slow is bounded by its own lease: the server's bound
	// never extends a lease.
	slow := Claim{Worker: "slow", At: server.Add(-time.Hour), LeaseUntil: server.Add(-time.Hour + 30*time.Second), RecordedAt: server}
	if slow.Until() != slow.LeaseUntil {
		t.Fatalf("until %s", slow.Until())
	}
}

func TestInternalCreditsLiveApartFromOperatorCreditIDs(t *testing.T) {
	const wid = "5f0c7a3e-2b1d-4c8e-9a6f-1d2e3f4a5b6c"
	var a Account
	if _, err := DecideAccount(a, Credit{Account: "acct-2", CreditID: InternalCreditPrefix + wid, Amount: usdt("5"), At: at(1)}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("operator credit in the reserved namespace: %v", err)
	}
	// A credit recorded before the prefix was reserved does not collide
	// with the internal transfer of the same withdrawal.
	a = foldAccount(t, a, AccountCredited{Account: "acct-2", CreditID: InternalCreditPrefix + wid, Amount: usdt("5"), At: at(1)})
	in := CreditInternal{Account: "acct-2", WithdrawalID: wid, Amount: usdt("1500"), At: at(2)}
	evs, err := DecideAccount(a, in)
	if err != nil || len(evs) != 1 {
		t.Fatalf("internal credit: %v %v", evs, err)
	}
	a = foldAccount(t, a, evs[0])
	if got, ok := a.InternalCredit(wid); !ok || !got.Equal(usdt("1500")) || !a.Available().Equal(usdt("1505")) {
		t.Fatalf("internal %s %v, available %s", got, ok, a.Available())
	}
	if evs, err := DecideAccount(a, in); err != nil || len(evs) != 0 {
		t.Fatalf("replay: %v %v", evs, err)
	}
	in.Amount = usdt("1")
	if _, err := DecideAccount(a, in); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatal(err)
	}
}

// eventsOf decides cmds from w and returns every event of the log from the
// start (w's own history is replayed by reach, so callers pass a fresh w
// or accept only the tail).
func eventsOf(t *testing.T, w Withdrawal, cmds []Command) []Event {
	t.Helper()
	var out []Event
	if w.Exists() {
		// Rebuild w's history by replaying the path that reaches its state.
		var v Withdrawal
		for _, c := range happyPath(t, pathOpts{}) {
			if v.State == w.State && v.Version == w.Version {
				break
			}
			evs, err := Decide(v, c)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, evs...)
			for _, e := range evs {
				v = Evolve(v, e)
			}
		}
		w = v
	}
	for _, c := range cmds {
		evs, err := Decide(w, c)
		if err != nil {
			t.Fatalf("Decide(%T) in %s: %v", c, w.State, err)
		}
		out = append(out, evs...)
		for _, e := range evs {
			w = Evolve(w, e)
		}
	}
	return out
}

func foldAccount(t *testing.T, a Account, e AccountEvent) Account {
	t.Helper()
	if err := checkAccountEvent(a, e); err != nil {
		t.Fatal(err)
	}
	return EvolveAccount(a, e)
}

func TestInternalSettlementDoesNotCountARevokedApprover(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{internal: true})
	decideErr(t, w, SettleInternally{Policy: fourEyes(t), Revoked: []string{"bob"}, At: at(30)}, ErrApprovalsInsufficient)
	if w := step(t, w, SettleInternally{Policy: fourEyes(t), At: at(30)}); w.State != StateConfirmed {
		t.Fatal(w.State)
	}
}
