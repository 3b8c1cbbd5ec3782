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
// Claim, route and the write-ahead are one decision and one append, and
// the node's acceptance is kept in hand: 4, with the write-ahead still
// before the signature and the intent still before the send.
func TestAPayoutTakesAtMostFourAppendsFromApprovedToConfirmed(t *testing.T) {
	r := newBCRig(t)
	ids := []string{r.ready(bcAddress("appends-1"), "10"), r.ready(bcAddress("appends-2"), "20")}
	w1 := r.worker("w1")
	for _, id := range ids {
		r.until(40, r.terminal(id), w1)
		r.paidOnce(id)
		if n := appendsAfterApproval(r.events(id)); n > 4 || n < 1 {
			t.Fatalf("%s: %d appends from approved to confirmed, want at most 4 (was 7)", id, n)
		}
	}
}
