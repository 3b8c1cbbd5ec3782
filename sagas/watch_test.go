package sagas_test

import (
	"context"
	"sync"
	"testing"

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
	var mu sync.Mutex
	calls := map[tron.NodeMethod]int{}
	blocks := map[int64]int{}
	r.node.Before = func(_ context.Context, m tron.NodeMethod) error {
		mu.Lock()
		defer mu.Unlock()
		calls[m]++
		return nil
	}
	infos := &countingInfos{Node: r.sim, blocks: blocks, mu: &mu}
	r.node.Node = infos
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 8 })
	r.until(60, r.allTerminal(ids), w1)
	r.allPaidOnce(ids)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("node calls: %v", calls)
	if calls[tron.NodeSolidLookup] != 0 {
		t.Fatalf("%d solid lookups by txid; the block scan should have answered", calls[tron.NodeSolidLookup])
	}
	// By txid only until each is in a block (pending right after the send,
	// included a block later), not for the ~20 blocks to solidity.
	if calls[tron.NodeLookup] > 2*len(ids) {
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
