package sagas_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// callCounter counts the node calls the rig's workers make, by method.
type callCounter struct {
	mu    sync.Mutex
	calls map[tron.NodeMethod]int
}

func countCalls(r *bcRig) *callCounter {
	c := &callCounter{calls: map[tron.NodeMethod]int{}}
	r.node.Before = func(_ context.Context, m tron.NodeMethod) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.calls[m]++
		return nil
	}
	return c
}

func (c *callCounter) snapshot() (map[tron.NodeMethod]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, total := map[tron.NodeMethod]int{}, 0
	for m, n := range c.calls {
		out[m] = n
		total += n
	}
	return out, total
}

// noHeadView is a node that does not serve the head view's receipts
// (/wallet/gettransactioninfobyblocknum): the worker's head scan gets
// nothing, as before it existed.
type noHeadView struct{ tron.Node }

func (noHeadView) TxInfosByBlockNum(context.Context, int64) ([]tron.TxInfo, error) {
	return nil, fmt.Errorf("no head view here: %w", tron.ErrUnavailable)
}

// idList offers a fixed list of withdrawals as the ready queue, by id
// only: a worker skips those it holds without loading them, so a burst of
// many costs the test no reload of every withdrawal per round.
type idList []string

func (l idList) Ready(time.Time) []aggregate.Withdrawal                   { return nil }
func (l idList) InFlightWithdrawals(time.Time) []aggregate.Withdrawal     { return nil }
func (l idList) ReadyIDs(_ time.Time, dst []string) []string              { return append(dst, l...) }
func (l idList) InFlightIDs(_ time.Time, _ string, dst []string) []string { return dst }

// headScanRun drains n withdrawals through one worker on a chain whose
// blocks become solid 19 blocks after they are made (mainnet's lag) and
// returns the node calls by method and per confirmed withdrawal.
func headScanRun(t *testing.T, n int, node func(tron.Node) tron.Node) (map[tron.NodeMethod]int, float64) {
	r := newBCRig(t)
	ids := r.readyMany("lag", n)
	count := countCalls(r)
	if node != nil {
		r.node.Node = node(r.sim)
	}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = n; c.Work = idList(ids) })
	r.until(40, r.allTerminal(ids), w1)
	r.allPaidOnce(ids)
	calls, total := count.snapshot()
	return calls, float64(total) / float64(n)
}

// Issue 12, item 2, on a chain with solidity lag: following the head
// blocks too (one TxInfosByBlockNum call per head block for every txid in
// flight) tells the worker each accepted transaction was included, so it
// never asks the node by txid whether one was dropped. Without the head
// view (the same run on a node that does not serve it) that is a lookup
// per withdrawal, ~2 node calls each.
func TestHeadBlockScanSparesTheDropLookupOnAChainWithLag(t *testing.T) {
	const n = 128
	calls, per := headScanRun(t, n, nil)
	t.Logf("with the head scan: %.2f node calls per confirmed withdrawal: %v", per, calls)
	if calls[tron.NodeLookup]+calls[tron.NodeSolidLookup] != 0 {
		t.Fatalf("%d lookups and %d solid lookups by txid; the block scans should have answered", calls[tron.NodeLookup], calls[tron.NodeSolidLookup])
	}
	if calls[tron.NodeBroadcast] != n {
		t.Fatalf("%d broadcasts for %d withdrawals", calls[tron.NodeBroadcast], n)
	}
	// One call per head block while something is neither found nor seen
	// in a head block: a handful for a burst, not one per withdrawal.
	if calls[tron.NodeTxInfosByBlockNum] == 0 || calls[tron.NodeTxInfosByBlockNum] > 4 {
		t.Fatalf("%d head block receipt calls for one burst", calls[tron.NodeTxInfosByBlockNum])
	}
	if per > 1.5 {
		t.Fatalf("%.2f node calls per confirmed withdrawal, want ≤ 1.5", per)
	}

	// The same burst on a node without the head view: leaving out its
	// refused head scan calls, what remains is the worker as it was
	// before — a lookup per withdrawal.
	before, _ := headScanRun(t, n, func(sim tron.Node) tron.Node { return noHeadView{sim} })
	total := 0
	for m, c := range before {
		if m != tron.NodeTxInfosByBlockNum {
			total += c
		}
	}
	t.Logf("without the head view: %.2f node calls per confirmed withdrawal (the refused head scan calls left out): %v",
		float64(total)/n, before)
	if before[tron.NodeLookup] < n {
		t.Fatalf("without the head view: %d lookups by txid for %d withdrawals; want one each", before[tron.NodeLookup], n)
	}
}

// A transaction the pool drops is still noticed while the head scan runs:
// no head block holds it, so once dropCheckBlocks heads have passed the
// worker asks by txid, learns the node does not know it, and sends the
// same bytes again in time (no rebuild). Only the dropped one is asked
// about.
func TestADroppedTransactionIsStillNoticedAndResentWithTheHeadScan(t *testing.T) {
	r := newBCRig(t)
	ids := r.readyMany("drop", 8)
	count := countCalls(r)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultDropAfterAccept)
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 8 })
	r.until(60, r.allTerminal(ids), w1)
	r.allPaidOnce(ids) // one envelope each: the dropped one was resent, not rebuilt
	calls, _ := count.snapshot()
	t.Logf("node calls: %v", calls)
	sends := map[[32]byte]int{}
	var dropped [32]byte
	for _, s := range r.sim.BroadcastLog() {
		sends[s.TxID]++
		if s.Fault == tron.FaultDropAfterAccept {
			dropped = s.TxID
		}
	}
	if sends[dropped] != 2 {
		t.Fatalf("the dropped transaction was sent %d times, want 2 (the same bytes again)", sends[dropped])
	}
	if calls[tron.NodeBroadcast] != len(ids)+1 {
		t.Fatalf("%d broadcasts for %d withdrawals and one drop", calls[tron.NodeBroadcast], len(ids))
	}
	if calls[tron.NodeLookup] < 1 || calls[tron.NodeLookup] > 2 {
		t.Fatalf("%d lookups by txid; want the dropped transaction's only", calls[tron.NodeLookup])
	}
}

// forkedHead is a node whose head view claims, in every head block asked,
// a SUCCESS receipt for every transaction ever sent to it — as a head
// block later replaced in a fork (or a lying node) would. The solid view
// is the chain's.
type forkedHead struct {
	tron.Node
	sim *tron.SimNode
}

func (f forkedHead) TxInfosByBlockNum(_ context.Context, num int64) ([]tron.TxInfo, error) {
	var out []tron.TxInfo
	for _, s := range f.sim.BroadcastLog() {
		out = append(out, tron.TxInfo{TxID: s.TxID, BlockNumber: num, BlockTime: s.HeadTime, Receipt: tron.ReceiptSuccess})
	}
	return out, nil
}

// A head block's receipt is a hint, never proof: a withdrawal whose
// transaction a head block "held" (then forked away; here the pool
// dropped it) is not confirmed on it. The worker waits for the solid
// blocks, which never hold it; once the solid scan has passed it, it asks
// by txid, finds it unknown, and the withdrawal goes on to the chain-time
// proof and a rebuild. The money moves once, and the confirmation names
// the solid block that holds the transfer.
func TestAHeadBlockReceiptIsNeverTakenForConfirmation(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("forked"), "7")
	r.node.Node = forkedHead{Node: r.sim, sim: r.sim}
	r.sim.Script(tron.ChannelBroadcast, tron.FaultDropAfterAccept)
	w1 := r.worker("w1")
	for i := 0; i < 120 && !r.load(id).Terminal(); i++ {
		r.round(w1)
		if w := r.load(id); w.State == aggregate.StateConfirmed && len(r.chainTxs(w)) == 0 {
			t.Fatalf("confirmed %s with nothing on chain", w.Confirmation.TxID)
		}
	}
	w := r.paidOnce(id)
	if w.Attempt != 2 {
		t.Fatalf("attempt %d; the dropped envelope should have been proven dead and rebuilt", w.Attempt)
	}
	if err := w.Retired[0].Evidence.ProvesFor(r.envelopeOf(id, w.Retired[0].TxID)); err != nil {
		t.Fatalf("the rebuild's proof: %v", err)
	}
}
