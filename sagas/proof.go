package sagas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// The proof of death of an envelope, shown on the blocks themselves
// (issue 16, item 1). A hosted TRON endpoint is a load balancer over
// backends that lag each other: "not found" from one backend and a solid
// head from another prove nothing together. So absence is shown by
// fetching, by number, every solid block from the envelope's reference
// block up to the first solid block whose time is at or past expiration +
// margin, and finding the txid in none of them. A backend that lacks one
// of these blocks answers tron.ErrBlockNotSolid and the scan waits: it
// cannot vouch for a block it does not have. Consecutive blocks must link
// (each one's parent id is the id of the block before), so blocks from
// backends on different views cannot be stitched into one proof, and the
// first block must carry the reference hash the signed bytes name.

// ErrProofRefuted means a recorded proof of death does not hold on the
// chain a node serves: a block differs from the recorded range, or the txid
// is in one of them.
var ErrProofRefuted = errors.New("sagas: expiry proof refuted by the chain")

// maxScanPerStep bounds the blocks one handler call fetches, so a worker
// driving many withdrawals is not held by one long scan; the scan resumes
// where it stopped on the next visit.
const maxScanPerStep = 256

// expiryScan is a proof in progress for one txid, kept in a worker's
// memory between visits (blocks are solid, so what was scanned stays
// true). A worker that lost it starts again from the reference block.
type expiryScan struct {
	txid     [32]byte
	from     int64
	next     int64 // the next block to fetch
	first    tron.BlockHeader
	last     tron.BlockHeader
	digest   []byte // the ids of from..next-1, concatenated
	deadline int64  // expiration + margin, chain ms
}

// scanOutcome is where a scan got to.
type scanOutcome struct {
	evidence *aggregate.Evidence // the proof, once the scan reached the deadline
	found    *tron.Block         // the solid block that includes the txid
}

// newExpiryScan starts the scan of env with margin (ms).
func newExpiryScan(env aggregate.Envelope, margin int64) (*expiryScan, error) {
	txid, err := tron.ParseTxID(env.TxID)
	if err != nil {
		return nil, err
	}
	if env.RefBlockNum <= 0 || env.RefBlockHash == "" {
		return nil, fmt.Errorf("envelope %s records no reference block to scan from", env.TxID)
	}
	return &expiryScan{txid: txid, from: env.RefBlockNum, next: env.RefBlockNum, deadline: env.Expiration + margin}, nil
}

// scanForExpiry continues (or starts) the scan of w's current envelope.
// Neither field of the outcome set means "not yet": a block past the
// scanned range is not solid on the backend that answered.
func (wk *Worker) scanForExpiry(ctx context.Context, f *flight) (scanOutcome, error) {
	w, scans := f.w, f.mem().scans
	env, margin := w.Envelope, wk.cfg.ExpiryMargin.Milliseconds()
	sc := scans[env.TxID]
	if sc == nil || sc.from != env.RefBlockNum || sc.deadline != env.Expiration+margin {
		var err error
		if sc, err = newExpiryScan(env, margin); err != nil {
			return scanOutcome{}, fmt.Errorf("withdrawal %s: %w", w.ID, err)
		}
		scans[env.TxID] = sc
	}
	out, err := sc.advance(ctx, wk.cfg.Node, env, margin, maxScanPerStep, wk.nodeCtx)
	if err != nil && !errors.Is(err, tron.ErrBlockNotSolid) {
		delete(scans, env.TxID) // two backends disagree (or one lies): start over
	}
	if errors.Is(err, tron.ErrBlockNotSolid) {
		return scanOutcome{}, nil
	}
	return out, err
}

// advance fetches up to budget blocks. It stops at the block that holds
// the txid (found), at the first block at or past the deadline (evidence),
// or with an error: one wrapping tron.ErrBlockNotSolid when the next block
// is not solid on the backend that answered (the scan can resume), any
// other when a node call failed or the blocks do not link.
func (sc *expiryScan) advance(ctx context.Context, node tron.Node, env aggregate.Envelope, margin int64, budget int,
	callCtx func(context.Context) (context.Context, context.CancelFunc)) (scanOutcome, error) {
	for range budget {
		nctx, cancel := callCtx(ctx)
		b, err := node.SolidBlockByNum(nctx, sc.next)
		cancel()
		if err != nil {
			return scanOutcome{}, fmt.Errorf("scan for %s: block %d: %w", env.TxID, sc.next, err)
		}
		if err := sc.link(b, env.RefBlockHash); err != nil {
			return scanOutcome{}, fmt.Errorf("scan for %s: %w", env.TxID, err)
		}
		if slices.Contains(b.TxIDs, sc.txid) {
			return scanOutcome{found: &b}, nil
		}
		sc.digest = append(sc.digest, b.Header.ID[:]...)
		sc.last = b.Header
		sc.next++
		if b.Header.Timestamp >= sc.deadline {
			ev := sc.evidence(env, margin)
			return scanOutcome{evidence: &ev}, nil
		}
	}
	return scanOutcome{}, nil
}

// ProveExpired scans, in one go, for the proof of death of env with margin
// (ms): the evidence a worker records, for tools and tests that need one
// (the demo, audit fixtures). It fails with an error wrapping
// tron.ErrBlockNotSolid while the range is not solid on node, and with
// ErrProofRefuted when the txid is in one of the blocks.
func ProveExpired(ctx context.Context, node tron.Node, env aggregate.Envelope, margin int64) (aggregate.Evidence, error) {
	sc, err := newExpiryScan(env, margin)
	if err != nil {
		return aggregate.Evidence{}, err
	}
	noTimeout := func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }
	out, err := sc.advance(ctx, node, env, margin, aggregate.MaxScanBlocks, noTimeout)
	switch {
	case err != nil:
		return aggregate.Evidence{}, err
	case out.found != nil:
		return aggregate.Evidence{}, fmt.Errorf("%w: txid %s is in solid block %d", ErrProofRefuted, env.TxID, out.found.Header.Number)
	case out.evidence == nil:
		return aggregate.Evidence{}, fmt.Errorf("scan for %s: no block at or past %d within %d blocks", env.TxID, sc.deadline, aggregate.MaxScanBlocks)
	}
	return *out.evidence, nil
}

// link checks that b is the block the scan expects next.
func (sc *expiryScan) link(b tron.Block, refHash string) error {
	if b.Header.Number != sc.next {
		return fmt.Errorf("asked for block %d, got block %d", sc.next, b.Header.Number)
	}
	if sc.next == sc.from {
		if !strings.EqualFold(hex.EncodeToString(b.Header.ID[8:16]), refHash) {
			return fmt.Errorf("reference block %d has id %s, which is not the envelope's reference hash %s", b.Header.Number, b.Header.IDHex(), refHash)
		}
		sc.first = b.Header
		return nil
	}
	if b.ParentID != sc.last.ID {
		return fmt.Errorf("block %d's parent %s is not block %d (%s)", b.Header.Number, tron.HexID(b.ParentID), sc.last.Number, sc.last.IDHex())
	}
	if b.Header.Timestamp <= sc.last.Timestamp {
		return fmt.Errorf("block %d's time %d does not follow block %d's %d", b.Header.Number, b.Header.Timestamp, sc.last.Number, sc.last.Timestamp)
	}
	return nil
}

func (sc *expiryScan) evidence(env aggregate.Envelope, margin int64) aggregate.Evidence {
	sum := sha256.Sum256(sc.digest)
	return aggregate.Evidence{
		SolidBlockNumber: sc.last.Number, SolidBlockTime: sc.last.Timestamp,
		Expiration: env.Expiration, Margin: margin, Lookup: aggregate.LookupNotFound,
		Scan: aggregate.BlockScan{
			From: sc.first.Number, FromID: sc.first.IDHex(), FromTime: sc.first.Timestamp,
			To: sc.last.Number, ToID: sc.last.IDHex(), ToTime: sc.last.Timestamp,
			IDsSHA256: hex.EncodeToString(sum[:]),
		},
	}
}

// VerifyExpiryProof checks a recorded proof of death against the chain a
// node serves: the evidence must prove env dead on its own terms
// (aggregate.Evidence.ProvesFor), and every block of its range, fetched
// again by number, must be solid, link to the one before, hash (ids in
// order) to the recorded digest with the recorded first and last ids and
// times, and hold no transaction with env's txid. The audit calls it for
// every Rebuilt and every Failed proven by a proof of death.
//
// An error wrapping ErrProofRefuted means the chain contradicts the
// proof; any other error (a node that lacks a block, a timeout) means it
// could not be checked now.
func VerifyExpiryProof(ctx context.Context, node tron.Node, env aggregate.Envelope, ev aggregate.Evidence) error {
	if err := ev.ProvesFor(env); err != nil {
		return fmt.Errorf("%w: %w", ErrProofRefuted, err)
	}
	txid, err := tron.ParseTxID(env.TxID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProofRefuted, err)
	}
	s := ev.Scan
	h := sha256.New()
	var prev tron.BlockHeader
	for n := s.From; n <= s.To; n++ {
		b, err := node.SolidBlockByNum(ctx, n)
		if err != nil {
			return fmt.Errorf("verify proof for %s: block %d: %w", env.TxID, n, err)
		}
		switch {
		case b.Header.Number != n:
			return fmt.Errorf("%w: asked for block %d, got %d", ErrProofRefuted, n, b.Header.Number)
		case n > s.From && b.ParentID != prev.ID:
			return fmt.Errorf("%w: block %d does not link to block %d", ErrProofRefuted, n, n-1)
		case slices.Contains(b.TxIDs, txid):
			return fmt.Errorf("%w: txid %s is in solid block %d", ErrProofRefuted, env.TxID, n)
		case n == s.From && (b.Header.IDHex() != s.FromID || b.Header.Timestamp != s.FromTime):
			return fmt.Errorf("%w: block %d is %s at %d, the proof says %s at %d", ErrProofRefuted, n, b.Header.IDHex(), b.Header.Timestamp, s.FromID, s.FromTime)
		case n == s.To && (b.Header.IDHex() != s.ToID || b.Header.Timestamp != s.ToTime):
			return fmt.Errorf("%w: block %d is %s at %d, the proof says %s at %d", ErrProofRefuted, n, b.Header.IDHex(), b.Header.Timestamp, s.ToID, s.ToTime)
		}
		h.Write(b.Header.ID[:])
		prev = b.Header
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != s.IDsSHA256 {
		return fmt.Errorf("%w: blocks %d..%d hash to %s, the proof says %s", ErrProofRefuted, s.From, s.To, got, s.IDsSHA256)
	}
	return nil
}

// VerifyReceipt checks a recorded failing receipt of env (a Failed's, or
// a Rebuilt's proof) against the chain a node serves: solid block
// rc.BlockNumber's receipts, fetched by number, hold env's txid with rc's
// result at rc's block time, and with rc's fee and energy when it records
// them. A worker checks it before it appends a rebuild after a failed
// receipt, and the audit checks it again. An error wrapping
// ErrProofRefuted means the chain contradicts it (above all, the txid is
// there with SUCCESS: the transfer paid); any other, that it could not be
// checked now.
func VerifyReceipt(ctx context.Context, node tron.Node, env aggregate.Envelope, rc aggregate.FailureReceipt) error {
	if _, ok := aggregate.FailureReasonOf(rc.Result); !ok {
		return fmt.Errorf("%w: receipt %q proves no failure", ErrProofRefuted, rc.Result)
	}
	txid, err := tron.ParseTxID(env.TxID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProofRefuted, err)
	}
	in, err := solidReceipt(ctx, node, txid, rc.BlockNumber)
	if err != nil {
		return fmt.Errorf("verify receipt of %s: %w", env.TxID, err)
	}
	switch {
	case string(in.Receipt) != rc.Result || in.BlockTime != rc.BlockTime:
		return fmt.Errorf("%w: block %d has %s with %s at %d, the event says %s at %d", ErrProofRefuted,
			rc.BlockNumber, env.TxID, in.Receipt, in.BlockTime, rc.Result, rc.BlockTime)
	case rc.Fee != nil && (in.FeeSun != rc.Fee.Sun || in.EnergyUsed != rc.Fee.EnergyUsed):
		return fmt.Errorf("%w: block %d has %s burning %d sun for %d energy, the event says %d sun for %d", ErrProofRefuted,
			rc.BlockNumber, env.TxID, in.FeeSun, in.EnergyUsed, rc.Fee.Sun, rc.Fee.EnergyUsed)
	}
	return nil
}

// solidReceipt reads txid's receipt from solid block num's receipts (one
// call for the block, by number). A block served without the txid is a
// refutation (ErrProofRefuted); receipts not served for a block that holds
// it (java-tron answers [] for a block it lacks) an error that says so.
func solidReceipt(ctx context.Context, node tron.Node, txid [32]byte, num int64) (tron.TxInfo, error) {
	infos, err := node.SolidTxInfosByBlockNum(ctx, num)
	if err != nil {
		return tron.TxInfo{}, fmt.Errorf("block %d: %w", num, err)
	}
	for _, in := range infos {
		if in.TxID == txid {
			return in, nil
		}
	}
	b, err := node.SolidBlockByNum(ctx, num)
	if err != nil {
		return tron.TxInfo{}, fmt.Errorf("block %d: %w", num, err)
	}
	if !slices.Contains(b.TxIDs, txid) {
		return tron.TxInfo{}, fmt.Errorf("%w: txid %s is not in block %d", ErrProofRefuted, tron.HexID(txid), num)
	}
	return tron.TxInfo{}, fmt.Errorf("block %d's receipts were not served", num)
}

// VerifyFailure checks a Failed event's proof against the chain a node
// serves: a proof of death as VerifyExpiryProof does; a failing receipt by
// fetching that solid block's receipts and finding the txid there with the
// recorded result. env is the envelope current when it failed. A failure
// of an envelope that was never signed carries no proof and needs none
// (signed reports whether a signature was recorded).
func VerifyFailure(ctx context.Context, node tron.Node, env aggregate.Envelope, signed bool, ev aggregate.Failed) error {
	switch {
	case ev.Evidence != nil:
		return VerifyExpiryProof(ctx, node, env, *ev.Evidence)
	case ev.Receipt != nil:
		return VerifyReceipt(ctx, node, env, *ev.Receipt)
	case signed:
		return fmt.Errorf("%w: a signed envelope failed without a proof", ErrProofRefuted)
	}
	return nil
}
