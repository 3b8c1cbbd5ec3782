package sagas_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// readyMany makes n withdrawals ready to send.
func (r *bcRig) readyMany(label string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = r.ready(bcAddress(label+string(rune('A'+i%26))+string(rune('a'+i/26))), "1.5")
	}
	return ids
}

// allTerminal holds once every one of ids is terminal.
func (r *bcRig) allTerminal(ids []string) func() bool {
	return func() bool {
		for _, id := range ids {
			if !r.load(id).Terminal() {
				return false
			}
		}
		return true
	}
}

// A pipelined worker has node calls for different withdrawals in flight
// at once: the node below lets no Broadcast through until four of them
// are waiting together, which a worker driving one withdrawal at a time
// could never do (its calls would time out and nothing would move). The
// gate counts the calls waiting now, not every call ever made: calls that
// timed out one after another do not open it. (Broadcast, not Head: a
// round reads the head once for all its withdrawals.)
func TestAPipelinedWorkerOverlapsNodeCallsOfDifferentWithdrawals(t *testing.T) {
	r := newBCRig(t)
	ids := r.readyMany("overlap", 4)
	var waiting atomic.Int32
	gate := make(chan struct{})
	var once sync.Once
	r.node.Before = func(ctx context.Context, m tron.NodeMethod) error {
		if m != tron.NodeBroadcast {
			return nil
		}
		if waiting.Add(1) >= 4 {
			once.Do(func() { close(gate) })
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			waiting.Add(-1)
			return ctx.Err()
		}
	}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 4; c.NodeTimeout = 20 * time.Second })
	if _, err := w1.Step(r.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate:
	default:
		t.Fatal("no four node calls were ever in flight together")
	}
	r.until(40, r.allTerminal(ids), w1)
	r.allPaidOnce(ids)
}

// A worker with 64 withdrawals in flight dies mid-batch (at the send of
// the 20th to get there; the others wherever they were). Nothing more of
// it reaches the log or the node, and a fresh worker, once the leases
// lapsed, brings every one of them to exactly one outcome: paid once.
func TestAWorkerWith64InFlightCrashingMidBatchRecoversEachToOneOutcome(t *testing.T) {
	r := newBCRig(t)
	start := time.Now()
	ids := r.readyMany("batch", 64)
	t.Logf("ready after %v", time.Since(start))
	var sends atomic.Int32
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) {
		c.Inflight = 64
		c.Crash = func(p sagas.CrashPoint, _ string) bool {
			return p == sagas.CrashAfterSend && sends.Add(1) == 20
		}
	})
	crashed := false
	for i := 0; i < 50 && !crashed; i++ {
		_, err := w1.Step(r.ctx)
		switch {
		case errors.Is(err, sagas.ErrCrashed):
			crashed = true
		case err != nil:
			t.Fatal(err)
		default:
			r.sim.Advance(1)
		}
	}
	if !crashed {
		t.Fatal("the worker never crashed")
	}
	states := map[aggregate.State]int{}
	for _, id := range ids {
		states[r.load(id).State]++
	}
	t.Logf("at the crash: %v", states)
	if _, err := w1.Step(r.ctx); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("a dead worker stepped: %v", err)
	}
	r.clock.Advance(bcLease + time.Second)
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Inflight = 64 })
	t.Logf("crashed after %v", time.Since(start))
	r.until(60, r.allTerminal(ids), w2)
	t.Logf("all terminal after %v", time.Since(start))
	r.allPaidOnce(ids)
	t.Logf("checked after %v", time.Since(start))
}

// allPaidOnce is paidOnce for many withdrawals at once (paidOnce reloads
// every withdrawal per send, which is quadratic): each is confirmed, with
// exactly one of its txids on chain, SUCCESS, its amount to its address,
// the confirmed one, one envelope; the node was sent nothing no log
// holds; the ledger settled each reservation.
func (r *bcRig) allPaidOnce(ids []string) {
	r.t.Helper()
	known := map[string]bool{}
	for _, id := range ids {
		w := r.load(id)
		if w.State != aggregate.StateConfirmed {
			r.t.Fatalf("%s is %s (%s %s), want confirmed", id, w.State, w.Reason, w.Detail)
		}
		for _, txid := range append(w.RetiredTxIDs(), w.TxID()) {
			known[txid] = true
		}
		txs := r.chainTxs(w)
		if len(txs) != 1 || txs[0].Receipt != tron.ReceiptSuccess || tron.HexID(txs[0].TxID) != w.Confirmation.TxID {
			r.t.Fatalf("%s: %d transfers on chain (%+v), confirmed %s", id, len(txs), txs, w.Confirmation.TxID)
		}
		if tx := txs[0]; tx.Amount.Cmp(w.Amount.Units()) != 0 || tx.To.String() != w.ToAddress {
			r.t.Fatalf("%s: chain pays %s to %s", id, tx.Amount, tx.To)
		}
		if n := bcCount(r.events(id), aggregate.EventEnvelopeBuilt); n != 1 || w.Attempt != 1 {
			r.t.Fatalf("%s: %d envelopes, attempt %d", id, n, w.Attempt)
		}
		if err := r.ledger.Finish(r.ctx, w); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, s := range r.sim.BroadcastLog() {
		if !known[tron.HexID(s.TxID)] {
			r.t.Fatalf("the node was sent %s, which no withdrawal's log holds", tron.HexID(s.TxID))
		}
	}
	a, _, err := r.repo.AccountWithHistory(r.ctx, bcAccount)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		r.t.Fatal(err)
	}
	for _, id := range ids {
		if res, ok := a.Reservation(id); !ok || res.Status != aggregate.ReservationSettled {
			r.t.Fatalf("reservation of %s: %+v", id, res)
		}
	}
}
