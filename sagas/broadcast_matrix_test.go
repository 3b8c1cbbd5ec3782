package sagas_test

// The failure matrix of the broadcast saga (issue 5, item 7): one test per
// scenario. Each asserts on the withdrawal's event stream (audited: every
// event legal, every rebuild with its proof) and on the simulated node's
// ledger and send log: the money moved exactly once, and no second txid was
// ever accepted. Chain time moves only when a test advances the SimNode;
// the lease clock only when a test moves it. No sleeps.

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

// The happy path, as a baseline for the others: one envelope, one send,
// one transfer, confirmed after the block is solid.
func TestHappyPathPaysOnceAfterSolidity(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("happy"), "250")
	w1 := r.worker("w1")
	r.until(5, r.inState(id, aggregate.StateBroadcasting), w1)
	if w := r.load(id); w.Confirmation.TxID != "" || len(r.sends(w)) != 1 {
		t.Fatal("confirmed before solidity, or not sent")
	}
	r.until(30, r.terminal(id), w1)
	w := r.paidOnce(id)
	evs := r.events(id)
	want := []string{
		aggregate.EventRequested, aggregate.EventFundsReserved, aggregate.EventApproved,
		// claim + route + write-ahead in one; signature + the first send's
		// intent in one; the solid block's confirmation (the node's
		// acceptance is kept in hand).
		aggregate.EventEnvelopeBuilt, aggregate.EventSigned, aggregate.EventConfirmed,
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.EventType())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if s := r.sends(w); len(s) != 1 || s[0].Worker != "w1" || !s[0].Accepted {
		t.Fatalf("send log %+v", s)
	}
	// The confirming block is solid on the node (final), not just included.
	if solid := r.sim.CurrentSolidHead(); w.Confirmation.BlockNumber > solid.Number {
		t.Fatalf("confirmed block %d is above the solid head %d", w.Confirmation.BlockNumber, solid.Number)
	}
	// The envelope's expiration is chain time: the head block's time plus
	// the window, not anything from the wall clock.
	built := bcOfType[aggregate.EnvelopeBuilt](evs)[0]
	if d := built.Envelope.Expiration - built.At.UnixMilli(); d > -24*3600_000 && d < 24*3600_000 {
		// The wall clock of the rig is months away from the chain's; a
		// wall-clock expiration would land near the event time.
		t.Fatalf("expiration %d looks like wall-clock time %d", built.Envelope.Expiration, built.At.UnixMilli())
	}
}

// A client whose request timed out sends it again: the second create is a
// replay (no event) and the withdrawal pays once.
func TestClientRetriesATimedOutRequestCreatesOneWithdrawal(t *testing.T) {
	r := newBCRig(t)
	id, to := bcOpID(900), bcAddress("retry")
	_, first, err := r.request(id, to, "75.5")
	if err != nil || len(first) != 1 {
		t.Fatalf("first request: %d events, %v", len(first), err)
	}
	// The reply was lost; the client retries with the same payload.
	w, again, err := r.request(id, to, "75.50")
	if err != nil || len(again) != 0 || w.Version != 1 {
		t.Fatalf("retry: %d events, version %d, %v", len(again), w.Version, err)
	}
	r.reserve(id)
	r.approve(id, "bob")
	r.work.add(id)
	r.until(40, r.terminal(id), r.worker("w1"))
	r.paidOnce(id)
	if n := bcCount(r.events(id), aggregate.EventRequested); n != 1 {
		t.Fatalf("%d requested events", n)
	}
}

// 32 identical requests at once, from 32 connections: one stream, one
// creation event, one payout.
func TestThirtyTwoConcurrentIdenticalRequestsCreateOneWithdrawal(t *testing.T) {
	r := newBCRig(t)
	id, to := bcOpID(901), bcAddress("thirty-two")
	policy := r.policy()
	repos := make([]*sagas.Repo, 32)
	for i := range repos {
		repos[i] = r.newRepo()
	}
	cmd := aggregate.RequestWithdrawal{ID: id, Account: bcAccount, ToAddress: to, Amount: bcUSDT("12.5"),
		RequestedBy: "alice", Policy: policy, At: r.clock.Now()}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		created int
		errs    []error
	)
	for _, repo := range repos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, evs, err := repo.UpdateWithdrawal(r.ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) { return cmd, nil })
			mu.Lock()
			defer mu.Unlock()
			created += len(evs)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if created != 1 || len(errs) != 0 {
		t.Fatalf("%d creation events, errors %v", created, errs)
	}
	r.reserve(id)
	r.approve(id, "bob")
	r.work.add(id)
	r.until(40, r.terminal(id), r.worker("w1"))
	r.paidOnce(id)
	if evs := r.events(id); bcCount(evs, aggregate.EventRequested) != 1 {
		t.Fatalf("%d requested events", bcCount(evs, aggregate.EventRequested))
	}
}

// The same operation id with another payload is refused and leaves the
// original untouched: the chain pays the original amount, once.
func TestSameIDDifferentPayloadIsAConflictAndLeavesTheOriginal(t *testing.T) {
	r := newBCRig(t)
	id, to := bcOpID(902), bcAddress("conflict")
	if _, _, err := r.request(id, to, "40"); err != nil {
		t.Fatal(err)
	}
	_, evs, err := r.request(id, to, "4000")
	if !errors.Is(err, aggregate.ErrIdempotencyConflict) || len(evs) != 0 {
		t.Fatalf("different payload: %d events, err %v", len(evs), err)
	}
	_, _, err = r.request(id, bcAddress("elsewhere"), "40")
	if !errors.Is(err, aggregate.ErrIdempotencyConflict) {
		t.Fatalf("different destination: err %v", err)
	}
	r.reserve(id)
	r.approve(id, "bob")
	r.work.add(id)
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	if !w.Amount.Equal(bcUSDT("40")) || w.ToAddress != to {
		t.Fatalf("withdrawal is now %s to %s", w.Amount, w.ToAddress)
	}
	if total := r.sim.Ledger().Total; total.Cmp(bcUSDT("40").Units()) != 0 {
		t.Fatalf("chain moved %s units", total)
	}
}

// Two workers on separate connections race for one withdrawal: exactly one
// wins the claim, the other is fenced, one envelope is built and one txid
// reaches the chain.
func TestTwoWorkersOneWithdrawalPayOnce(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("two-workers"), "300")
	a, b := r.worker("wa"), r.worker("wb")
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]error, 2)
	for i, w := range []*sagas.Worker{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, results[i] = w.Drive(r.ctx, id)
		}()
	}
	close(start)
	wg.Wait()
	fenced := 0
	for _, err := range results {
		switch {
		case errors.Is(err, sagas.ErrFenced):
			fenced++
		case err != nil:
			t.Fatalf("drive: %v", err)
		}
	}
	if fenced != 1 {
		t.Fatalf("%d workers fenced, want exactly 1 (%v)", fenced, results)
	}
	r.until(40, r.terminal(id), a, b)
	w := r.paidOnce(id)
	evs := r.events(id)
	if n := bcCount(evs, aggregate.EventEnvelopeBuilt); n != 1 || bcCount(evs, aggregate.EventRebuilt) != 0 {
		t.Fatalf("%d envelopes, %d rebuilds", n, bcCount(evs, aggregate.EventRebuilt))
	}
	owners := map[string]bool{}
	for _, c := range bcOfType[aggregate.Claimed](evs) {
		owners[c.Worker] = true
	}
	for _, e := range bcOfType[aggregate.EnvelopeBuilt](evs) {
		if e.Worker != "" {
			owners[e.Worker] = true // the claim written with the envelope
		}
	}
	senders := map[string]bool{}
	for _, s := range r.sends(w) {
		senders[s.Worker] = true
	}
	if len(owners) != 1 || len(senders) != 1 {
		t.Fatalf("claims by %v, sends by %v: want one worker", owners, senders)
	}
}

// A worker dies after writing the intent and before sending. The log says
// "broadcasting", the node has never seen the bytes. Another worker, once
// the lease lapsed, asks the chain by txid (unknown) and sends the same
// bytes under a new intent.
func TestCrashAfterWriteAheadBeforeSendResendsSameBytes(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("crash-intent"), "420")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterIntent, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	if _, err := w1.Step(r.ctx); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("a crashed worker must stay dead, got %v", err)
	}
	w := r.load(id)
	if w.State != aggregate.StateBroadcasting || w.Sends != 1 || len(r.sim.BroadcastLog()) != 0 {
		t.Fatalf("after crash: %s sends=%d, node saw %d sends", w.State, w.Sends, len(r.sim.BroadcastLog()))
	}
	w2 := r.worker("w2")
	// The dead worker's lease still holds: nobody touches the withdrawal.
	if _, err := w2.Drive(r.ctx, id); !errors.Is(err, sagas.ErrFenced) {
		t.Fatalf("drive under a live lease: %v", err)
	}
	r.clock.Advance(bcLease + time.Second)
	r.until(40, r.terminal(id), w2)
	w = r.paidOnce(id)
	evs := r.events(id)
	if bcCount(evs, aggregate.EventEnvelopeBuilt) != 1 || bcCount(evs, aggregate.EventRebuilt) != 0 {
		t.Fatal("recovery must resend the same envelope, not build a new one")
	}
	intents := bcIntents(evs)
	if len(intents) != 2 || intents[0].TxID != intents[1].TxID || intents[0].Send != 1 || intents[1].Send != 2 {
		t.Fatalf("intents %+v", intents)
	}
	if s := r.sends(w); len(s) != 1 || s[0].Worker != "w2" {
		t.Fatalf("send log %+v", s)
	}
}

// A worker dies after the node accepted the bytes and before recording it.
// The next worker finds the txid on the network by lookup and records the
// acceptance without sending again.
func TestCrashAfterSendBeforeRecordingReconcilesByTxID(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("crash-send"), "42")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterSend, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	if w := r.load(id); w.State != aggregate.StateBroadcasting {
		t.Fatalf("after crash: %s", w.State)
	}
	if log := r.sim.BroadcastLog(); len(log) != 1 || !log[0].Accepted {
		t.Fatalf("node log %+v", log)
	}
	r.clock.Advance(bcLease + time.Second)
	w2 := r.worker("w2")
	r.until(40, r.terminal(id), w2)
	w := r.paidOnce(id)
	evs := r.events(id)
	acc := bcOfType[aggregate.BroadcastAccepted](evs)
	if len(acc) != 1 || !strings.HasPrefix(acc[0].Result, "found_") || acc[0].Send != 1 {
		t.Fatalf("acceptance %+v: want it learnt by lookup for send 1", acc)
	}
	if s := r.sends(w); len(s) != 1 || s[0].Worker != "w1" {
		t.Fatalf("the recovering worker sent again: %+v", s)
	}
	if r.node.Calls("w2") == 0 {
		t.Fatal("the recovering worker never asked the node")
	}
}

// The node accepts the transaction but the answer is lost (timeout). The
// worker asks by txid, finds it pending and records the acceptance: one
// send, one transfer.
func TestAcceptThenTimeoutIsReconciledNotResent(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultAcceptThenTimeout)
	id := r.ready(bcAddress("accept-timeout"), "99")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	s := r.sends(w)
	if len(s) != 1 || !s[0].TimedOut || !s[0].Accepted {
		t.Fatalf("send log %+v", s)
	}
	evs := r.events(id)
	acc := bcOfType[aggregate.BroadcastAccepted](evs)
	if len(bcIntents(evs)) != 1 || len(acc) != 1 || acc[0].Result != "found_pending" {
		t.Fatalf("intents %d, acceptance %+v", len(bcIntents(evs)), acc)
	}
}

// The request was lost before the node saw it (timeout). Lookup says
// unknown; the same bytes are sent again in the next block.
func TestTimeoutThatWasADropIsResentWithSameBytes(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept)
	id := r.ready(bcAddress("timeout-drop"), "18")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	s := r.sends(w)
	if len(s) != 2 || s[0].TxID != s[1].TxID || !s[0].TimedOut || s[0].Accepted || !s[1].Accepted {
		t.Fatalf("send log %+v", s)
	}
	if s[1].HeadNumber <= s[0].HeadNumber {
		t.Fatalf("resent within the same block (%d, %d)", s[0].HeadNumber, s[1].HeadNumber)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventEnvelopeBuilt) != 1 || bcCount(evs, aggregate.EventRebuilt) != 0 || len(bcIntents(evs)) != 2 {
		t.Fatalf("envelopes %d rebuilds %d intents %d", bcCount(evs, aggregate.EventEnvelopeBuilt),
			bcCount(evs, aggregate.EventRebuilt), len(bcIntents(evs)))
	}
}

// Every worker is dead while the transaction expires. A worker that comes
// back when the head is past the expiration must not rebuild until the
// latest SOLID block is at or past expiration + margin, and then only with
// that evidence recorded. The dead envelope never lands.
func TestTxExpiresWhileEveryWorkerIsDeadRebuildsOnlyAfterChainTimeProof(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("expired-dead"), "1234.5")
	r.approve(id, "carol") // four-eyes above 1000
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterIntent, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	old := r.load(id)
	exp := old.Envelope.Expiration
	proofAt := exp + bcMargin.Milliseconds()
	// Everyone is dead until the head is well past the expiration but the
	// solid head is not yet past expiration + margin.
	for r.sim.CurrentHead().Timestamp < proofAt+3000 {
		r.sim.Advance(1)
	}
	if r.sim.CurrentSolidHead().Timestamp >= proofAt {
		t.Fatal("test setup: the solid head is already past the proof point")
	}
	r.clock.Advance(2 * bcLease)
	w2 := r.worker("w2")
	for r.sim.CurrentSolidHead().Timestamp < proofAt {
		solid := r.sim.CurrentSolidHead()
		if _, err := w2.Step(r.ctx); err != nil {
			t.Fatal(err)
		}
		if n := bcCount(r.events(id), aggregate.EventRebuilt); n != 0 {
			t.Fatalf("rebuilt with the solid head at %d, before expiration %d + margin %d", solid.Timestamp, exp, bcMargin.Milliseconds())
		}
		r.sim.Advance(1)
	}
	r.until(5, func() bool { return r.load(id).Attempt == 2 }, w2)
	evs := r.events(id)
	rb := bcOfType[aggregate.Rebuilt](evs)
	if len(rb) != 1 {
		t.Fatalf("%d rebuilds", len(rb))
	}
	ev := rb[0].Evidence
	blk, ok := r.sim.Block(ev.SolidBlockNumber)
	if ev.Lookup != aggregate.LookupNotFound || ev.Expiration != exp || ev.Margin != bcMargin.Milliseconds() ||
		ev.SolidBlockTime < proofAt || !ok || blk.Timestamp != ev.SolidBlockTime || rb[0].RetiredTxID != old.Envelope.TxID {
		t.Fatalf("evidence %+v (block %d at %d) for envelope %s expiring at %d", ev, blk.Number, blk.Timestamp, old.Envelope.TxID, exp)
	}
	r.until(40, r.terminal(id), w2)
	w := r.paidOnce(id)
	if w.TxID() == old.Envelope.TxID || !slices.Contains(w.RetiredTxIDs(), old.Envelope.TxID) {
		t.Fatal("the retired txid is still current")
	}
	for _, s := range r.sim.BroadcastLog() {
		if tron.HexID(s.TxID) == old.Envelope.TxID {
			t.Fatal("the dead envelope was sent after all")
		}
	}
}

// The node accepts every send of the first envelope and silently drops it
// from its pool: the worker resends the same bytes (once per block) while
// they can still be accepted, then waits for the chain-time proof, then
// rebuilds; the second envelope is mined. Only one txid ever lands.
func TestAcceptedButNeverMinedIsResentThenRebuiltAfterProof(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("never-mined"), "61")
	w1 := r.worker("w1")
	dropFirstAttempt := func() {
		// Drop every send of attempt 1: script one drop whenever the worker
		// may send this round (the head is before the expiration).
		w := r.load(id)
		if (w.Attempt <= 1) && r.sim.ScriptRemaining(tron.ChannelBroadcast) == 0 &&
			(w.Attempt == 0 || r.sim.CurrentHead().Timestamp < w.Envelope.Expiration) {
			r.sim.Script(tron.ChannelBroadcast, tron.FaultDropAfterAccept)
		}
	}
	for i := 0; i < 200 && !r.load(id).Terminal(); i++ {
		dropFirstAttempt()
		r.round(w1)
	}
	w := r.paidOnce(id)
	evs := r.events(id)
	rb := bcOfType[aggregate.Rebuilt](evs)
	if len(rb) != 1 || w.Attempt != 2 {
		t.Fatalf("%d rebuilds, attempt %d", len(rb), w.Attempt)
	}
	if err := rb[0].Evidence.Proves(rb[0].Evidence.Expiration); err != nil {
		t.Fatal(err)
	}
	retired := rb[0].RetiredTxID
	resends := 0
	for _, s := range r.sim.BroadcastLog() {
		if tron.HexID(s.TxID) == retired {
			resends++
			if s.Fault != tron.FaultDropAfterAccept || !s.Accepted {
				t.Fatalf("send of the first envelope %+v", s)
			}
		}
	}
	if resends < 2 {
		t.Fatalf("the first envelope was sent %d times; a drop must be answered by resending the same bytes", resends)
	}
	if _, ok := r.sim.TransferByTxID(bcTxID(t, retired)); ok {
		t.Fatal("the retired envelope landed")
	}
}

// A broadcast answer with a code outside java-tron's list is ambiguous: no
// failure, no acceptance; lookup, then the same bytes again.
func TestUnknownBroadcastCodeIsAmbiguous(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultUnknownCode)
	id := r.ready(bcAddress("unknown-code"), "7")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	s := r.sends(w)
	if len(s) != 2 || s[0].Code != tron.SimUnknownCode || s[0].TxID != s[1].TxID {
		t.Fatalf("send log %+v", s)
	}
	// The second send's SUCCESS is kept in hand and the solid block
	// confirms; nothing in the log may count the first answer as acceptance.
	if acc := bcOfType[aggregate.BroadcastAccepted](r.events(id)); len(acc) != 0 || w.Sends != 2 {
		t.Fatalf("acceptance %+v after %d sends: the unknown code must not count as one", acc, w.Sends)
	}
}

// The node says TRANSACTION_EXPIRATION_ERROR for a transaction it actually
// accepted: "expired" is not proof of death. Lookup finds it pending; no
// rebuild; it confirms.
func TestNodeSaysExpiredIsNotProof(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultFalseExpired)
	id := r.ready(bcAddress("false-expired"), "88")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	if s := r.sends(w); len(s) != 1 || s[0].Code != tron.CodeTransactionExpirationError || !s[0].Accepted {
		t.Fatalf("send log %+v", s)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventRebuilt) != 0 || bcCount(evs, aggregate.EventFailed) != 0 {
		t.Fatal("\"expired\" was taken for proof")
	}
	if acc := bcOfType[aggregate.BroadcastAccepted](evs); len(acc) != 1 || acc[0].Result != "found_pending" {
		t.Fatalf("acceptance %+v", acc)
	}
}

// DUP_TRANSACTION_ERROR for a transaction the node never accepted: DUP is
// not acceptance. The worker looks the txid up (unknown) and sends again;
// only the SUCCESS of the second send is recorded.
func TestDupForATxNeverAcceptedIsNotAcceptance(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultDupNotAccepted)
	id := r.ready(bcAddress("dup"), "5")
	w1 := r.worker("w1")
	r.round(w1)
	if w := r.load(id); w.State != aggregate.StateBroadcasting || w.Acceptance.Send != 0 {
		t.Fatalf("after DUP: %s, acceptance %+v", w.State, w.Acceptance)
	}
	r.until(40, r.terminal(id), w1)
	w := r.paidOnce(id)
	s := r.sends(w)
	if len(s) != 2 || s[0].Code != tron.CodeDupTransactionError || s[0].Accepted || !s[1].Accepted {
		t.Fatalf("send log %+v", s)
	}
	if acc := bcOfType[aggregate.BroadcastAccepted](r.events(id)); len(acc) != 0 || w.Sends != 2 {
		t.Fatalf("acceptance %+v after %d sends", acc, w.Sends)
	}
}

// The transaction lands with receipt REVERT: it is on chain and spent and
// moved nothing. The withdrawal fails with reason reverted, is never
// rebuilt, and its reservation is released.
func TestRevertOnChainFailsWithoutRebuild(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultRevert)
	id := r.ready(bcAddress("revert"), "66")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.load(id)
	if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonReverted {
		t.Fatalf("%s %s", w.State, w.Reason)
	}
	txs := r.chainTxs(w)
	if len(txs) != 1 || txs[0].Receipt != tron.ReceiptRevert {
		t.Fatalf("chain %+v", txs)
	}
	if l := r.sim.Ledger(); l.Succeeded != 0 || l.Total.Sign() != 0 {
		t.Fatalf("ledger %+v", l)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventRebuilt) != 0 || len(r.sends(w)) != 1 {
		t.Fatal("a reverted transaction was retried")
	}
	if f := bcOfType[aggregate.Failed](evs); len(f) != 1 || f[0].TxID != w.TxID() {
		t.Fatalf("failure %+v", f)
	}
	r.settled(w)
}

// A worker freezes (GC pause, stopped VM) after signing, before the
// append that records the signature and announces the first send. Its
// lease lapses and another worker finishes the payout. When the zombie
// wakes up, that append — at the position it last saw — is refused and it
// stops: it never reaches the node again. (The signature and the first
// intent are one append: a worker frozen after it has passed its fence
// and sends the logged bytes, as one frozen after a resend's intent does.)
func TestZombieWorkerNeverReachesTheNode(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("zombie"), "150")
	paused, release := make(chan struct{}), make(chan struct{})
	freeze := func(p sagas.CrashPoint, wid string) bool {
		if p == sagas.CrashAfterSignBeforeRecord && wid == id {
			close(paused)
			<-release
		}
		return false
	}
	zombie := r.worker("zombie", func(c *sagas.WorkerConfig) { c.Crash = freeze })
	done := make(chan error, 1)
	go func() {
		_, err := zombie.Drive(r.ctx, id)
		done <- err
	}()
	<-paused
	callsBefore := r.node.Calls("zombie")
	r.clock.Advance(bcLease + time.Second)
	w2 := r.worker("w2")
	r.until(40, r.terminal(id), w2)
	close(release)
	if err := <-done; !errors.Is(err, sagas.ErrFenced) {
		t.Fatalf("zombie: %v, want fenced", err)
	}
	if n := r.node.Calls("zombie"); n != callsBefore {
		t.Fatalf("the zombie made %d node calls after waking", n-callsBefore)
	}
	w := r.paidOnce(id)
	for _, s := range r.sends(w) {
		if s.Worker == "zombie" {
			t.Fatal("the zombie sent")
		}
	}
	if _, err := zombie.Drive(r.ctx, id); err != nil {
		t.Fatalf("a zombie visiting a finished withdrawal must do nothing: %v", err)
	}
}

// The policy tightened after approval: the pre-send re-check sends the
// withdrawal back to requested with the reason, and nothing is built,
// signed or sent (the node is never called). A further approval makes it
// ready again, and it pays once under the new policy version.
func TestPolicyTightenedAfterApprovalSendsNothing(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("tightened"), "500") // one approval (bob) under four-eyes above 1000
	strict, err := aggregate.NewPolicy("two everywhere", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := r.repo.SetPolicy(r.ctx, aggregate.SetPolicy{Policy: strict, By: "ops", At: r.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	w1 := r.worker("w1")
	r.round(w1)
	w := r.load(id)
	if w.State != aggregate.StateRequested || w.Reason != aggregate.ReasonPolicyTightened {
		t.Fatalf("%s %s", w.State, w.Reason)
	}
	if n := r.node.Total(); n != 0 || len(r.sim.BroadcastLog()) != 0 {
		t.Fatalf("the node was called %d times", n)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventEnvelopeBuilt) != 0 || bcCount(evs, aggregate.EventApprovalsInvalidated) != 1 {
		t.Fatal("an envelope was built under insufficient approvals")
	}
	// Nothing happens to it while it waits for approvals.
	r.round(w1)
	if n := len(r.events(id)); n != len(evs) {
		t.Fatalf("%d new events while requested", n-len(evs))
	}
	r.approve(id, "carol")
	r.until(40, r.terminal(id), w1)
	r.paidOnce(id)
	built := bcOfType[aggregate.EnvelopeBuilt](r.events(id))
	if len(built) != 1 || built[0].PolicyVersion != ps.Policy.Version {
		t.Fatalf("envelope under policy %+v, want version %d", built, ps.Policy.Version)
	}
}

// A destination we custody is a ledger transfer: approved → confirmed with
// no chain, no fee, and the node is never called.
func TestInternalRouteNeverCallsTheNode(t *testing.T) {
	r := newBCRig(t)
	to := bcAddress("custodied")
	r.custody[to] = "acct-receiver"
	id := r.ready(to, "321")
	r.until(5, r.terminal(id), r.worker("w1"))
	w := r.load(id)
	if w.State != aggregate.StateConfirmed || !w.Route.IsInternal() || w.Route.Account() != "acct-receiver" {
		t.Fatalf("%s route %+v", w.State, w.Route)
	}
	if n := r.node.Total(); n != 0 || len(r.sim.BroadcastLog()) != 0 || r.sim.Ledger().Included != 0 {
		t.Fatalf("node calls %d", n)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventSettledInternally) != 1 || bcCount(evs, aggregate.EventEnvelopeBuilt) != 0 {
		t.Fatal("internal route built an envelope")
	}
	r.settled(w)
	recv, _, err := r.repo.Account(r.ctx, "acct-receiver")
	if err != nil || !recv.Available().Equal(bcUSDT("321")) {
		t.Fatalf("receiver %+v err %v", recv.View(), err)
	}
}

// The wall clock jumps an hour forward while a send is unresolved. Leases
// lapse (they are wall-clock), but expiry is chain time: the worker keeps
// resending the same bytes and never rebuilds.
func TestWallClockJumpingAnHourDoesNotRebuild(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept)
	id := r.ready(bcAddress("clock-jump"), "33")
	w1 := r.worker("w1")
	if _, err := w1.Step(r.ctx); err != nil {
		t.Fatal(err)
	}
	if w := r.load(id); w.State != aggregate.StateBroadcasting {
		t.Fatalf("%s", w.State)
	}
	r.clock.Advance(time.Hour)
	// Several steps with the chain standing still: an hour of wall time
	// proves nothing about the transaction.
	for range 3 {
		if _, err := w1.Step(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := bcCount(r.events(id), aggregate.EventRebuilt); n != 0 {
		t.Fatal("rebuilt on wall-clock time")
	}
	r.clock.Advance(time.Hour)
	r.until(40, r.terminal(id), w1)
	w := r.paidOnce(id)
	evs := r.events(id)
	if bcCount(evs, aggregate.EventRebuilt) != 0 || bcCount(evs, aggregate.EventEnvelopeBuilt) != 1 {
		t.Fatal("rebuilt on wall-clock time")
	}
	for _, s := range r.sends(w) {
		if tron.HexID(s.TxID) != w.TxID() {
			t.Fatal("a second txid was sent")
		}
	}
	if renewals := len(bcOfType[aggregate.Claimed](evs)); renewals < 2 {
		t.Fatalf("%d claims: the lapsed lease must have been taken again", renewals)
	}
}

// A hard rejection of the first send of a txid (SIGERROR here: the node
// does not accept the test signer) is the node's word, not proof: the
// bytes stay valid until they expire. The worker does not send them again
// and the money stays reserved; only once the chain-time proof holds does
// the withdrawal fail with node_rejected, the refusal and the evidence in
// its detail, and only then is the reservation released.
func TestHardRejectOnFirstSendFailsOnlyWithProofThenReleases(t *testing.T) {
	r := newBCRig(t, func(c *tron.SimConfig) { c.Verifiers = nil })
	id := r.ready(bcAddress("sigerror"), "10")
	w := r.untilProvenFailed(id, 120, r.worker("w1"))
	wantNodeRejectedWithProof(t, r, w, tron.CodeSigError)
	if s := r.sends(w); len(s) != 1 || s[0].Code != tron.CodeSigError {
		t.Fatalf("send log %+v", s)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventRebuilt) != 0 || bcCount(evs, aggregate.EventEnvelopeBuilt) != 1 {
		t.Fatal("a hard-rejected envelope was replaced")
	}
	r.nothingOnChain(w)
	r.settled(w)
}

// OUT_OF_ENERGY on chain fails the withdrawal with that reason.
func TestOutOfEnergyFailsWithItsReason(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultOutOfEnergy)
	id := r.ready(bcAddress("energy"), "11")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.load(id)
	if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonOutOfEnergy {
		t.Fatalf("%s %s", w.State, w.Reason)
	}
	txs := r.chainTxs(w)
	if len(txs) != 1 || txs[0].Receipt != tron.ReceiptOutOfEnergy {
		t.Fatalf("chain %+v", txs)
	}
	// The failure carries the failing receipt and its solid block.
	if f := r.wantFailureProven(w); f.Receipt == nil || f.Receipt.Result != string(tron.ReceiptOutOfEnergy) || f.Receipt.BlockNumber != txs[0].BlockNumber {
		t.Fatalf("failed without the receipt as its proof: %+v", f)
	}
	r.settled(w)
}

// With the last attempt proven dead, the withdrawal fails with
// attempts_exhausted — and only once the proof holds.
func TestAttemptsExhaustedFailsOnlyWithProof(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("exhausted"), "12")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.MaxAttempts = 1 })
	for i := 0; i < 200 && !r.load(id).Terminal(); i++ {
		if r.sim.ScriptRemaining(tron.ChannelBroadcast) == 0 {
			w := r.load(id)
			if w.Attempt == 0 || r.sim.CurrentHead().Timestamp < w.Envelope.Expiration {
				r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept)
			}
		}
		solid := r.sim.CurrentSolidHead()
		r.round(w1)
		if w := r.load(id); w.State == aggregate.StateFailed && solid.Timestamp < w.Envelope.Expiration+bcMargin.Milliseconds() {
			t.Fatalf("failed with the solid head at %d, before the proof point %d", solid.Timestamp, w.Envelope.Expiration+bcMargin.Milliseconds())
		}
	}
	w := r.load(id)
	if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonAttemptsExhausted {
		t.Fatalf("%s %s", w.State, w.Reason)
	}
	if f := r.wantFailureProven(w); f.Evidence == nil || !strings.Contains(w.Detail, "hold no "+w.TxID()) {
		t.Fatalf("attempts exhausted without the proof of death: %+v, detail %q", f, w.Detail)
	}
	r.nothingOnChain(w)
	r.settled(w)
}

// A real secp256k1 key: the signature in the log verifies against the
// owner in the raw bytes, and the node (which accepts only real
// signatures here) includes the transfer.
func TestRealKeySignerPaysOnce(t *testing.T) {
	r := newBCRig(t, func(c *tron.SimConfig) { c.Verifiers = nil })
	key, err := tron.ParseKeySigner(strings.Repeat("42", 32))
	if err != nil {
		t.Fatal(err)
	}
	id := r.ready(bcAddress("secp256k1"), "1.000001")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Signer = key })
	r.until(40, r.terminal(id), w1)
	w := r.load(id)
	if w.State != aggregate.StateConfirmed {
		t.Fatalf("%s %s %s", w.State, w.Reason, w.Detail)
	}
	sig := bcHex(t, w.Signature)
	if err := tron.VerifySignature(bcTxID(t, w.TxID()), sig, key.Address()); err != nil {
		t.Fatal(err)
	}
	txs := r.chainTxs(w)
	if len(txs) != 1 || txs[0].From != key.Address() || txs[0].Amount.Int64() != 1_000_001 {
		t.Fatalf("chain %+v", txs)
	}
}

// The envelope's creation timestamp is offset by the log position it was
// built after (no memo, no memo fee), so two withdrawals paying the same
// amount to the same address from the same block still have distinct
// txids — and both are paid.
func TestSameAmountSameAddressSameBlockAreTwoTransactions(t *testing.T) {
	r := newBCRig(t)
	to := bcAddress("twins")
	a, b := r.ready(to, "77"), r.ready(to, "77")
	w1 := r.worker("w1")
	r.until(40, func() bool { return r.load(a).Terminal() && r.load(b).Terminal() }, w1)
	wa, wb := r.load(a), r.load(b)
	if wa.TxID() == wb.TxID() {
		t.Fatal("two withdrawals share a txid")
	}
	for _, id := range []string{a, b} {
		w := r.load(id)
		if w.State != aggregate.StateConfirmed || len(r.chainTxs(w)) != 1 {
			t.Fatalf("%s: %s, %d on chain", id, w.State, len(r.chainTxs(w)))
		}
		r.settled(w)
	}
	if l := r.sim.Ledger(); l.Succeeded != 2 || l.Total.Cmp(bcUSDT("154").Units()) != 0 {
		t.Fatalf("ledger %+v", l)
	}
}

func bcTxID(t *testing.T, s string) [32]byte {
	t.Helper()
	id, err := tron.ParseTxID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func bcHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- Issue 16: money safety behind load-balanced nodes, stale reads and
// skewed clocks. Each test below failed on the code before the fix.

// bcBalanced is the node of a hosted endpoint: a load balancer over an
// up-to-date backend (0) and one 60 blocks behind (1). lagging names the
// methods the lagging backend answers.
func (r *bcRig) bcBalanced(lagging ...tron.NodeMethod) *nodetest.Balanced {
	routes := map[tron.NodeMethod]int{}
	for _, m := range lagging {
		routes[m] = 1
	}
	return nodetest.NewBalanced(nodetest.ByMethod(0, routes), r.node, &nodetest.Lagging{Sim: r.sim, Behind: 60})
}

// Item 1. w1 sends tx1, it is accepted, w1 dies; while every worker is down
// tx1 is mined and becomes solid; w2 resumes behind a load balancer whose
// lookups land on a backend 60 blocks behind and honestly answer
// "unknown". The old proof — a solid head past expiration + margin from one
// request, "not found" from another — rebuilt and paid twice. The proof on
// the blocks finds tx1 in its block and confirms it: one payment.
func TestLaggingBackendBehindALoadBalancerCannotMakeTheProofPayTwice(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("balanced"), "77")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterAccepted, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	// Workers are down while the chain moves ~2 minutes: tx1 is mined,
	// solid, and the solid head passes expiration + margin.
	w := r.load(id)
	bcSolidAtLeast(r.sim, w.Envelope.Expiration+bcMargin.Milliseconds())
	r.sim.Advance(5)
	if len(r.chainTxs(w)) != 1 {
		t.Fatal("tx1 was not mined")
	}
	r.clock.Advance(bcLease + time.Second)
	node := r.bcBalanced(tron.NodeLookup, tron.NodeSolidLookup)
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Node = node })
	for i := 0; i < 60 && !r.load(id).Terminal(); i++ {
		r.round(w2)
	}
	if txs := r.chainTxs(r.load(id)); len(txs) != 1 {
		t.Fatalf("%d transfers on chain for one withdrawal", len(txs))
	}
	w = r.paidOnce(id)
	if evs := r.events(id); bcCount(evs, aggregate.EventRebuilt) != 0 {
		t.Fatal("rebuilt an envelope that was on chain")
	}
	if w.Confirmation.TxID != bcOfType[aggregate.EnvelopeBuilt](r.events(id))[0].Envelope.TxID {
		t.Fatal("confirmed another txid than the first envelope's")
	}
}

// Item 1. A backend that lacks blocks of the range cannot vouch for them:
// with every block read from the lagging backend the proof waits, and it
// completes — with the block range, ids and digest recorded and verified
// against the chain — once the backend that serves them has them.
func TestProofOfDeathIsShownOnEveryBlockOfTheRange(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept) // tx1 never reaches the chain
	id := r.ready(bcAddress("scan"), "78")
	node := r.bcBalanced(tron.NodeSolidBlockByNum)
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Node = node })
	r.until(5, r.inState(id, aggregate.StateBroadcasting, aggregate.StateBroadcast), w1)
	w := r.load(id)
	// Up-to-date, the chain is well past the proof point; the lagging
	// backend is not, and it alone serves blocks here.
	bcSolidAtLeast(r.sim, w.Envelope.Expiration+bcMargin.Milliseconds())
	r.sim.Advance(30)
	for range 3 {
		r.round(w1)
	}
	if got := r.load(id); got.Attempt != 1 {
		t.Fatalf("rebuilt on a backend that does not have the blocks: attempt %d", got.Attempt)
	}
	r.until(80, func() bool { return r.load(id).Attempt == 2 }, w1)
	rb := bcOfType[aggregate.Rebuilt](r.events(id))[0]
	s := rb.Evidence.Scan
	if s.From != w.Envelope.RefBlockNum || s.ToTime < w.Envelope.Expiration+bcMargin.Milliseconds() || s.Blocks() < 20 {
		t.Fatalf("scan %+v for envelope ref %d exp %d", s, w.Envelope.RefBlockNum, w.Envelope.Expiration)
	}
	if err := sagas.VerifyExpiryProof(r.ctx, r.sim, w.Envelope, rb.Evidence); err != nil {
		t.Fatal(err)
	}
	// A proof whose digest does not match the chain is refuted.
	forged := rb.Evidence
	forged.Scan.IDsSHA256 = strings.Repeat("00", 32)
	if err := sagas.VerifyExpiryProof(r.ctx, r.sim, w.Envelope, forged); !errors.Is(err, sagas.ErrProofRefuted) {
		t.Fatalf("forged digest: %v", err)
	}
	r.until(60, r.terminal(id), w1)
	r.paidOnce(id)
}

// Item 2. w1 builds and dies before signing; the policy tightens; w2
// resumes in signing. It must not sign under the old policy: the re-check
// right before signing retires the unsigned envelope back to requested,
// recorded, and a further approval makes it go again.
func TestPolicyTightenedAfterBuildIsCaughtRightBeforeSigning(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("tightened-late"), "500")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterBuild, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	strict, err := aggregate.NewPolicy("two everywhere", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.repo.SetPolicy(r.ctx, aggregate.SetPolicy{Policy: strict, By: "ops", At: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(bcLease + time.Second)
	// w2's ordinary reads lag the policy stream: the re-check reads it
	// from the stream leader.
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { sagas.LagReads(c.Repo, eventlog.TypePolicy, 1) })
	r.round(w2)
	w := r.load(id)
	if w.State != aggregate.StateRequested || w.Reason != aggregate.ReasonPolicyTightened || w.Signature != "" {
		t.Fatalf("%s %s signed=%v", w.State, w.Reason, w.Signature != "")
	}
	if len(w.Retired) != 1 || !w.Retired[0].Unsigned || len(r.sim.BroadcastLog()) != 0 {
		t.Fatalf("retired %+v, sends %d", w.Retired, len(r.sim.BroadcastLog()))
	}
	r.approve(id, "carol")
	r.until(40, r.terminal(id), w2)
	w = r.paidOnce(id)
	signed := bcOfType[aggregate.Signed](r.events(id))
	if len(signed) != 1 || signed[0].PolicyVersion != 1 || w.Attempt != 2 || w.SpentAttempts() != 1 {
		t.Fatalf("signed %+v attempt %d", signed, w.Attempt)
	}
}

// Item 2. An approver who lost the role after approving no longer counts at
// the re-check before signing (the principals in force come from the
// wiring): the unsigned envelope goes back to requested with
// approver_revoked, and the approval of someone who holds the role sends it.
func TestApprovalOfARevokedApproverDoesNotCountAtSigning(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("revoked"), "1500") // bob and carol under four-eyes
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterBuild, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	r.clock.Advance(bcLease + time.Second)
	notCarol := func(p string) bool { return p != "carol" }
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Approver = notCarol })
	r.round(w2)
	w := r.load(id)
	if w.State != aggregate.StateRequested || w.Reason != aggregate.ReasonApproverRevoked || w.HasApproval("carol") {
		t.Fatalf("%s %s approvals %+v", w.State, w.Reason, w.Approvals)
	}
	r.approve(id, "dave")
	r.until(40, r.terminal(id), w2)
	r.paidOnce(id)
}

// Item 3. A worker whose clock is a year ahead claims and dies. Its lease
// ends at the server's record time of the claim plus the lease, not a
// year later: an honest worker takes over after ~30 s of server time.
func TestWorkerClockAYearAheadCannotStrandAWithdrawal(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("fast-clock"), "90")
	honest := &bcClock{t: time.Now().UTC()} // near the server's clock
	fast := func() time.Time { return honest.Now().Add(365 * 24 * time.Hour) }
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) {
		c.Clock, c.Crash = fast, sagas.CrashOnce(sagas.CrashAfterClaim, id)
	})
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	if c := r.load(id).Claim; c.Worker != "w1" || c.Until().After(time.Now().Add(bcLease)) {
		t.Fatalf("claim %+v ends %s", c, c.Until())
	}
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Clock = honest.Now })
	if _, err := w2.Drive(r.ctx, id); !errors.Is(err, sagas.ErrFenced) {
		t.Fatalf("a live lease must fence: %v", err)
	}
	honest.Advance(2 * time.Minute)
	r.until(40, r.terminal(id), w2)
	r.paidOnce(id)
}

// Item 4. The hot-wallet key rotates while an envelope built for the old
// owner waits to be signed. It can never be signed, and never signed it can
// never land: it is replaced, recorded as such, by one for the new owner.
func TestKeyRotationReplacesAnUnsignedEnvelopeForTheNewOwner(t *testing.T) {
	rotated := tron.NewHMACSigner([]byte("weir broadcast saga tests: the rotated key"))
	r := newBCRig(t, func(c *tron.SimConfig) { c.Verifiers = append(c.Verifiers, rotated) })
	id := r.ready(bcAddress("rotated"), "91")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterBuild, id) })
	if _, err := w1.Drive(r.ctx, id); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("drive: %v", err)
	}
	r.clock.Advance(bcLease + time.Second)
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Signer = rotated })
	r.until(40, r.terminal(id), w2)
	w := r.load(id)
	if w.State != aggregate.StateConfirmed {
		t.Fatalf("%s %s", w.State, w.Reason)
	}
	rep := bcOfType[aggregate.EnvelopeReplaced](r.events(id))
	if len(rep) != 1 || rep[0].Reason != aggregate.ReasonSignerChanged || len(w.Retired) != 1 || !w.Retired[0].Unsigned {
		t.Fatalf("replaced %+v retired %+v", rep, w.Retired)
	}
	txs := r.chainTxs(w)
	if len(txs) != 1 || txs[0].From != rotated.Address() || tron.HexID(txs[0].TxID) != w.Confirmation.TxID {
		t.Fatalf("chain %+v", txs)
	}
	r.settled(w)
}

// Item 5. An operator credit may not take an internal transfer's credit id,
// and one recorded before the prefix was reserved does not collide with the
// transfer: the internal credit lives under its own key.
func TestOperatorCreditIDCannotCollideWithAnInternalTransfer(t *testing.T) {
	r := newBCRig(t)
	to := bcAddress("custodied-collide")
	r.custody[to] = "acct-receiver"
	id := r.ready(to, "321")
	if _, _, err := r.repo.UpdateAccount(r.ctx, "acct-receiver", aggregate.Credit{
		Account: "acct-receiver", CreditID: aggregate.InternalCreditPrefix + id, Amount: bcUSDT("5"), At: r.clock.Now(),
	}); !errors.Is(err, aggregate.ErrInvalidCommand) {
		t.Fatalf("operator credit in the internal namespace: %v", err)
	}
	// A legacy credit with that id, appended as it was written before.
	if _, err := r.repo.Store().Append(r.ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: "acct-receiver"}, eventstore.Position{},
		eventstore.Event{ID: eventstore.NewEventID(), Type: aggregate.EventAccountCredited, Data: aggregate.AccountCredited{
			Account: "acct-receiver", CreditID: aggregate.InternalCreditPrefix + id, Amount: bcUSDT("5"), At: r.clock.Now(),
		}}); err != nil {
		t.Fatal(err)
	}
	r.until(5, r.terminal(id), r.worker("w1"))
	r.settled(r.load(id))
	recv, _, err := r.repo.Account(r.ctx, "acct-receiver")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := recv.InternalCredit(id); !ok || !got.Equal(bcUSDT("321")) || !recv.Available().Equal(bcUSDT("326")) {
		t.Fatalf("internal credit %s %v, available %s", got, ok, recv.Available())
	}
}

// Item 6. The ledger releases a cancelled withdrawal's reservation on a
// read that a lagging replica answers without the account.reserved event:
// "no reservation" must be confirmed on the leader, not acknowledged.
func TestReleaseOnALaggingReplicaDoesNotStrandTheReservation(t *testing.T) {
	r := newBCRig(t)
	id := bcOpID(700)
	if _, _, err := r.request(id, bcAddress("lagging-release"), "60"); err != nil {
		t.Fatal(err)
	}
	r.reserve(id)
	w, _, err := r.repo.UpdateWithdrawal(r.ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Cancel{By: "alice", At: r.clock.Now()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lagging := r.newRepo()
	sagas.LagReads(lagging, eventlog.TypeAccount, 1) // misses account.reserved
	if err := sagas.NewLedger(lagging, aggregate.Amount{}, r.clock.Now, nil).Finish(r.ctx, w); err != nil {
		t.Fatal(err)
	}
	if res := r.reservation(id); res.Status != aggregate.ReservationReleased {
		t.Fatalf("reservation %s after release on a lagging read", res.Status)
	}
}

// Item 6. A lagging replica that has not seen a credit must not reject a
// withdrawal for insufficient funds.
func TestInsufficientFundsIsNotDecidedOnALaggingReplica(t *testing.T) {
	r := newBCRig(t)
	if _, _, err := r.repo.UpdateAccount(r.ctx, bcAccount, aggregate.Credit{
		Account: bcAccount, CreditID: "top-up", Amount: bcUSDT("5000000"), At: r.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	id := bcOpID(701)
	if _, _, err := r.request(id, bcAddress("lagging-funds"), "3000000"); err != nil {
		t.Fatal(err)
	}
	lagging := r.newRepo()
	sagas.LagReads(lagging, eventlog.TypeAccount, 1) // misses the top-up
	w, err := sagas.NewLedger(lagging, aggregate.Amount{}, r.clock.Now, nil).Reserve(r.ctx, id)
	if err != nil || !w.Reserved || w.State == aggregate.StateRejected {
		t.Fatalf("reserve on a lagging read: %s %s reserved=%v err=%v", w.State, w.Reason, w.Reserved, err)
	}
}

// Item 2, on a rebuild. The first envelope was signed under the old policy
// and never landed; the policy tightens; once the proof of death holds, the
// rebuilt envelope is not signed under the old approvals: it goes back to
// requested before a second signature exists.
func TestRebuiltEnvelopeIsNotSignedWhenThePolicyTightenedMeanwhile(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept) // the first envelope never reaches the chain
	id := r.ready(bcAddress("tightened-rebuild"), "500")
	w1 := r.worker("w1")
	r.until(5, r.inState(id, aggregate.StateBroadcasting), w1)
	strict, err := aggregate.NewPolicy("two everywhere", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.repo.SetPolicy(r.ctx, aggregate.SetPolicy{Policy: strict, By: "ops", At: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	w := r.load(id)
	bcSolidAtLeast(r.sim, w.Envelope.Expiration+bcMargin.Milliseconds())
	r.until(10, r.inState(id, aggregate.StateRequested), w1)
	w = r.load(id)
	if w.Attempt != 2 || w.Reason != aggregate.ReasonPolicyTightened || len(w.Retired) != 2 || !w.Retired[1].Unsigned {
		t.Fatalf("attempt %d reason %s retired %+v", w.Attempt, w.Reason, w.Retired)
	}
	if n := bcCount(r.events(id), aggregate.EventSigned); n != 1 {
		t.Fatalf("%d signatures, want only the first envelope's", n)
	}
	r.approve(id, "carol")
	r.until(60, r.terminal(id), w1)
	r.paidOnce(id)
}
