package sagas

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weir-payouts/weir/tron"
)

// Confirmation by block scan (issue 12, item 2). Instead of asking the
// node about every txid in flight on every pass, a worker follows the
// solid blocks: one SolidTxInfosByBlockNum call per block answers for all
// of its txids at once.
//
// A txid is watched from the block after the head this worker read before
// sending it: no block at or below that head can hold bytes sent after it
// was read. Solid blocks are final, so a block scanned once stays true,
// and the watch only ever moves forward: no block is missed (each is
// fetched in order, and a backend that does not have one yet stops the
// scan there) and none is counted twice (a found txid is found once).
//
// The scan position is memory only, and deliberately nothing more than an
// optimisation: a worker that lost it (a restart, a flight reloaded from
// its stream) does not watch the txid and asks about it by txid as
// before, so its loss costs lookups, never a wrong outcome. A txid the
// scan has covered for watchSlack solid blocks without finding it, or one
// registered behind blocks the scan no longer remembers, falls back to
// those lookups too (a dropped transaction is found that way and resent).
type chainWatch struct {
	mu      sync.Mutex
	next    int64                   // the next solid block to fetch; 0 = nothing fetched yet
	solid   int64                   // the solid head at the last follow
	watched map[[32]byte]*watchedTx // txids sent by this worker, not found yet
	recent  map[int64][][32]byte    // txids of recently scanned blocks, for late registrations
}

// watchedTx is one txid under watch.
type watchedTx struct {
	from    int64        // the first block that can hold it
	covered bool         // every block from `from` up to next-1 was scanned for it
	found   *tron.TxInfo // its receipt, once a scanned block held it
}

// watchSlack is how many solid blocks past the first one that could hold
// a watched txid the scan covers before the worker asks the node about it
// by txid (was it dropped from the pool?).
const watchSlack = 5

// recentBlocks bounds the scanned blocks remembered for registrations
// that arrive behind the scan.
const recentBlocks = 256

func newChainWatch() *chainWatch {
	return &chainWatch{watched: map[[32]byte]*watchedTx{}, recent: map[int64][][32]byte{}}
}

// watch starts watching txid from block from on.
func (cw *chainWatch) watch(txid [32]byte, from int64) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if _, ok := cw.watched[txid]; ok {
		return // a resend: the first send's lower bound stands
	}
	wt := &watchedTx{from: from, covered: true}
	if cw.next > 0 && from < cw.next {
		for n := from; n < cw.next; n++ {
			ids, ok := cw.recent[n]
			if !ok {
				wt.covered = false // scanned and forgotten: the lookups decide
				break
			}
			for _, id := range ids {
				if id == txid {
					wt.covered = false // in a block already passed: let the lookups settle it
				}
			}
		}
	}
	cw.watched[txid] = wt
}

// unwatch stops watching txid (terminal, retired, or lost).
func (cw *chainWatch) unwatch(txid [32]byte) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	delete(cw.watched, txid)
}

// uncover leaves txid to the lookups by txid (its block's receipt proved
// nothing, say).
func (cw *chainWatch) uncover(txid [32]byte) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if wt, ok := cw.watched[txid]; ok {
		wt.covered, wt.found = false, nil
	}
}

// status is what the scan knows of txid: found (its receipt), or wait
// (the scan covers it and has not passed the slack), or neither (ask the
// node by txid).
func (cw *chainWatch) status(txid [32]byte) (found *tron.TxInfo, wait bool) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	wt, ok := cw.watched[txid]
	switch {
	case !ok || !wt.covered:
		return nil, false
	case wt.found != nil:
		f := *wt.found
		return &f, false
	}
	return nil, cw.solid < wt.from+watchSlack
}

// follow fetches the solid blocks from the scan position up to the solid
// head (at most maxScanPerStep of them), matching them against every
// watched txid. With nothing watched it calls nothing.
func (cw *chainWatch) follow(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) error {
	cw.mu.Lock()
	if len(cw.watched) == 0 {
		// Nothing to look for, and no node call: the next txid watched
		// starts the scan at its own first block.
		cw.next, cw.recent = 0, map[int64][][32]byte{}
		cw.mu.Unlock()
		return nil
	}
	cw.mu.Unlock()
	nctx, cancel := callCtx(ctx)
	head, err := node.SolidHead(nctx)
	cancel()
	if err != nil {
		return fmt.Errorf("solid head: %w", err)
	}
	cw.mu.Lock()
	if head.Number > cw.solid {
		cw.solid = head.Number
	}
	if cw.next == 0 {
		cw.next = head.Number + 1
		for _, wt := range cw.watched {
			cw.next = min(cw.next, wt.from)
		}
	}
	next := cw.next
	cw.mu.Unlock()
	for n := next; n <= head.Number && n < next+maxScanPerStep; n++ {
		nctx, cancel := callCtx(ctx)
		infos, err := node.SolidTxInfosByBlockNum(nctx, n)
		cancel()
		if errors.Is(err, tron.ErrBlockNotSolid) {
			return nil // this backend does not have it yet: resume here
		}
		if err != nil {
			return fmt.Errorf("receipts of solid block %d: %w", n, err)
		}
		cw.mu.Lock()
		ids := make([][32]byte, 0, len(infos))
		for i := range infos {
			in := infos[i]
			ids = append(ids, in.TxID)
			if wt, ok := cw.watched[in.TxID]; ok && wt.covered && wt.found == nil && n >= wt.from {
				wt.found = &in
			}
		}
		cw.recent[n] = ids
		delete(cw.recent, n-recentBlocks)
		cw.next = n + 1
		cw.mu.Unlock()
	}
	return nil
}

// chainView is the head and the solid reference block (TAPoS) a worker
// builds envelopes and decides first sends on, read once per round — each
// Step, each notification or poll of Run — and shared by every withdrawal
// it drives in that round, not read per withdrawal. A view a round old is
// a little behind the chain, which only makes an envelope expire a little
// earlier and a first send's head a lower bound (see chainWatch.watch).
// The head and the reference block are read separately, each only when a
// withdrawal of the round needs it: a round that only sends or waits
// reads no reference block.
type chainView struct {
	mu                  sync.Mutex
	head, ref           tron.BlockHeader
	headFresh, refFresh bool
}

// expire makes the next reads ask the node again.
func (v *chainView) expire() {
	v.mu.Lock()
	v.headFresh, v.refFresh = false, false
	v.mu.Unlock()
}

// tapos returns the round's head and reference block, reading each once.
func (v *chainView) tapos(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (head, ref tron.BlockHeader, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if head, err = v.headLocked(ctx, node, callCtx); err != nil {
		return head, ref, err
	}
	if v.refFresh {
		return head, v.ref, nil
	}
	nctx, cancel := callCtx(ctx)
	defer cancel()
	if ref, err = node.RefBlock(nctx); err != nil {
		return head, ref, fmt.Errorf("reference block: %w", err)
	}
	v.ref, v.refFresh = ref, true
	return head, ref, nil
}

// headNow returns the round's head, reading it once.
func (v *chainView) headNow(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (tron.BlockHeader, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.headLocked(ctx, node, callCtx)
}

// known returns the latest head read, fresh or not (zero before any).
func (v *chainView) known() tron.BlockHeader {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.head
}

func (v *chainView) headLocked(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (tron.BlockHeader, error) {
	if v.headFresh {
		return v.head, nil
	}
	nctx, cancel := callCtx(ctx)
	defer cancel()
	head, err := node.Head(nctx)
	if err != nil {
		return head, fmt.Errorf("head: %w", err)
	}
	v.head, v.headFresh = head, true
	return head, nil
}
