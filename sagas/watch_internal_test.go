package sagas

import (
	"context"
	"slices"
	"testing"

	"github.com/weir-payouts/weir/tron"
)

// headBlocks is a head view whose block num holds the txids in blocks; it
// records the blocks asked for.
type headBlocks struct {
	tron.Node
	blocks map[int64][][32]byte
	asked  []int64
}

func (h *headBlocks) TxInfosByBlockNum(_ context.Context, num int64) ([]tron.TxInfo, error) {
	h.asked = append(h.asked, num)
	var out []tron.TxInfo
	for _, id := range h.blocks[num] {
		out = append(out, tron.TxInfo{TxID: id, BlockNumber: num, Receipt: tron.ReceiptSuccess})
	}
	return out, nil
}

// The head scan is bounded: it calls nothing (not even the head) while no
// watched txid waits for it; it starts at the first block that can hold
// the earliest such txid, never behind what the solid scan has matched,
// fetches at most maxHeadScanPerFollow blocks per follow (the newest), no
// block twice, and stops once every txid was seen in a head block.
func TestHeadScanIsBoundedAndStopsWhenEveryTxidWasSeen(t *testing.T) {
	ctx := context.Background()
	callCtx := func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	a, b := [32]byte{1}, [32]byte{2}
	node := &headBlocks{blocks: map[int64][][32]byte{105: {a}, 240: {b}}}
	head, heads := int64(0), 0
	headNow := func(context.Context) (tron.BlockHeader, error) {
		heads++
		return tron.BlockHeader{Number: head}, nil
	}
	cw := newChainWatch()
	follow := func(h int64) []int64 {
		t.Helper()
		head, node.asked = h, nil
		if err := cw.followHead(ctx, node, callCtx, headNow); err != nil {
			t.Fatal(err)
		}
		return node.asked
	}

	if asked := follow(100); len(asked) != 0 || heads != 0 {
		t.Fatalf("nothing watched: asked blocks %v and %d heads", asked, heads)
	}
	cw.watch(a, 101)
	if asked := follow(103); !slices.Equal(asked, []int64{101, 102, 103}) {
		t.Fatalf("asked %v, want the blocks since the send", asked)
	}
	if asked := follow(106); !slices.Equal(asked, []int64{104, 105, 106}) || !cw.included(a) {
		t.Fatalf("asked %v (included %v), want 104..106 and a seen in 105", asked, cw.included(a))
	}
	if asked := follow(110); len(asked) != 0 {
		t.Fatalf("every txid seen: asked %v", asked)
	}

	cw.watch(b, 111)
	cw.next = 150 // the solid scan has matched every block below 150
	if asked := follow(200); len(asked) != maxHeadScanPerFollow || asked[0] != 200-maxHeadScanPerFollow+1 || asked[len(asked)-1] != 200 {
		t.Fatalf("200 blocks behind: asked %v, want the newest %d", asked, maxHeadScanPerFollow)
	}
	if asked := follow(205); !slices.Equal(asked, []int64{201, 202, 203, 204, 205}) {
		t.Fatalf("asked %v, want only the blocks not fetched yet", asked)
	}
	cw.next = 230
	if asked := follow(232); !slices.Equal(asked, []int64{230, 231, 232}) {
		t.Fatalf("asked %v, want nothing the solid scan matched already", asked)
	}
	if asked := follow(240); asked[len(asked)-1] != 240 || !cw.included(b) {
		t.Fatalf("asked %v (included %v)", asked, cw.included(b))
	}
	cw.unwatch(a)
	cw.unwatch(b)
	if asked := follow(300); len(asked) != 0 || cw.headNext != 0 {
		t.Fatalf("nothing watched: asked %v, next %d", asked, cw.headNext)
	}
}
