package sagas_test

// Failure-matrix rows of issue 14, item 3: a failed receipt is not the end
// of the money. An OUT_OF_ENERGY or REVERT receipt on a solid block proves
// the transfer did not happen, so a worker with a send gate (the hot-wallet
// monitor) rebuilds the withdrawal — the receipt recorded as the rebuild's
// proof, within the bounded attempts — once the wallet can pay, instead of
// failing it. A SUCCESS receipt never allows a rebuild.

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

// funded gives the hot wallet USDT and TRX (both modelled from now on)
// and returns a monitor of it, read once: the send gate.
func (r *bcRig) funded(usdt string, trx int64) *hotwallet.Monitor {
	r.t.Helper()
	hot := r.signer.Address()
	r.sim.SetBalance(hot, bcUSDT(usdt).Units())
	r.sim.SetTRX(hot, trx*tron.SunPerTRX)
	mon, err := hotwallet.New(hotwallet.Config{Reader: r.node, Address: hot, FeeLimit: tron.DefaultFeeLimit, Clock: r.clock.Now})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := mon.Refresh(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	return mon
}

// gated runs rounds as r.until does, the monitor reading the wallet before
// each (as its Run loop does every interval).
func (r *bcRig) gated(mon *hotwallet.Monitor, max int, cond func() bool, workers ...*sagas.Worker) {
	r.t.Helper()
	for i := 0; i < max && !cond(); i++ {
		if err := mon.Refresh(r.ctx); err != nil {
			r.t.Fatal(err)
		}
		r.round(workers...)
	}
	if !cond() {
		r.t.Fatalf("condition not reached after %d rounds", max)
	}
}

// at runs f once, the first time the worker passes point for any
// withdrawal, and never crashes: a side effect at a precise step.
func at(point sagas.CrashPoint, f func()) sagas.CrashHook {
	var once sync.Once
	return func(p sagas.CrashPoint, _ string) bool {
		if p == point {
			once.Do(f)
		}
		return false
	}
}

// gatedDrain is a worker tuning: mon gates it, and drain empties the
// wallet the first time the worker passes point.
func gatedDrain(mon *hotwallet.Monitor, point sagas.CrashPoint, drain func()) func(*sagas.WorkerConfig) {
	return func(c *sagas.WorkerConfig) { c.Gate, c.Crash = mon, at(point, drain) }
}

// failedOnChain is the retired txid's receipt once it is in a solid block.
func (r *bcRig) failedOnChain(id string) func() bool {
	return func() bool {
		w := r.load(id)
		if w.TxID() == "" {
			return false
		}
		in, ok := r.sim.TxInfo(bcTxID(r.t, w.TxID()))
		return ok && in.Receipt != tron.ReceiptSuccess && in.BlockNumber <= r.sim.CurrentSolidHead().Number
	}
}

// paidOnceAfterFailures asserts the money moved exactly once after
// `failed` failed receipts: confirmed; one SUCCESS transfer on chain, the
// confirmed one, for the amount; every other txid of the withdrawal that is
// on chain failed there, and a rebuild retired it on exactly that receipt
// (block, result, fee), which its solid block still shows
// (sagas.VerifyReceipt). The reservation is settled.
func (r *bcRig) paidOnceAfterFailures(id string, failed int) aggregate.Withdrawal {
	r.t.Helper()
	w := r.load(id)
	if w.State != aggregate.StateConfirmed {
		r.t.Fatalf("%s is %s (%s %s), want confirmed", id, w.State, w.Reason, w.Detail)
	}
	var ok, bad int
	for _, tx := range r.chainTxs(w) {
		txid := tron.HexID(tx.TxID)
		if tx.Receipt == tron.ReceiptSuccess {
			ok++
			if txid != w.Confirmation.TxID || tx.Amount.Cmp(w.Amount.Units()) != 0 || tx.To.String() != w.ToAddress {
				r.t.Fatalf("successful transfer %s of %s to %s; confirmed %s", txid, tx.Amount, tx.To, w.Confirmation.TxID)
			}
			continue
		}
		bad++
		r.wantRetiredOnReceipt(w, tx)
	}
	if ok != 1 || bad != failed {
		r.t.Fatalf("%d successful and %d failed transfers on chain, want 1 and %d", ok, bad, failed)
	}
	if l := r.sim.Ledger(); l.Total.Cmp(w.Amount.Units()) != 0 {
		r.t.Fatalf("the chain moved %s units, want %s", l.Total, w.Amount.Units())
	}
	// The view shows what each payout burnt, the confirmation's too.
	v := w.View()
	if len(v.Receipts) != failed+1 || v.FeeBurnedTRX == nil || v.Receipts[failed].Result != aggregate.ReceiptSuccess || v.Receipts[failed].FeeSun == nil {
		r.t.Fatalf("view receipts %+v, fee burnt %v", v.Receipts, v.FeeBurnedTRX)
	}
	r.settled(w)
	return w
}

// wantRetiredOnReceipt: a rebuild retired tx on its failing receipt.
func (r *bcRig) wantRetiredOnReceipt(w aggregate.Withdrawal, tx tron.Transfer) {
	r.t.Helper()
	txid := tron.HexID(tx.TxID)
	in, _ := r.sim.TxInfo(tx.TxID)
	for _, rt := range w.Retired {
		if rt.TxID != txid {
			continue
		}
		rc := rt.Receipt
		if rc == nil || rc.Result != string(tx.Receipt) || rc.BlockNumber != tx.BlockNumber || rc.Fee == nil ||
			rc.Fee.Sun != in.FeeSun || rc.Fee.EnergyUsed != in.EnergyUsed || !rt.Evidence.IsZero() {
			r.t.Fatalf("failed txid %s (%s in block %d, fee %d) retired with %+v", txid, tx.Receipt, tx.BlockNumber, in.FeeSun, rt)
		}
		env := r.envelopeOf(w.ID, txid)
		if err := sagas.VerifyReceipt(r.ctx, r.sim, env, *rc); err != nil {
			r.t.Fatalf("the recorded receipt of %s: %v", txid, err)
		}
		return
	}
	r.t.Fatalf("txid %s failed on chain (%s) and no rebuild retired it", txid, tx.Receipt)
}

// envelopeOf finds the envelope with txid in the withdrawal's events.
func (r *bcRig) envelopeOf(id, txid string) aggregate.Envelope {
	r.t.Helper()
	for _, e := range r.events(id) {
		var env aggregate.Envelope
		switch ev := e.(type) {
		case aggregate.EnvelopeBuilt:
			env = ev.Envelope
		case aggregate.Rebuilt:
			env = ev.Envelope
		case aggregate.EnvelopeReplaced:
			env = ev.Envelope
		}
		if env.TxID == txid {
			return env
		}
	}
	r.t.Fatalf("no envelope %s in %s", txid, id)
	return aggregate.Envelope{}
}

// waitsUnpaid runs rounds while the wallet cannot pay: the failed
// withdrawal is neither rebuilt nor failed, its money still reserved.
func (r *bcRig) waitsUnpaid(mon *hotwallet.Monitor, id string, rounds int, workers ...*sagas.Worker) {
	r.t.Helper()
	for range rounds {
		if err := mon.Refresh(r.ctx); err != nil {
			r.t.Fatal(err)
		}
		r.round(workers...)
		w := r.load(id)
		if w.Attempt != 1 || w.Terminal() || !w.Reserved || bcCount(r.events(id), aggregate.EventRebuilt) != 0 {
			r.t.Fatalf("while the wallet cannot pay: %s attempt %d reason %s", w.State, w.Attempt, w.Reason)
		}
	}
	if s := mon.Status(); s.Sending != hotwallet.SendingPaused {
		r.t.Fatalf("the monitor shows sending %s while the rebuild waits for funds", s.Sending)
	}
}

// The wallet's TRX is drained between the build and the send: the node
// accepts the transfer, which runs out of energy on chain. The withdrawal
// waits, reserved, while the wallet cannot pay; once TRX arrives it is
// rebuilt by itself on the receipt, and paid once.
func TestOutOfEnergyOnChainIsRebuiltOnceFundedThenPaidOnce(t *testing.T) {
	r := newBCRig(t)
	mon := r.funded("1000", 500)
	hot := r.signer.Address()
	id := r.ready(bcAddress("out-of-energy"), "250")
	w1 := r.worker("w1", gatedDrain(mon, sagas.CrashAfterBuild, func() { r.sim.SetTRX(hot, 0) }))
	r.gated(mon, 40, r.failedOnChain(id), w1)
	if in, _ := r.sim.TxInfo(bcTxID(t, r.load(id).TxID())); in.Receipt != tron.ReceiptOutOfEnergy {
		t.Fatalf("receipt %s, want OUT_OF_ENERGY", in.Receipt)
	}
	r.waitsUnpaid(mon, id, 5, w1)

	r.sim.SetTRX(hot, 500*tron.SunPerTRX) // funded while paused: nothing else is done
	r.gated(mon, 60, r.terminal(id), w1)
	w := r.paidOnceAfterFailures(id, 1)
	rb := bcOfType[aggregate.Rebuilt](r.events(id))
	if len(rb) != 1 || rb[0].Receipt == nil || rb[0].Receipt.Result != string(tron.ReceiptOutOfEnergy) || w.Attempt != 2 {
		t.Fatalf("rebuilds %+v, attempt %d", rb, w.Attempt)
	}
	if s := mon.Status(); s.Sending != hotwallet.SendingActive {
		t.Fatalf("sending %s after the payout", s.Sending)
	}
}

// The wallet's USDT is drained right before the send: the transfer
// reverts on chain, burning its fee. Once USDT arrives, the withdrawal is
// rebuilt on the receipt (the fee recorded) and paid once.
func TestRevertOnChainIsRebuiltOnceFundedThenPaidOnce(t *testing.T) {
	r := newBCRig(t)
	mon := r.funded("1000", 500)
	hot := r.signer.Address()
	id := r.ready(bcAddress("revert-funded"), "250")
	w1 := r.worker("w1", gatedDrain(mon, sagas.CrashAfterIntent, func() { r.sim.SetBalance(hot, big.NewInt(0)) }))
	r.gated(mon, 40, r.failedOnChain(id), w1)
	in, _ := r.sim.TxInfo(bcTxID(t, r.load(id).TxID()))
	if in.Receipt != tron.ReceiptRevert || in.FeeSun <= 0 {
		t.Fatalf("receipt %s burning %d sun, want REVERT with a fee", in.Receipt, in.FeeSun)
	}
	r.waitsUnpaid(mon, id, 5, w1)

	if err := r.sim.Fund(hot, bcUSDT("1000").Units(), 0); err != nil {
		t.Fatal(err)
	}
	r.gated(mon, 60, r.terminal(id), w1)
	w := r.paidOnceAfterFailures(id, 1)
	if rc := w.Retired[0].Receipt; rc.Fee.Sun != in.FeeSun || w.View().Receipts[0].FeeSun == nil || *w.View().Receipts[0].FeeSun != in.FeeSun {
		t.Fatalf("fee recorded %+v, burnt %d", rc.Fee, in.FeeSun)
	}
}

// The same shortage met at the node instead of on chain: once the day's
// free bandwidth is used, a transfer from a wallet without TRX to burn for
// its bandwidth is refused (BANDWITH_ERROR) before it reaches a block — as
// when two processes both let the wallet's last TRX go. With a send gate
// the withdrawal does not fail node_rejected: once expired it waits,
// reserved, nothing appended, while the wallet cannot pay — past the
// point where the chain-time proof of death holds — and once TRX arrives
// it is rebuilt on that proof and paid once. (Without a gate a refusal
// fails it with the proof:
// TestHardRejectOnFirstSendFailsOnlyWithProofThenReleases.)
func TestBandwidthRefusedForAnEmptyWalletIsRebuiltOnceFundedThenPaidOnce(t *testing.T) {
	r := newBCRig(t)
	mon := r.funded("1000", 500)
	hot := r.signer.Address()
	first := r.ready(bcAddress("uses the free bandwidth"), "10")
	r.gated(mon, 60, r.terminal(first), r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = mon }))
	r.paidOnce(first)

	id := r.ready(bcAddress("bandwidth refused"), "250")
	w2 := r.worker("w2", gatedDrain(mon, sagas.CrashAfterBuild, func() { r.sim.SetTRX(hot, 0) }))
	r.gated(mon, 120, func() bool {
		return r.logs.Count("refused for bandwidth: the rebuild waits until the wallet can pay") > 0
	}, w2)
	refused := r.load(id)
	if s := r.sends(refused); len(s) != 1 || s[0].Code != tron.CodeBandwidthError {
		t.Fatalf("send log %+v, want one send refused with BANDWITH_ERROR", s)
	}
	proofAt := refused.Envelope.Expiration + bcMargin.Milliseconds()
	for r.sim.CurrentSolidHead().Timestamp < proofAt {
		r.waitsUnpaid(mon, id, 1, w2)
	}
	r.waitsUnpaid(mon, id, 5, w2)

	r.sim.SetTRX(hot, 500*tron.SunPerTRX) // funded while paused: nothing else is done
	r.gated(mon, 60, r.terminal(id), w2)
	w := r.paidOnce(id)
	rb := bcOfType[aggregate.Rebuilt](r.events(id))
	if len(rb) != 1 || rb[0].Receipt != nil || rb[0].RetiredTxID != refused.TxID() || w.Attempt != 2 {
		t.Fatalf("rebuilds %+v, attempt %d; want one on the proof of death of %s", rb, w.Attempt, refused.TxID())
	}
	if err := sagas.VerifyExpiryProof(r.ctx, r.sim, refused.Envelope, rb[0].Evidence); err != nil {
		t.Fatalf("the rebuild's proof of death: %v", err)
	}
	if s := mon.Status(); s.Sending != hotwallet.SendingActive {
		t.Fatalf("sending %s after the payout", s.Sending)
	}
}

// A failed receipt with a wallet that can pay is rebuilt at once, for
// both results; without a send gate (a worker that cannot tell whether
// the wallet can pay) it still fails, as TestRevertOnChainFailsWithoutRebuild
// and TestOutOfEnergyFailsWithItsReason show.
func TestFailedReceiptWithAFundedWalletIsRebuiltAndPaidOnce(t *testing.T) {
	for _, fault := range []tron.Fault{tron.FaultRevert, tron.FaultOutOfEnergy} {
		t.Run(string(fault), func(t *testing.T) {
			r := newBCRig(t)
			mon := r.funded("1000", 500)
			r.sim.Script(tron.ChannelBroadcast, fault)
			id := r.ready(bcAddress("scripted "+string(fault)), "99")
			r.gated(mon, 80, r.terminal(id), r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = mon }))
			r.paidOnceAfterFailures(id, 1)
		})
	}
}

// Every attempt's receipt fails: the last one fails the withdrawal with
// attempts_exhausted, its receipt the proof, the earlier ones in the
// rebuilds; the reservation is released and nothing moved.
func TestAttemptsExhaustedByFailedReceiptsFailsWithTheReceipts(t *testing.T) {
	r := newBCRig(t)
	mon := r.funded("1000", 500)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultRevert, tron.FaultOutOfEnergy)
	id := r.ready(bcAddress("exhausted-receipts"), "42")
	r.gated(mon, 80, r.terminal(id), r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = mon; c.MaxAttempts = 2 }))
	w := r.load(id)
	if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonAttemptsExhausted || w.Attempt != 2 {
		t.Fatalf("%s %s attempt %d", w.State, w.Reason, w.Attempt)
	}
	f := r.wantFailureProven(w)
	txs := r.chainTxs(w)
	if f.Receipt == nil || f.Receipt.Result != string(tron.ReceiptOutOfEnergy) || f.Evidence != nil || len(txs) != 2 {
		t.Fatalf("failure %+v, %d transfers on chain", f, len(txs))
	}
	for _, tx := range txs {
		if tx.Receipt == tron.ReceiptSuccess {
			t.Fatalf("%s paid", tron.HexID(tx.TxID))
		}
		if tron.HexID(tx.TxID) != w.TxID() {
			r.wantRetiredOnReceipt(w, tx)
		}
	}
	if l := r.sim.Ledger(); l.Total.Sign() != 0 {
		t.Fatalf("the chain moved %s", l.Total)
	}
	if v := w.View(); len(v.Receipts) != 2 || v.Receipts[0].Result != "REVERT" || v.Receipts[1].Result != "OUT_OF_ENERGY" || v.FeeBurnedTRX == nil {
		t.Fatalf("view receipts %+v", v.Receipts)
	}
	r.settled(w)
}

// failingLookups is a node whose lookups by txid report a successful
// transfer as OUT_OF_ENERGY: a lagging or lying backend. The solid
// blocks, read by number, are honest.
type failingLookups struct{ tron.Node }

func (n failingLookups) lie(st tron.TxStatus, err error) (tron.TxStatus, error) {
	if err == nil && st.Succeeded() {
		st.Receipt = tron.ReceiptOutOfEnergy
	}
	return st, err
}

func (n failingLookups) Lookup(ctx context.Context, id [32]byte) (tron.TxStatus, error) {
	return n.lie(n.Node.Lookup(ctx, id))
}

func (n failingLookups) SolidLookup(ctx context.Context, id [32]byte) (tron.TxStatus, error) {
	return n.lie(n.Node.SolidLookup(ctx, id))
}

// A SUCCESS receipt never rebuilds: a worker told by a lookup that the
// transfer failed reads the receipt again from its solid block before it
// rebuilds, finds SUCCESS there, and confirms. One transfer, one txid.
//
// The worker that takes the withdrawal over watches its txid in the solid
// blocks from the block after its reference block (the scan position is
// the log): when that block is within the scan's reach, the receipt comes
// from the block itself and the lie is never even asked for. When it is
// not (the handover came more than the scan goes back), the lookups
// decide, the lie is met, and the block overrules it.
func TestSuccessReceiptNeverRebuilds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later int // blocks the chain moves between the crash and the takeover
		lies  int // lies met
	}{
		{"within the scan's reach", 0, 0},
		{"behind the scan's reach", 300, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newBCRig(t)
			mon := r.funded("1000", 500)
			id := r.ready(bcAddress("success-not-rebuilt"), "77")
			w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Gate = mon; c.Crash = sagas.CrashOnce(sagas.CrashAfterSend, id) })
			if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
				t.Fatalf("drive: %v", err)
			}
			r.sim.Advance(tc.later)
			r.clock.Advance(2 * bcLease)
			w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Gate = mon; c.Node = failingLookups{r.node} })
			r.gated(mon, 60, r.terminal(id), w2)
			w := r.paidOnce(id)
			if n := bcCount(r.events(id), aggregate.EventRebuilt); n != 0 || w.Attempt != 1 {
				t.Fatalf("%d rebuilds, attempt %d", n, w.Attempt)
			}
			if n := r.logs.Count("the lookup said the transfer failed, its solid block says SUCCESS: confirming"); n != tc.lies {
				t.Fatalf("the lie was met %d times, want %d", n, tc.lies)
			}
		})
	}
}

// The policy tightens while a failed withdrawal waits for funds: it is
// rebuilt on the receipt, but the re-check right before signing refuses
// the rebuilt envelope exactly as it refuses a first one (back to
// requested, the envelope retired unsigned); a further approval pays it.
func TestPolicyTightenedBeforeARebuildOnAFailedReceiptIsCaughtBeforeSigning(t *testing.T) {
	r := newBCRig(t)
	mon := r.funded("1000", 500)
	hot := r.signer.Address()
	id := r.ready(bcAddress("tightened-receipt"), "500")
	w1 := r.worker("w1", gatedDrain(mon, sagas.CrashAfterBuild, func() { r.sim.SetTRX(hot, 0) }))
	r.gated(mon, 40, r.failedOnChain(id), w1)
	r.waitsUnpaid(mon, id, 2, w1)
	strict, err := aggregate.NewPolicy("two everywhere", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.repo.SetPolicy(r.ctx, aggregate.SetPolicy{Policy: strict, By: "ops", At: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r.sim.SetTRX(hot, 500*tron.SunPerTRX)
	r.gated(mon, 20, r.inState(id, aggregate.StateRequested), w1)
	w := r.load(id)
	if w.Reason != aggregate.ReasonPolicyTightened || len(w.Retired) != 2 || w.Retired[0].Receipt == nil || !w.Retired[1].Unsigned {
		t.Fatalf("reason %s retired %+v", w.Reason, w.Retired)
	}
	if n := bcCount(r.events(id), aggregate.EventSigned); n != 1 {
		t.Fatalf("%d signatures, want only the first envelope's", n)
	}
	r.approve(id, "carol")
	r.gated(mon, 60, r.terminal(id), w1)
	r.paidOnceAfterFailures(id, 1)
	if signed := bcOfType[aggregate.Signed](r.events(id)); len(signed) != 2 || signed[1].PolicyVersion < 1 {
		t.Fatalf("signatures %+v", signed)
	}
}
