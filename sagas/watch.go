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
// The scan position is durable because it is derived from the log, not
// kept beside it: every txid in flight has its envelope in the log, and
// the envelope's reference block was read before its bytes were built, so
// no block at or below it can hold them. A worker that takes a flight
// over without having sent it (a restart, a crash, a lapsed lease: see
// Worker.adopt) asks the node by txid once — the doubt the handover left —
// and then watches the txid from the block after that reference block: a
// fresh scan starts at the earliest such block of the txids it watches, a
// running one goes back to it (the blocks in between are fetched again;
// recentBlocks bounds how far). So a restart resumes where the log says
// the chain can hold what is in flight: no block that can hold one of
// them is skipped, and a block fetched twice counts nothing twice (a
// found txid is found once, a withdrawal confirmed once). There is no
// separate cursor to trust, to protect, or to lose. A txid the scan has
// covered for watchSlack solid blocks past the block it was expected in
// without finding it, or one registered behind blocks the scan can no
// longer go back to, falls back to lookups by txid (a dropped transaction
// is found that way and resent), so a lost watch costs lookups, never a
// wrong outcome.
//
// The head blocks are followed too, for a narrower question: was a txid
// included at all, or dropped from the pool? Solid blocks trail the head
// (~19 blocks on mainnet), so without it a worker would ask the node by
// txid about every transaction it sent, once the transaction had had time
// to land (see dropCheckBlocks): a lookup per withdrawal. One
// TxInfosByBlockNum call per head block answers for every txid in flight;
// a txid a head block held is marked included and is not asked about. A
// head block is not final — a fork can replace it, a lagging backend can
// answer [] for a block it lacks — so such a hit only spares that lookup:
// nothing is confirmed, rebuilt or recorded on it (confirmation comes only
// from the solid scan), and a txid marked included that never reaches a
// solid block is asked about by txid once the solid scan has passed it by
// watchSlack blocks, as any txid the scan does not find. The head scan
// runs only while some txid is neither found nor marked included, starts
// at the first block that can hold the earliest of them (never behind the
// solid scan, which has matched those blocks already), and fetches at
// most maxHeadScanPerFollow blocks per follow, the newest ones: a txid
// whose block it skipped is asked about by txid, as before.
type chainWatch struct {
	mu       sync.Mutex
	next     int64                   // the next solid block to fetch; 0 = nothing fetched yet
	solid    int64                   // the solid head at the last follow
	headNext int64                   // the next head block to fetch; 0 = none since the head scan last had nothing to look for
	headDown bool                    // the last head scan failed (a node without the path, say): drop lookups do not wait for it
	watched  map[[32]byte]*watchedTx // txids sent by this worker, not found yet
	recent   map[int64][][32]byte    // txids of recently scanned blocks, for late registrations
}

// watchedTx is one txid under watch.
type watchedTx struct {
	from    int64        // the first block that can hold it
	due     int64        // the solid head past which, not found, it is asked about by txid
	covered bool         // every block from `from` up to next-1 was scanned for it
	found   *tron.TxInfo // its receipt, once a scanned block held it
	// included: a head block at or after from held it — a hint that it
	// left the pool for a block (not proof: the block may be forked away).
	included bool
}

// watchSlack is how many solid blocks past the one a watched txid is
// expected in (the first that could hold it, for a send of this worker)
// the scan covers before the worker asks the node about it by txid (was
// it dropped from the pool?).
const watchSlack = 5

// recentBlocks bounds the scanned blocks remembered for registrations
// that arrive behind the scan, and how far back a takeover sends the scan
// (or a fresh scan starts behind the solid head).
const recentBlocks = 256

// maxHeadScanPerFollow bounds the head blocks one follow fetches.
const maxHeadScanPerFollow = 16

func newChainWatch() *chainWatch {
	return &chainWatch{watched: map[[32]byte]*watchedTx{}, recent: map[int64][][32]byte{}}
}

// watch starts watching txid, sent by this worker, from block from on:
// it is expected in block from, the first after the head read before the
// send.
func (cw *chainWatch) watch(txid [32]byte, from int64) {
	cw.add(txid, from, from+watchSlack)
}

// adopt starts watching txid, taken over from the log rather than sent
// by this worker, from block from on (the block after its envelope's
// reference block); expected is the block it is expected in (the block a
// lookup found it in, or the one after the head).
func (cw *chainWatch) adopt(txid [32]byte, from, expected int64) {
	cw.add(txid, from, max(from, expected)+watchSlack)
}

// watching reports whether txid is watched.
func (cw *chainWatch) watching(txid [32]byte) bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	_, ok := cw.watched[txid]
	return ok
}

func (cw *chainWatch) add(txid [32]byte, from, due int64) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if _, ok := cw.watched[txid]; ok {
		return // a resend: the first send's lower bound stands
	}
	wt := &watchedTx{from: from, due: due, covered: true}
	if cw.next > 0 && from < cw.next {
		for n := from; n < cw.next; n++ {
			ids, ok := cw.recent[n]
			if !ok {
				if cw.next-from <= recentBlocks {
					// Never fetched since the scan (re)started: go back to
					// it. The blocks in between are fetched again, which
					// finds nothing twice (found is set once).
					cw.next = from
				} else {
					wt.covered = false // too far back: the lookups decide
				}
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
	return nil, cw.solid < wt.due
}

// included reports whether a head block since txid's send held it (a
// hint, see chainWatch): it was not dropped from the pool, so there is
// nothing to ask the node by txid until the solid scan finds it.
func (cw *chainWatch) included(txid [32]byte) bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	wt, ok := cw.watched[txid]
	return ok && wt.included
}

// followHead fetches the head blocks that may hold a watched txid neither
// found by the solid scan nor yet seen in a head block, up to the head
// (read with head: the round's), at most maxHeadScanPerFollow of them,
// and marks the txids they hold included. Only a txid that a block made
// since its send may hold by known (the last head read, no call) is
// looked for: one sent after the last block known can be in no block yet,
// and a burst would otherwise pay a head scan on every follow for txids
// sent a moment ago, delaying the confirmations the solid scan brings.
// With no such txid it calls nothing, not even the head.
func (cw *chainWatch) followHead(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc),
	known int64, head func(context.Context) (tron.BlockHeader, error)) error {
	cw.mu.Lock()
	from := int64(0)
	for _, wt := range cw.watched {
		if wt.covered && wt.found == nil && !wt.included && wt.from <= known && (from == 0 || wt.from < from) {
			from = wt.from
		}
	}
	if from == 0 {
		cw.headNext = 0
		cw.mu.Unlock()
		return nil
	}
	cw.mu.Unlock()
	h, err := head(ctx)
	if err != nil {
		cw.down()
		return err
	}
	cw.mu.Lock()
	// Not before the earliest block that can hold a txid looked for, nor
	// before a block already fetched (from either view): the solid scan
	// matched the blocks below its position against every watched txid.
	next := max(from, cw.headNext, cw.next, h.Number-maxHeadScanPerFollow+1)
	cw.mu.Unlock()
	for n := next; n <= h.Number; n++ {
		nctx, cancel := callCtx(ctx)
		infos, err := node.TxInfosByBlockNum(nctx, n)
		cancel()
		if err != nil {
			cw.down()
			return fmt.Errorf("receipts of head block %d: %w", n, err)
		}
		cw.mu.Lock()
		cw.headDown = false
		for i := range infos {
			if wt, ok := cw.watched[infos[i].TxID]; ok && n >= wt.from {
				wt.included = true
			}
		}
		cw.headNext = n + 1
		cw.mu.Unlock()
	}
	return nil
}

// down notes that the head scan failed: until it fetches a block again,
// the drop lookups it would spare do not wait for it.
func (cw *chainWatch) down() {
	cw.mu.Lock()
	cw.headDown = true
	cw.mu.Unlock()
}

// headPending reports whether the head scan, working, has yet to fetch
// block n for txid: a drop lookup due at n waits for it rather than ask
// what the scan is about to answer for every txid at once (on a chain
// whose blocks come about as fast as a node round trip, the lookups would
// otherwise overtake the scan). False when the scan is down or does not
// look for txid (found, seen, not watched), so the lookups are never held
// back by a scan that cannot answer.
func (cw *chainWatch) headPending(txid [32]byte, n int64) bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	wt, ok := cw.watched[txid]
	if !ok || cw.headDown || !wt.covered || wt.found != nil || wt.included {
		return false
	}
	return cw.headNext <= n
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
		// A fresh scan starts at the first block any watched txid can be
		// in, but no more than recentBlocks back: a txid that can be in
		// an earlier block is left to the lookups.
		cw.next = head.Number + 1
		for _, wt := range cw.watched {
			cw.next = min(cw.next, wt.from)
		}
		if floor := head.Number + 1 - recentBlocks; cw.next < floor {
			cw.next = floor
			for _, wt := range cw.watched {
				if wt.from < floor {
					wt.covered = false
				}
			}
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
		if cw.next != n {
			// A takeover sent the scan back while this block was being
			// fetched: the next follow resumes from there.
			cw.mu.Unlock()
			return nil
		}
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
// The head and the reference block are read each only when a withdrawal
// of the round needs it (a round that only sends or waits reads no
// reference block), the two at once when both are.
//
// Step (and Drive) start a round with expire: the first withdrawal that
// needs the view reads it, and the others wait for that read. Run starts
// one with next instead: when the last round used the view, it is read
// again in the background at once and the last round's view serves until
// the new one is in — so a round's builds and first sends do not wait a
// node round trip, and the view is never more than a round behind the
// round that uses it. A failed background read leaves the view unusable:
// the next withdrawal that needs it reads it itself.
type chainView struct {
	mu                sync.Mutex
	head, ref         tron.BlockHeader
	headOK, refOK     bool // usable in this round
	headUsed, refUsed bool // asked for since the last read
	reading           bool // a background read is under way
}

// expire makes the next reads ask the node again, waiting for it.
func (v *chainView) expire() {
	v.mu.Lock()
	v.headOK, v.refOK = false, false
	v.mu.Unlock()
}

// next starts a round of Run: what the last round used is read again in
// the background, and serves meanwhile as it was; what it did not use is
// read when next needed.
func (v *chainView) next(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reading {
		return // the read under way is this round's
	}
	head, ref := v.headOK && v.headUsed, v.refOK && v.refUsed
	v.headOK, v.refOK = head, ref
	v.headUsed, v.refUsed = false, false
	if !head {
		return
	}
	v.reading = true
	go func() {
		h, r, err := readView(ctx, node, callCtx, ref)
		v.mu.Lock()
		defer v.mu.Unlock()
		v.reading = false
		if err != nil {
			v.headOK, v.refOK = false, false
			return
		}
		// A read made meanwhile (after an expire, or for a reference
		// block this round had not read) may be newer than this one,
		// which a slower or lagging backend answered: the view never
		// moves back.
		if h.Number >= v.head.Number {
			v.head, v.headOK = h, true
		}
		if ref && r.Number >= v.ref.Number {
			v.ref, v.refOK = r, true
		}
	}()
}

// readView reads the head and, with ref, the reference block, at once.
func readView(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc), withRef bool) (head, ref tron.BlockHeader, err error) {
	refErr := make(chan error, 1)
	if withRef {
		go func() {
			nctx, cancel := callCtx(ctx)
			defer cancel()
			var err error
			if ref, err = node.RefBlock(nctx); err != nil {
				err = fmt.Errorf("reference block: %w", err)
			}
			refErr <- err
		}()
	}
	nctx, cancel := callCtx(ctx)
	head, err = node.Head(nctx)
	cancel()
	if err != nil {
		err = fmt.Errorf("head: %w", err)
	}
	if withRef {
		if rerr := <-refErr; err == nil {
			err = rerr
		}
	}
	return head, ref, err
}

// tapos returns the round's head and reference block.
func (v *chainView) tapos(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (head, ref tron.BlockHeader, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.headUsed, v.refUsed = true, true
	if v.headOK && v.refOK {
		return v.head, v.ref, nil
	}
	if v.refOK {
		head, err = v.headLocked(ctx, node, callCtx)
		return head, v.ref, err
	}
	h, r, err := readView(ctx, node, callCtx, true)
	if err != nil {
		return h, r, err
	}
	v.head, v.ref, v.headOK, v.refOK = h, r, true, true
	return h, r, nil
}

// headNow returns the round's head.
func (v *chainView) headNow(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (tron.BlockHeader, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.headUsed = true
	return v.headLocked(ctx, node, callCtx)
}

// known returns the latest head read, usable or not (zero before any).
func (v *chainView) known() tron.BlockHeader {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.head
}

func (v *chainView) headLocked(ctx context.Context, node tron.Node, callCtx func(context.Context) (context.Context, context.CancelFunc)) (tron.BlockHeader, error) {
	if v.headOK {
		return v.head, nil
	}
	head, _, err := readView(ctx, node, callCtx, false)
	if err != nil {
		return head, err
	}
	v.head, v.headOK = head, true
	return head, nil
}
