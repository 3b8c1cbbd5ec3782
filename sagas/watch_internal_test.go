package sagas

import (
	"context"
	"errors"
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
	return succeeded(h.blocks[num], num), nil
}

// succeeded is block num's receipts: each of ids, SUCCESS.
func succeeded(ids [][32]byte, num int64) []tron.TxInfo {
	var out []tron.TxInfo
	for _, id := range ids {
		out = append(out, tron.TxInfo{TxID: id, BlockNumber: num, Receipt: tron.ReceiptSuccess})
	}
	return out
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
		if err := cw.followHead(ctx, node, callCtx, h, headNow); err != nil {
			t.Fatal(err)
		}
		return node.asked
	}

	if asked := follow(100); len(asked) != 0 || heads != 0 {
		t.Fatalf("nothing watched: asked blocks %v and %d heads", asked, heads)
	}
	cw.watch(a, 101)
	if asked := follow(100); len(asked) != 0 || heads != 0 {
		t.Fatalf("no block since the send: asked blocks %v and %d heads", asked, heads)
	}
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

// failingHead is a head view whose receipts path fails (a node without it).
type failingHead struct{ tron.Node }

func (failingHead) TxInfosByBlockNum(context.Context, int64) ([]tron.TxInfo, error) {
	return nil, errors.New("404 page not found")
}

// A drop lookup due at block n waits for the head scan while the scan is
// working and has not fetched n for the txid; never once the scan fetched
// n, saw the txid, or failed (a node without the path: the lookups decide
// as before the head scan existed).
func TestADropLookupWaitsForAWorkingHeadScanOnly(t *testing.T) {
	ctx := context.Background()
	callCtx := func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	a, b := [32]byte{1}, [32]byte{2}
	at := func(n int64) func(context.Context) (tron.BlockHeader, error) {
		return func(context.Context) (tron.BlockHeader, error) { return tron.BlockHeader{Number: n}, nil }
	}
	cw := newChainWatch()
	cw.watch(a, 101)
	cw.watch(b, 101)
	if !cw.headPending(a, 103) {
		t.Fatal("nothing fetched yet: the lookup should wait for the head scan")
	}
	node := &headBlocks{blocks: map[int64][][32]byte{102: {b}}}
	if err := cw.followHead(ctx, node, callCtx, 103, at(103)); err != nil {
		t.Fatal(err)
	}
	if cw.headPending(a, 103) {
		t.Fatal("block 103 fetched without a: the lookup is due")
	}
	if !cw.headPending(a, 104) {
		t.Fatal("block 104 not fetched yet: the lookup should wait")
	}
	if cw.headPending(b, 104) || !cw.included(b) {
		t.Fatal("b was seen in a head block: nothing to wait for")
	}
	if err := cw.followHead(ctx, failingHead{}, callCtx, 104, at(104)); err == nil {
		t.Fatal("a failing head scan reported no error")
	}
	if cw.headPending(a, 104) {
		t.Fatal("the head scan is down: the lookup must not wait for it")
	}
	if cw.headPending([32]byte{9}, 104) {
		t.Fatal("a txid the scan does not watch must not wait")
	}
}

// solidBlocks is a solid view with head solid whose block num holds the
// txids in blocks; it records the blocks fetched.
type solidBlocks struct {
	tron.Node
	solid   int64
	blocks  map[int64][][32]byte
	fetched []int64
	during  func(num int64) // called while block num is fetched (the watch's lock is not held)
}

func (s *solidBlocks) SolidHead(context.Context) (tron.BlockHeader, error) {
	return tron.BlockHeader{Number: s.solid}, nil
}

func (s *solidBlocks) SolidTxInfosByBlockNum(_ context.Context, num int64) ([]tron.TxInfo, error) {
	if num > s.solid {
		return nil, tron.ErrBlockNotSolid
	}
	s.fetched = append(s.fetched, num)
	if s.during != nil {
		s.during(num)
	}
	return succeeded(s.blocks[num], num), nil
}

// A txid taken over from the log is watched from the block after its
// reference block: a fresh scan starts there; a running scan goes back to
// it (fetching the blocks in between again finds nothing twice); one so
// far back the scan cannot go back (more than recentBlocks) is left to the
// lookups, as is one a fresh scan would have to start more than
// recentBlocks behind the solid head for. A txid is expected where the
// lookup found it, so the slack is counted from there, not from the
// reference block.
func TestTheSolidScanResumesFromWhereTheLogSaysATxidCanBe(t *testing.T) {
	ctx := context.Background()
	callCtx := func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	a, b, c, d := [32]byte{1}, [32]byte{2}, [32]byte{3}, [32]byte{4}
	node := &solidBlocks{solid: 110, blocks: map[int64][][32]byte{105: {a}, 103: {b}, 130: {a}}}
	cw := newChainWatch()
	follow := func(solid int64) []int64 {
		t.Helper()
		node.solid, node.fetched = solid, nil
		if err := cw.follow(ctx, node, callCtx); err != nil {
			t.Fatal(err)
		}
		return node.fetched
	}

	cw.adopt(a, 101, 120) // reference block 100; a lookup found it in head block 120
	if got := follow(110); !slices.Equal(got, []int64{101, 102, 103, 104, 105, 106, 107, 108, 109, 110}) {
		t.Fatalf("fresh scan fetched %v, want 101..110", got)
	}
	if found, _ := cw.status(a); found == nil || found.BlockNumber != 105 {
		t.Fatalf("a not found in 105: %+v", found)
	}
	cw.adopt(b, 102, 115)
	if _, wait := cw.status(b); wait {
		t.Fatal("b is in block 103, already passed (the scan remembers its txids, not its receipts): the lookups settle it")
	}
	if got := follow(112); !slices.Equal(got, []int64{111, 112}) {
		t.Fatalf("b's blocks were fetched already and are remembered: fetched %v", got)
	}

	cw.unwatch(a)
	cw.unwatch(b)
	follow(112) // nothing watched: the scan resets
	cw.adopt(c, 400, 418)
	follow(420)
	cw.adopt(d, 300, 305) // behind the fresh scan's first block: it goes back
	if got := follow(420); len(got) == 0 || got[0] != 300 {
		t.Fatalf("after a takeover behind the scan it fetched %v, want from 300", got)
	}
	if _, wait := cw.status(c); !wait {
		t.Fatal("c is expected in 418 and the solid head is 420 < 418+slack: wait for the scan")
	}

	e := [32]byte{5}
	cw.adopt(e, 1, 5) // further back than the scan goes
	if _, wait := cw.status(e); wait {
		t.Fatal("a txid the scan cannot go back to must be left to the lookups")
	}
	cw.unwatch(c)
	cw.unwatch(d)
	cw.unwatch(e)
	follow(1000)
	cw.adopt(e, 10, 990)
	if got := follow(1000); len(got) != recentBlocks || got[0] != 1000-recentBlocks+1 {
		t.Fatalf("a fresh scan for a txid 990 blocks back fetched %d blocks from %d, want the last %d", len(got), got[0], recentBlocks)
	}
	if _, wait := cw.status(e); wait {
		t.Fatal("blocks below the fresh scan's floor hold e unscanned: the lookups decide")
	}
}

// A takeover that sends the scan back while a follow is fetching blocks
// is not undone by that follow: the blocks it went back to are fetched by
// the next one, so the txid taken over is found by the scan, not left to
// the lookups.
func TestATakeoverDuringAFollowIsNotUndoneByIt(t *testing.T) {
	ctx := context.Background()
	callCtx := func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	a, b := [32]byte{1}, [32]byte{2}
	node := &solidBlocks{solid: 120, blocks: map[int64][][32]byte{95: {b}}}
	cw := newChainWatch()
	cw.watch(a, 110)
	node.during = func(n int64) {
		if n == 112 {
			cw.adopt(b, 90, 96) // reference block 89: behind the scan's first block
		}
	}
	if err := cw.follow(ctx, node, callCtx); err != nil {
		t.Fatal(err)
	}
	node.during = nil
	if err := cw.follow(ctx, node, callCtx); err != nil {
		t.Fatal(err)
	}
	if found, _ := cw.status(b); found == nil || found.BlockNumber != 95 {
		t.Fatalf("b, taken over mid-follow, not found in block 95 by the scan (fetched %v)", node.fetched)
	}
}
