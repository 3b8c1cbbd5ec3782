package projections

import (
	"sync/atomic"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
)

// Workers are woken by the projector when a withdrawal becomes ready to
// send, not by a fixed poll: OnReady is called once the approval that
// makes it ready is folded, and not for events that leave nothing ready.
func TestOnReadyIsCalledWhenAWithdrawalBecomesReady(t *testing.T) {
	w := newWorld(t)
	p := w.start(Options{})
	var woken atomic.Int32
	p.OnReady(func() { woken.Add(1) })
	waitFor(t, p, w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)}))
	waitFor(t, p, w.request(wLarge, "acct-a", "1500", minutes(1)))
	waitFor(t, p, w.do(wLarge, aggregate.Approve{By: "bob", Policy: w.policy, At: minutes(2)}))
	if n := woken.Load(); n != 0 {
		t.Fatalf("woken %d times before anything was ready", n)
	}
	waitFor(t, p, w.do(wLarge, aggregate.Approve{By: "carol", Policy: w.policy, At: minutes(3)}))
	if n := woken.Load(); n != 1 {
		t.Fatalf("woken %d times once the withdrawal became ready, want 1", n)
	}
}
