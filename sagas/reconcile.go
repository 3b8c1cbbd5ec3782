package sagas

import (
	"context"
	"fmt"
	"strings"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// reconcile handles broadcasting: an intent is logged and the outcome of
// its send is unknown (the answer was ambiguous, or the sender died). The
// node's word at send time proved nothing, so ask the chain by txid:
// included or pending → the network has it; unknown → send the same bytes
// again while they can still be accepted, and once they cannot, wait for
// the chain-time proof of death.
func (wk *Worker) reconcile(ctx context.Context, f *flight) (stepResult, error) {
	st, err := wk.lookup(ctx, f.w.Envelope.TxID)
	if err != nil {
		return stepWait, err
	}
	if st.State != tron.TxUnknown {
		return wk.found(ctx, f, st)
	}
	return wk.resendOrProve(ctx, f)
}

// confirm handles broadcast: the network had the transaction. Only the
// solidity view decides the outcome (a solid block is final); a receipt
// other than SUCCESS means the transaction is on chain, spent, and moved
// nothing, so it fails with that reason and is never rebuilt. A
// transaction the node no longer knows was dropped from the pool: it is
// sent again, as in reconcile.
func (wk *Worker) confirm(ctx context.Context, f *flight) (stepResult, error) {
	txid := f.w.Envelope.TxID
	solid, err := wk.solidLookup(ctx, txid)
	if err != nil {
		return stepWait, err
	}
	if solid.State == tron.TxIncluded {
		if solid.Succeeded() {
			if wk.crashAt(CrashBeforeConfirm, f.w.ID) {
				return stepStop, ErrCrashed
			}
			if err := wk.write(ctx, f, aggregate.Confirm{
				TxID: txid, BlockNumber: solid.BlockNumber, BlockTime: solid.BlockTime,
				Receipt: aggregate.ReceiptSuccess, At: wk.now(),
			}, true); err != nil {
				return stepStop, err
			}
			wk.log.Info("confirmed", "withdrawal", f.w.ID, "txid", txid, "block", solid.BlockNumber)
			return stepNext, nil
		}
		return wk.fail(ctx, f, receiptReason(solid.Receipt), fmt.Sprintf("%s: %s", solid, solid.Message))
	}
	st, err := wk.lookup(ctx, txid)
	if err != nil {
		return stepWait, err
	}
	if st.State != tron.TxUnknown {
		return stepWait, nil // pending, or in a block that is not solid yet
	}
	return wk.resendOrProve(ctx, f)
}

// resendOrProve is the answer to "the node does not know the current
// txid": send the same bytes again (at most once per head block, so a
// worker polling faster than blocks do not flood the log with intents)
// while the head is before the expiration; after that, only the proof of
// death can move the withdrawal on.
func (wk *Worker) resendOrProve(ctx context.Context, f *flight) (stepResult, error) {
	head, err := wk.head(ctx)
	if err != nil {
		return stepWait, err
	}
	if head.Timestamp >= f.w.Envelope.Expiration {
		return wk.whenExpired(ctx, f)
	}
	if last, ok := wk.sentAt[f.w.Envelope.TxID]; ok && head.Number <= last {
		return stepWait, nil
	}
	return wk.send(ctx, f, head)
}

// found records that the network has the current envelope, learnt from a
// lookup rather than from a broadcast answer.
func (wk *Worker) found(ctx context.Context, f *flight, st tron.TxStatus) (stepResult, error) {
	result := "found_" + st.State.String()
	switch f.w.State {
	case aggregate.StateBroadcast:
		return stepWait, nil // already recorded; confirmation decides
	case aggregate.StateSigned:
		// No intent was ever logged for this txid, yet the network has it:
		// only possible if something outside this saga sent the bytes.
		// Record the send it must have been, then the acceptance.
		wk.log.Warn("signed envelope found on the network without an intent", "withdrawal", f.w.ID, "txid", f.w.Envelope.TxID, "status", st.String())
		if err := wk.write(ctx, f, aggregate.RecordBroadcastIntent{TxID: f.w.Envelope.TxID, Send: f.w.Sends + 1, At: wk.now()}, true); err != nil {
			return stepStop, err
		}
	}
	wk.log.Info("reconciled: network has it", "withdrawal", f.w.ID, "txid", f.w.Envelope.TxID, "status", st.String())
	return wk.accepted(ctx, f, f.w.Sends, result)
}

// whenExpired runs once the head is past the current envelope's
// expiration. The envelope is dead only if the latest solid block's time —
// from the node, never the wall clock — is at or past expiration + margin
// AND the node does not know the txid. The solid head is read first: every
// block that could include the transaction is then final, so a lookup
// after it that finds nothing cannot be overtaken by a late inclusion.
// With the proof, the envelope is replaced (attempt + 1, evidence in the
// event) or, when attempts are exhausted, the withdrawal fails; without
// it, the worker waits.
func (wk *Worker) whenExpired(ctx context.Context, f *flight) (stepResult, error) {
	txid, exp := f.w.Envelope.TxID, f.w.Envelope.Expiration
	margin := wk.cfg.ExpiryMargin.Milliseconds()
	nctx, cancel := wk.nodeCtx(ctx)
	solid, err := wk.cfg.Node.SolidHead(nctx)
	cancel()
	if err != nil {
		return stepWait, fmt.Errorf("solid head: %w", err)
	}
	if solid.Timestamp < exp+margin {
		return stepWait, nil
	}
	st, err := wk.lookup(ctx, txid)
	if err != nil {
		return stepWait, err
	}
	if st.State != tron.TxUnknown {
		return wk.found(ctx, f, st)
	}
	ev := aggregate.Evidence{
		SolidBlockNumber: solid.Number, SolidBlockTime: solid.Timestamp,
		Expiration: exp, Margin: margin, Lookup: aggregate.LookupNotFound,
	}
	if err := ev.Proves(exp); err != nil {
		return stepStop, fmt.Errorf("withdrawal %s: expiry proof: %w", f.w.ID, err)
	}
	if f.w.Attempt >= wk.cfg.MaxAttempts {
		return wk.fail(ctx, f, aggregate.ReasonAttemptsExhausted, fmt.Sprintf(
			"attempt %d of %d expired unseen: solid block %d at %d >= expiration %d + margin %d, lookup %s",
			f.w.Attempt, wk.cfg.MaxAttempts, solid.Number, solid.Timestamp, exp, margin, ev.Lookup))
	}
	to, err := tron.ParseAddress(f.w.ToAddress)
	if err != nil {
		return stepStop, fmt.Errorf("withdrawal %s: destination: %w", f.w.ID, err)
	}
	env, err := wk.buildEnvelope(ctx, f.w, to, f.w.Attempt+1)
	if err != nil {
		return stepWait, err
	}
	if wk.crashAt(CrashBeforeRebuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	if err := wk.write(ctx, f, aggregate.Rebuild{RetiredTxID: txid, Evidence: ev, Envelope: env, At: wk.now()}, true); err != nil {
		return stepStop, err
	}
	delete(wk.sentAt, txid)
	wk.log.Info("rebuilt after proof of death", "withdrawal", f.w.ID, "retired", txid, "txid", env.TxID,
		"attempt", f.w.Attempt, "solid_block", solid.Number, "solid_time", solid.Timestamp, "expiration", exp)
	if wk.crashAt(CrashAfterRebuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	return stepNext, nil
}

// receiptReason names the failure of an included transaction.
func receiptReason(r tron.ReceiptResult) string {
	switch r {
	case tron.ReceiptRevert:
		return aggregate.ReasonReverted
	case tron.ReceiptOutOfEnergy:
		return aggregate.ReasonOutOfEnergy
	case "":
		return "contract_failed"
	}
	return strings.ToLower(string(r))
}
