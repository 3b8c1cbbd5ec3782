package sagas_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// Issue 12, item 2: confirmations come from following the solid blocks,
// one receipts call per block for every txid in flight, not one lookup per
// txid per pass. Eight withdrawals wait ~20 blocks for solidity; the node
// is asked by txid only until each is in a block (is it still in the
// pool?), never by txid on the solidity view, and each solid block's
// receipts are fetched once.
func TestConfirmationFollowsTheSolidBlocksNotEachTxid(t *testing.T) {
	r := newBCRig(t)
	ids := r.readyMany("scan", 8)
	n := r.countNodeCalls()
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 8 })
	r.until(60, r.allTerminal(ids), w1)
	r.allPaidOnce(ids)
	n.mu.Lock()
	defer n.mu.Unlock()
	calls, blocks := n.calls, n.blocks
	t.Logf("node calls: %v", calls)
	if calls[tron.NodeSolidLookup] != 0 {
		t.Fatalf("%d solid lookups by txid; the block scan should have answered", calls[tron.NodeSolidLookup])
	}
	// By txid once each (is it still in the pool?), when the chain has had
	// a few blocks to include it — not right after the send, when it can
	// only be pending, and not for the ~20 blocks to solidity.
	if calls[tron.NodeLookup] > len(ids) {
		t.Fatalf("%d lookups by txid for %d withdrawals", calls[tron.NodeLookup], len(ids))
	}
	// The head and the reference block (TAPoS) are read once per round and
	// shared, not read per withdrawal.
	if calls[tron.NodeRefBlock] >= len(ids) || calls[tron.NodeHead] >= len(ids) {
		t.Fatalf("%d reference blocks and %d heads read for %d withdrawals", calls[tron.NodeRefBlock], calls[tron.NodeHead], len(ids))
	}
	for n, c := range blocks {
		if c != 1 {
			t.Fatalf("the receipts of block %d were fetched %d times", n, c)
		}
	}
}

// nodeCounts is what countNodeCalls counts.
type nodeCounts struct {
	mu     sync.Mutex
	calls  map[tron.NodeMethod]int // node calls by method
	blocks map[int64]int           // receipts fetched, by solid block
}

// countNodeCalls makes r's node count its calls from now on.
func (r *bcRig) countNodeCalls() *nodeCounts {
	n := &nodeCounts{calls: map[tron.NodeMethod]int{}, blocks: map[int64]int{}}
	r.node.Before = func(_ context.Context, m tron.NodeMethod) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.calls[m]++
		return nil
	}
	r.node.Node = &countingInfos{Node: r.sim, blocks: n.blocks, mu: &n.mu}
	return n
}

// countingInfos counts SolidTxInfosByBlockNum calls per block.
type countingInfos struct {
	tron.Node
	mu     *sync.Mutex
	blocks map[int64]int
}

func (c *countingInfos) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	infos, err := c.Node.SolidTxInfosByBlockNum(ctx, num)
	if err == nil {
		c.mu.Lock()
		c.blocks[num]++
		c.mu.Unlock()
	}
	return infos, err
}

// Issue 12: on a chain that includes and solidifies a transaction in the
// next block, the block scan finds every accepted transaction before the
// drop check is due: the worker makes one Broadcast per withdrawal and no
// lookup by txid at all, and the head, reference block and scan calls
// are per round, shared by every withdrawal in flight.
func TestAcceptedTransactionsCostOneBroadcastEachAndNoLookup(t *testing.T) {
	r := newBCRig(t, func(c *tron.SimConfig) { c.Instant = true })
	ids := r.readyMany("one-call", 16)
	var mu sync.Mutex
	calls := map[tron.NodeMethod]int{}
	r.node.Before = func(_ context.Context, m tron.NodeMethod) error {
		mu.Lock()
		defer mu.Unlock()
		calls[m]++
		return nil
	}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 16 })
	r.until(20, r.allTerminal(ids), w1)
	r.allPaidOnce(ids)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, c := range calls {
		total += c
	}
	t.Logf("node calls: %v (%.2f per withdrawal)", calls, float64(total)/float64(len(ids)))
	if calls[tron.NodeBroadcast] != len(ids) {
		t.Fatalf("%d broadcasts for %d withdrawals", calls[tron.NodeBroadcast], len(ids))
	}
	if calls[tron.NodeLookup]+calls[tron.NodeSolidLookup] != 0 {
		t.Fatalf("%d lookups and %d solid lookups by txid; the block scan should have answered", calls[tron.NodeLookup], calls[tron.NodeSolidLookup])
	}
	if per := float64(total) / float64(len(ids)); per > 1.5 {
		t.Fatalf("%.2f node calls per withdrawal, want ≤ 1.5", per)
	}
}

// Issue 12, item 2: the scan position is durable — it is the log. A
// worker that dies with eight withdrawals sent and in blocks, none solid
// yet, leaves no position of its own behind; a fresh worker (another
// process, after the leases lapsed) takes each over, asks the node once by
// txid (the doubt the crash left), and then follows the solid blocks from
// the earliest block any of them can be in — the block after its
// envelope's reference block, which the log holds — instead of asking by
// txid on every pass. No block is missed (each is confirmed, from the
// block that holds it), none is counted twice (each block's receipts are
// fetched once, each withdrawal confirmed once), and no block below that
// lower bound is fetched.
func TestARestartedWorkerResumesTheBlockScanFromTheLog(t *testing.T) {
	r := newBCRig(t)
	ids := r.readyMany("resume", 8)
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 8 })
	r.until(10, func() bool {
		for _, id := range ids {
			if w := r.load(id); w.Sends == 0 {
				return false
			}
		}
		return true
	}, w1)
	// w1 is gone, with everything it had in memory. The chain moves on.
	r.sim.Advance(3)
	from := int64(0)
	for _, id := range ids {
		w := r.load(id)
		if w.Terminal() {
			t.Fatalf("%s is %s before the restart; the test wants them in flight", id, w.State)
		}
		if from == 0 || w.Envelope.RefBlockNum+1 < from {
			from = w.Envelope.RefBlockNum + 1
		}
	}
	r.clock.Advance(bcLease + time.Second)

	counts := r.countNodeCalls()
	w2 := r.worker("w2", func(c *sagas.WorkerConfig) { c.Inflight = 8 })
	r.until(60, r.allTerminal(ids), w2)
	r.allPaidOnce(ids)
	for _, id := range ids {
		if n := bcCount(r.events(id), aggregate.EventConfirmed); n != 1 {
			t.Fatalf("%s confirmed %d times", id, n)
		}
	}
	counts.mu.Lock()
	defer counts.mu.Unlock()
	calls, blocks := counts.calls, counts.blocks
	t.Logf("node calls after the restart: %v; blocks scanned from the lower bound %d", calls, from)
	if calls[tron.NodeSolidLookup] != 0 {
		t.Fatalf("%d solid lookups by txid; the resumed block scan should have answered", calls[tron.NodeSolidLookup])
	}
	if calls[tron.NodeLookup] > len(ids) {
		t.Fatalf("%d lookups by txid for %d withdrawals taken over: one each (the crash's doubt) at most", calls[tron.NodeLookup], len(ids))
	}
	for n, c := range blocks {
		if c != 1 {
			t.Fatalf("the receipts of block %d were fetched %d times", n, c)
		}
		if n < from {
			t.Fatalf("block %d fetched, below the earliest block (%d) the log says any of them can be in", n, from)
		}
	}
}
