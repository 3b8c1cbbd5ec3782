package aggregate

import (
	"errors"
	"testing"
)

// Each forged event below is legal by the transition table alone; what makes
// it a forgery is its data. Decide cannot write any of them and Audit must
// refuse every one.
func TestAuditRefusesEventsWithForgedData(t *testing.T) {
	env := envelope("one", exp1)
	next := envelope("two", exp1+3_600_000)
	cases := []struct {
		name  string
		state State
		o     pathOpts
		ev    Event
		want  *Error
	}{
		{"request with a non-canonical id", StateNone, pathOpts{}, Requested{ID: "5F0C7A3E-2B1D-4C8E-9A6F-1D2E3F4A5B6C", Account: "a", ToAddress: "T", Amount: usdt("1"), Asset: USDT.Code, RequestedBy: "x", RequiredApprovals: 1, At: t0}, ErrInvalidOperationID},
		{"request for zero", StateNone, pathOpts{}, Requested{ID: opID, Account: "a", ToAddress: "T", Amount: Amount{}, Asset: USDT.Code, RequestedBy: "x", RequiredApprovals: 1, At: t0}, ErrInvalidAmount},
		{"request needing no approval", StateNone, pathOpts{}, Requested{ID: opID, Account: "a", ToAddress: "T", Amount: usdt("1"), Asset: USDT.Code, RequestedBy: "x", RequiredApprovals: 0, At: t0}, ErrInvalidEvent},
		{"event without a time", StateNone, pathOpts{}, Requested{ID: opID, Account: "a", ToAddress: "T", Amount: usdt("1"), Asset: USDT.Code, RequestedBy: "x", RequiredApprovals: 1}, ErrInvalidEvent},
		{"approval by the same approver twice", StateRequested, pathOpts{}, ApprovalRecorded{Approval: Approval{By: "zed", At: t0}, RequiredApprovals: 3, At: t0}, nil},
		{"approved with too few approvals", StateRequested, pathOpts{}, Approved{Approval: Approval{By: "zed", At: t0}, RequiredApprovals: 2, At: t0}, ErrApprovalsInsufficient},
		{"recorded approval that was sufficient", StateRequested, pathOpts{}, ApprovalRecorded{Approval: Approval{By: "zed", At: t0}, RequiredApprovals: 1, At: t0}, ErrInvalidEvent},
		{"invalidation of sufficient approvals", StateApproved, pathOpts{}, ApprovalsInvalidated{Reason: ReasonPolicyTightened, RequiredApprovals: 2, At: t0}, ErrInvalidEvent},
		{"cancellation without who", StateRequested, pathOpts{}, Rejected{Reason: ReasonCancelled, At: t0}, ErrInvalidEvent},
		{"reservation of another amount", StateRequested, pathOpts{unreserved: true}, FundsReserved{Account: "acct-1", Amount: usdt("1"), At: t0}, ErrInvalidEvent},
		{"second reservation", StateApproved, pathOpts{}, FundsReserved{Account: "acct-1", Amount: usdt("1500"), At: t0}, ErrInvalidTransition},
		{"claim over a held lease", StateApproved, pathOpts{}, Claimed{Worker: "w9", LeaseUntil: at(60), At: at(5)}, ErrClaimHeld},
		{"second route", StateApproved, pathOpts{}, Routed{Route: mustExternal(t), At: t0}, ErrInvalidTransition},
		{"internal settlement on an external route", StateApproved, pathOpts{}, SettledInternally{Account: "acct-2", Amount: usdt("1500"), At: t0}, ErrInvalidRoute},
		{"internal settlement without reservation", StateApproved, pathOpts{internal: true, unreserved: true}, SettledInternally{Account: "acct-2", Amount: usdt("1500"), At: t0}, ErrFundsNotReserved},
		{"envelope without reservation", StateApproved, pathOpts{unreserved: true}, EnvelopeBuilt{Attempt: 1, Envelope: env, At: t0}, ErrFundsNotReserved},
		{"envelope numbered 2", StateApproved, pathOpts{}, EnvelopeBuilt{Attempt: 2, Envelope: env, At: t0}, ErrInvalidTransition},
		{"signature of another txid", StateSigning, pathOpts{}, Signed{TxID: next.TxID, Signature: signature(1), At: t0}, ErrInvalidTransition},
		{"malformed signature", StateSigning, pathOpts{}, Signed{TxID: env.TxID, Signature: "abcd", At: t0}, ErrInvalidCommand},
		{"intent skipping a send", StateSigned, pathOpts{}, Broadcasting{TxID: env.TxID, Attempt: 1, Send: 2, At: t0}, ErrInvalidTransition},
		{"acceptance of an unsent send", StateBroadcasting, pathOpts{}, BroadcastAccepted{TxID: env.TxID, Attempt: 1, Send: 2, Result: "SUCCESS", At: t0}, ErrInvalidTransition},
		{"rebuild of another txid", StateBroadcast, pathOpts{}, Rebuilt{Attempt: 2, RetiredTxID: next.TxID, Evidence: proof(exp1), Envelope: next, At: t0}, ErrInvalidTransition},
		{"rebuild reusing the txid", StateBroadcast, pathOpts{}, Rebuilt{Attempt: 2, RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: env, At: t0}, ErrInvalidEnvelope},
		{"rebuild into an expired envelope", StateBroadcast, pathOpts{}, Rebuilt{Attempt: 2, RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: envelope("two", exp1), At: t0}, ErrInvalidEnvelope},
		{"confirmation with a revert receipt", StateBroadcast, pathOpts{}, Confirmed{TxID: env.TxID, BlockNumber: 5, BlockTime: 5, Receipt: "REVERT", At: t0}, ErrInvalidEvent},
		{"failure of another txid", StateBroadcast, pathOpts{}, Failed{Reason: "x", TxID: next.TxID, At: t0}, ErrInvalidTransition},
		{"pointer event", StateBroadcast, pathOpts{}, &Failed{Reason: "x", At: t0}, ErrUnknownEvent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := reach(t, tc.state, tc.o)
			if tc.want == nil { // approve "zed" first, then forge zed again
				w = Evolve(w, ApprovalRecorded{Approval: Approval{By: "zed", At: t0}, RequiredApprovals: 3, At: t0})
				tc.want = ErrInvalidTransition
			}
			if err := checkEvent(w, tc.ev); !errors.Is(err, tc.want) {
				t.Fatalf("want %s, got %v", tc.want.Code, err)
			}
		})
	}
}

func TestEveryCommandNeedsItsTime(t *testing.T) {
	env := envelope("one", exp1)
	cmds := []Command{
		Approve{By: "bob", Policy: fourEyes(t)}, RecheckApprovals{Policy: fourEyes(t)}, Cancel{By: "x"},
		Reject{Reason: "x"}, RecordReservation{}, ClaimWithdrawal{Worker: "w", LeaseUntil: at(1)},
		ChooseRoute{Route: mustExternal(t)}, SettleInternally{Policy: fourEyes(t)},
		BuildEnvelope{Envelope: env, Policy: fourEyes(t)}, RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(1)},
		RecordBroadcastIntent{TxID: env.TxID, Send: 1}, RecordAccepted{TxID: env.TxID, Send: 1, Result: "SUCCESS"},
		Rebuild{RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: env},
		Confirm{TxID: env.TxID, BlockNumber: 1, BlockTime: 1, Receipt: ReceiptSuccess}, Fail{Reason: "x"},
	}
	w := reach(t, StateApproved, pathOpts{})
	for _, c := range cmds {
		if _, err := Decide(w, c); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%T without at: %v", c, err)
		}
	}
	for _, c := range []AccountCommand{
		Credit{Account: acct, CreditID: "c", Amount: usdt("1")},
		Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("1")},
		Release{Account: acct, WithdrawalID: wd1, Reason: "x"},
		Settle{Account: acct, WithdrawalID: wd1},
	} {
		if _, err := DecideAccount(Account{}, c); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%T without at: %v", c, err)
		}
	}
}

func TestSignaturesMustBeSixtyFiveBytesWithARecoveryByte(t *testing.T) {
	w := reach(t, StateSigning, pathOpts{})
	txid := w.TxID()
	for sig, ok := range map[string]bool{
		signature(0xaa):              true,
		signature(0xaa)[:128] + "00": true,
		signature(0xaa)[:128] + "1b": true,
		signature(0xaa)[:128] + "1C": true,
		signature(0xaa)[:128] + "02": false,
		signature(0xaa)[:126]:        false,
		"zz" + signature(0xaa)[2:]:   false,
		"":                           false,
	} {
		_, err := Decide(w, RecordSignature{Policy: fourEyes(t), TxID: txid, Signature: sig, At: at(30)})
		if (err == nil) != ok {
			t.Errorf("%q: %v", sig, err)
		}
	}
}
