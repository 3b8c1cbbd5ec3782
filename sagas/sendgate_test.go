package sagas_test

import (
	"context"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

// Failure matrix: the wallet is empty at build time, then funded while
// sending is paused.
func TestWalletEmptyAtBuildTimePausesThenFundingResumes(t *testing.T) {
	r := newBCRig(t)
	hot := r.signer.Address()
	r.sim.SetBalance(hot, big.NewInt(0))
	r.sim.SetTRX(hot, 500*tron.SunPerTRX)
	mon, err := hotwallet.New(hotwallet.Config{Reader: r.node, Address: hot, FeeLimit: tron.DefaultFeeLimit, Clock: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Refresh(r.ctx); err != nil {
		t.Fatal(err)
	}
	id := r.ready(bcAddress("dry"), "250")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = mon })
	for range 5 {
		r.round(w1)
	}
	// Paused, not failed: still approved, no envelope, nothing sent.
	w := r.load(id)
	if w.State != aggregate.StateApproved || w.TxID() != "" || len(r.sends(w)) != 0 || len(r.sim.Transfers()) != 0 {
		t.Fatalf("with an empty wallet: state %s txid %q, %d sends, %d transfers", w.State, w.TxID(), len(r.sends(w)), len(r.sim.Transfers()))
	}
	if !w.Reserved {
		t.Fatal("the reservation was released while paused")
	}
	s := mon.Status()
	if s.Sending != hotwallet.SendingPaused || s.PausedReason == nil || !strings.Contains(*s.PausedReason, "USDT short") {
		t.Fatalf("status %+v", s)
	}

	// Funds arrive; the next reading resumes sending by itself.
	if err := r.sim.Fund(hot, big.NewInt(1000_000_000), 0); err != nil {
		t.Fatal(err)
	}
	if err := mon.Refresh(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.until(40, r.terminal(id), w1)
	r.paidOnce(id)
	if s := mon.Status(); s.Sending != hotwallet.SendingActive {
		t.Fatalf("still paused after paying: %+v", s)
	}
}

// refuseAfter lets the first n withdrawals through and refuses the rest.
type refuseAfter struct {
	n     int64
	asked atomic.Int64
}

func (g *refuseAfter) MaySend(context.Context, aggregate.Withdrawal) (bool, string) {
	return g.asked.Add(1) <= g.n, "test: the wallet ran dry"
}

// A withdrawal whose envelope exists is followed to its outcome whatever
// the gate says: the gate is asked once, before the build, never after.
func TestBuiltWithdrawalIsNeverPaused(t *testing.T) {
	r := newBCRig(t)
	gate := &refuseAfter{n: 1}
	id := r.ready(bcAddress("built"), "30")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = gate })
	r.until(40, r.terminal(id), w1)
	r.paidOnce(id)
	if n := gate.asked.Load(); n != 1 {
		t.Fatalf("the gate was asked %d times for one withdrawal", n)
	}
}

// Internal routes move no chain funds: an empty wallet does not hold them.
func TestInternalRouteIsNotPausedByAnEmptyWallet(t *testing.T) {
	r := newBCRig(t)
	gate := &refuseAfter{n: 0}
	to := bcAddress("custodied")
	r.custody[to] = "treasury"
	id := r.ready(to, "5")
	r.until(20, r.terminal(id), r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = gate }))
	if w := r.load(id); w.State != aggregate.StateConfirmed || gate.asked.Load() != 0 {
		t.Fatalf("internal payout: %s, gate asked %d times", w.State, gate.asked.Load())
	}
}
