package aggregate

import (
	"encoding/json"
	"errors"
	"testing"
)

// signedAndSent is the worker's happy path today: claim, route and the
// first envelope in one event; the signature and the first send's intent
// in one event; the solid block's confirmation.
func signedAndSent(t *testing.T) []Command {
	env := envelope("one", exp1)
	return append(happyPath(t, pathOpts{unrouted: true}),
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(10), Route: mustExternal(t), At: at(5)},
		RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0xaa), Send: 1, At: at(6)},
		Confirm{TxID: env.TxID, BlockNumber: 100, BlockTime: exp1 - 30_000, Receipt: ReceiptSuccess, At: at(9)},
	)
}

// roundTrip passes events through their JSON, as the log does.
func roundTrip(t *testing.T, events []Event) []Event {
	t.Helper()
	var out []Event
	for _, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeWithdrawalEvent(e.EventType(), data)
		if err != nil {
			t.Fatalf("%s: %v", e.EventType(), err)
		}
		out = append(out, d)
	}
	return out
}

// A log written before the signature carried the first intent (signed,
// then broadcasting send 1) and one written after (signed with send 1)
// fold to the same withdrawal, event for event once both have sent, and
// both pass the audit; the new path is 3 appends from approved to
// confirmed.
func TestSignatureCarryingTheFirstIntentFoldsLikeSignatureThenIntent(t *testing.T) {
	newLog := roundTrip(t, history(t, signedAndSent(t)))
	oldLog := roundTrip(t, history(t, foldedPath(t)))
	after := 0
	for i, e := range newLog {
		if e.EventType() == EventApproved {
			after = len(newLog) - i - 1
		}
	}
	if after != 3 {
		t.Fatalf("%d events from approved to confirmed, want 3", after)
	}
	if s := newLog[len(newLog)-2].(Signed); s.Send != 1 || s.PolicyVersion != 1 {
		t.Fatalf("signed event %+v does not carry the first intent", s)
	}
	if s := oldLog[len(oldLog)-3].(Signed); s.Send != 0 {
		t.Fatalf("an old signed event decodes with send %d", s.Send)
	}
	for _, log := range [][]Event{newLog, oldLog} {
		if _, err := Audit(log); err != nil {
			t.Fatal(err)
		}
	}
	// Just signed, the old log is in signed with no send; once its intent
	// follows, it is where the new log is after its one event.
	signedOld := Fold(oldLog[:len(oldLog)-2])
	if signedOld.State != StateSigned || signedOld.Sends != 0 {
		t.Fatalf("old log after its signature: %s sends %d", signedOld.State, signedOld.Sends)
	}
	sentOld, sentNew := Fold(oldLog[:len(oldLog)-1]), Fold(newLog[:len(newLog)-1])
	if sentNew.State != StateBroadcasting || sentNew.Sends != 1 || sentNew.Signature != signature(0xaa) {
		t.Fatalf("new log after its signature: %s sends %d", sentNew.State, sentNew.Sends)
	}
	same := func(a, b Withdrawal) bool {
		a.Version, b.Version = 0, 0
		a.UpdatedAt, b.UpdatedAt = at(0), at(0)
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	if !same(sentOld, sentNew) {
		t.Fatalf("folds differ once sent:\n old %+v\n new %+v", sentOld, sentNew)
	}
	if endOld, endNew := Fold(oldLog), Fold(newLog); !same(endOld, endNew) || endNew.State != StateConfirmed {
		t.Fatalf("folds differ at the end:\n old %+v\n new %+v", endOld, endNew)
	}
	// After the one event, the second send and an acceptance of send 1
	// are decided as after the two.
	next := step(t, sentNew, RecordAccepted{TxID: sentNew.TxID(), Send: 1, Result: "SUCCESS", At: at(7)})
	next = step(t, next, RecordBroadcastIntent{TxID: sentNew.TxID(), Send: 2, At: at(8)})
	if next.State != StateBroadcasting || next.Sends != 2 {
		t.Fatalf("resend after the one event: %s sends %d", next.State, next.Sends)
	}
}

// The signature carrying the first intent is decided on every check of a
// signature and of an intent; refused, it decides nothing.
func TestSignatureWithTheFirstIntentRefusals(t *testing.T) {
	signing := reach(t, StateSigning, pathOpts{})
	env := signing.Envelope
	sig := signature(0xaa)
	cmd := func(mod func(*RecordSignature)) RecordSignature {
		c := RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: sig, Send: 1, At: at(6)}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	decideErr(t, signing, cmd(func(c *RecordSignature) { c.TxID = envelope("other", exp1).TxID }), ErrInvalidTransition)
	decideErr(t, signing, cmd(func(c *RecordSignature) { c.Send = 2 }), ErrInvalidCommand)
	decideErr(t, signing, cmd(func(c *RecordSignature) { c.Send = -1 }), ErrInvalidCommand)
	// The policy in force needs three approvals now; or an approver lost
	// the role.
	decideErr(t, signing, cmd(func(c *RecordSignature) { c.Policy = policyNeeding(t, 3, 2) }), ErrApprovalsInsufficient)
	decideErr(t, signing, cmd(func(c *RecordSignature) { c.Revoked = []string{"carol"} }), ErrApprovalsInsufficient)

	// Recorded: the same command again is a replay; a different signature
	// is refused, with or without the intent.
	sent := step(t, signing, cmd(nil))
	if sent.State != StateBroadcasting || sent.Sends != 1 {
		t.Fatalf("%s sends %d", sent.State, sent.Sends)
	}
	decideNothing(t, sent, cmd(nil))
	decideNothing(t, sent, cmd(func(c *RecordSignature) { c.Send = 0 }))
	decideErr(t, sent, cmd(func(c *RecordSignature) { c.Signature = signature(0xbb) }), ErrInvalidTransition)
	decideErr(t, sent, cmd(func(c *RecordSignature) { c.Signature = signature(0xbb); c.Send = 0 }), ErrInvalidTransition)
	resent := step(t, sent, RecordBroadcastIntent{TxID: env.TxID, Send: 2, At: at(7)})
	decideNothing(t, resent, cmd(nil))

	// Signed alone (an old log): the same signature with send 1 decides
	// what is left of it, the first intent — and nothing once it is there.
	signed := step(t, signing, cmd(func(c *RecordSignature) { c.Send = 0 }))
	if signed.State != StateSigned || signed.Sends != 0 {
		t.Fatalf("%s sends %d", signed.State, signed.Sends)
	}
	evs, err := Decide(signed, cmd(nil))
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	if b, ok := evs[0].(Broadcasting); !ok || b.Send != 1 || b.TxID != env.TxID {
		t.Fatalf("decided %+v, want the first intent", evs[0])
	}
	decideNothing(t, Evolve(signed, evs[0]), cmd(nil))

	// After a rebuild the new envelope's signature carries the first send
	// of the new attempt; the retired txid is refused.
	rebuilt := step(t, resent, Rebuild{RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: envelope("two", exp1+3_600_000), At: at(40)})
	decideErr(t, rebuilt, cmd(func(c *RecordSignature) { c.At = at(41) }), ErrInvalidTransition)
	again := step(t, rebuilt, cmd(func(c *RecordSignature) { c.TxID = rebuilt.TxID(); c.Signature = signature(0xcc); c.At = at(41) }))
	if again.State != StateBroadcasting || again.Sends != 1 || again.Attempt != 2 {
		t.Fatalf("%s sends %d attempt %d", again.State, again.Sends, again.Attempt)
	}
}

// The audit judges a stored signature that claims a send as it judges an
// intent: send 1 only, of the current envelope, legal only from signing.
func TestAuditRefusesASignatureWithAnIntentItCouldNotCarry(t *testing.T) {
	signing := reach(t, StateSigning, pathOpts{})
	env := signing.Envelope
	signed := step(t, signing, RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0xaa), At: at(6)})
	cases := []struct {
		name string
		w    Withdrawal
		e    Signed
		want *Error
	}{
		{"send 2", signing, Signed{TxID: env.TxID, Signature: signature(0xaa), Send: 2, At: at(6)}, ErrInvalidTransition},
		{"negative send", signing, Signed{TxID: env.TxID, Signature: signature(0xaa), Send: -1, At: at(6)}, ErrInvalidTransition},
		{"another txid", signing, Signed{TxID: envelope("other", exp1).TxID, Signature: signature(0xaa), Send: 1, At: at(6)}, ErrInvalidTransition},
		{"a second signature", signed, Signed{TxID: env.TxID, Signature: signature(0xaa), Send: 1, At: at(7)}, ErrInvalidTransition},
		{"malformed signature", signing, Signed{TxID: env.TxID, Signature: "abcd", Send: 1, At: at(6)}, ErrInvalidCommand},
	}
	for _, tc := range cases {
		if err := checkEvent(tc.w, tc.e); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Code)
		}
	}
	// Not in the table from signed: the fold ignores it.
	if got := Evolve(signed, cases[3].e); got.State != StateSigned || got.Sends != 0 {
		t.Errorf("a second signature folded to %s sends %d", got.State, got.Sends)
	}
}
