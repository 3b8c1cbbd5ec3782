package aggregate

import (
	"testing"
)

// foldedPath is the pipelined worker's happy path: claim, route and the
// first envelope in one event; signature; intent; the solid block's
// confirmation straight from broadcasting (the acceptance kept in hand).
func foldedPath(t *testing.T) []Command {
	env := envelope("one", exp1)
	cmds := happyPath(t, pathOpts{unrouted: true})
	return append(cmds,
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(10), Route: mustExternal(t), At: at(5)},
		RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0xaa), At: at(6)},
		RecordBroadcastIntent{TxID: env.TxID, Send: 1, At: at(7)},
		Confirm{TxID: env.TxID, BlockNumber: 100, BlockTime: exp1 - 30_000, Receipt: ReceiptSuccess, At: at(9)},
	)
}

func TestClaimRouteAndEnvelopeAreOneEventThatAuditsClean(t *testing.T) {
	events := history(t, foldedPath(t))
	after := 0
	for i, e := range events {
		if e.EventType() == EventApproved {
			after = len(events) - i - 1
		}
	}
	if after != 4 {
		t.Fatalf("%d events from approved to confirmed, want 4", after)
	}
	built := events[len(events)-4].(EnvelopeBuilt)
	if built.Worker != "w1" || built.Route == nil || !built.Route.IsExternal() {
		t.Fatalf("envelope event %+v does not carry the claim and route", built)
	}
	// Through the log and back: the same events, and the audit passes.
	decoded := roundTrip(t, events)
	w, err := Audit(decoded)
	if err != nil {
		t.Fatal(err)
	}
	if w.State != StateConfirmed || w.Claim.Worker != "" || !w.Route.IsExternal() || w.Acceptance.Send != 0 {
		t.Fatalf("%s claim %+v route %v", w.State, w.Claim, w.Route.Rail())
	}
	// Mid-way, the fold holds the claim the envelope carried.
	mid := Fold(decoded[:len(decoded)-3])
	if mid.State != StateSigning || mid.Claim.Worker != "w1" || !mid.Claim.LeaseUntil.Equal(at(10)) {
		t.Fatalf("after the envelope: %s %+v", mid.State, mid.Claim)
	}
}

func TestTheEnvelopesClaimIsFencedLikeAClaim(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{unrouted: true})
	w = step(t, w, ClaimWithdrawal{Worker: "w2", LeaseUntil: at(10), At: at(4)})
	env := envelope("one", exp1)
	decideErr(t, w, BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(12), Route: mustExternal(t), At: at(5)}, ErrClaimHeld)
	// Once w2's lease lapsed the envelope takes the claim over.
	taken := step(t, w, BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(20), Route: mustExternal(t), At: at(10)})
	if taken.Claim.Worker != "w1" || taken.State != StateSigning {
		t.Fatalf("%s %+v", taken.State, taken.Claim)
	}
	// Decided again, it records nothing new.
	decideNothing(t, taken, BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(20), Route: mustExternal(t), At: at(11)})
	// An internal route never carries an envelope.
	internal, _ := InternalRoute("acct-2", "custodied")
	decideErr(t, w, BuildEnvelope{Envelope: env, Policy: fourEyes(t), Worker: "w1", LeaseUntil: at(20), Route: internal, At: at(10)}, ErrInvalidRoute)
}

func TestAStoredEnvelopeThatRoutesTwiceOrLeasesWithoutAWorkerFailsTheAudit(t *testing.T) {
	events := history(t, foldedPath(t))
	i := len(events) - 4
	bad := events[i].(EnvelopeBuilt)
	bad.Worker = ""
	tampered := append(append([]Event{}, events[:i]...), bad)
	if _, err := Audit(tampered); err == nil {
		t.Fatal("a lease without a worker passed the audit")
	}
	routed := append(append([]Event{}, events[:i]...), Routed{Route: mustExternal(t), At: at(4)}, events[i])
	if _, err := Audit(routed); err == nil {
		t.Fatal("routing twice passed the audit")
	}
}
