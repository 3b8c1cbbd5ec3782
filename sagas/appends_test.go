package sagas_test

import (
	"testing"

	"github.com/weir-payouts/weir/aggregate"
)

// appendsAfterApproval counts the events of a withdrawal stream after its
// approved event (each append of the worker writes one event).
func appendsAfterApproval(evs []aggregate.Event) int {
	for i, e := range evs {
		if e.EventType() == aggregate.EventApproved {
			return len(evs) - i - 1
		}
	}
	return -1
}

// Issue 12, item 3: approved → confirmed took 7 appends (claimed, routed,
// envelope_built, signed, broadcasting, broadcast_accepted, confirmed).
// Claim, route and the write-ahead are one decision and one append, the
// signature and the first send's intent another, and the node's
// acceptance is kept in hand: 3 — envelope_built, signed (send 1),
// confirmed — with the write-ahead still before the signature and the
// intent still before the send.
func TestAPayoutTakesThreeAppendsFromApprovedToConfirmed(t *testing.T) {
	r := newBCRig(t)
	ids := []string{r.ready(bcAddress("appends-1"), "10"), r.ready(bcAddress("appends-2"), "20")}
	w1 := r.worker("w1")
	for _, id := range ids {
		r.until(40, r.terminal(id), w1)
		w := r.paidOnce(id)
		evs := r.events(id)
		if n := appendsAfterApproval(evs); n != 3 {
			t.Fatalf("%s: %d appends from approved to confirmed, want 3 (was 7, then 4)", id, n)
		}
		// The one send had its intent in the log: the signature's.
		if in := bcIntents(evs); len(in) != 1 || in[0].Send != 1 || in[0].TxID != w.TxID() || len(r.sends(w)) != 1 {
			t.Fatalf("%s: intents %+v for %d sends", id, in, len(r.sends(w)))
		}
		if s := bcOfType[aggregate.Signed](evs); len(s) != 1 || s[0].Send != 1 {
			t.Fatalf("%s: signed events %+v", id, s)
		}
	}
}
