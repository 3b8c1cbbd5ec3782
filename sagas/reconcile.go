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
// solidity view decides the outcome (a solid block is final); an explicit
// failing receipt (REVERT, OUT_OF_ENERGY, …) means the transaction is on
// chain, spent, and moved nothing, so it fails with that reason and is
// never rebuilt. A receipt that says nothing (empty, DEFAULT, or a result
// this code does not know) is no proof either way: the worker waits for a
// later lookup rather than release money that may have left. A
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
		reason, failed := receiptFailure(solid.Receipt)
		if !failed {
			wk.log.Error("included without a receipt result that proves success or failure; waiting for a later lookup",
				"withdrawal", f.w.ID, "txid", txid, "block", solid.BlockNumber, "receipt", string(solid.Receipt), "message", solid.Message)
			return stepWait, nil
		}
		return wk.fail(ctx, f, reason, fmt.Sprintf("%s: %s", solid, solid.Message))
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
	if _, ok := wk.rejected[f.w.Envelope.TxID]; ok {
		// This worker's node refused these bytes: sending them again
		// cannot help, and the chain-time proof is coming anyway.
		return stepWait, nil
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
	if rej, ok := wk.rejected[f.w.Envelope.TxID]; ok {
		// The network has the bytes a node refused: the refusal was that
		// node's view, not the transaction's fate. Forget it, so that a
		// later drop from the pool is resent like any other.
		wk.log.Warn("hard-rejected transaction found on the network", "withdrawal", f.w.ID, "txid", f.w.Envelope.TxID,
			"rejected", rej.String(), "status", st.String())
		delete(wk.rejected, f.w.Envelope.TxID)
	}
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
// it, the worker waits. An envelope this worker's node hard-rejected is
// not replaced: with the proof the withdrawal fails with node_rejected,
// the refusal and the evidence in its detail.
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
	proof := fmt.Sprintf("solid block %d at %d ≥ expiration %d + margin %d, lookup %s",
		solid.Number, solid.Timestamp, exp, margin, ev.Lookup)
	if rej, ok := wk.rejected[txid]; ok {
		// Keep the evidence whole: only the node's text is cut to fit.
		suffix := "; proof: " + proof
		return wk.fail(ctx, f, aggregate.ReasonNodeRejected, clipText(rej.String(), maxDetail-len(suffix))+suffix)
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
	wk.forget(txid)
	wk.log.Info("rebuilt after proof of death", "withdrawal", f.w.ID, "retired", txid, "txid", env.TxID,
		"attempt", f.w.Attempt, "solid_block", solid.Number, "solid_time", solid.Timestamp, "expiration", exp)
	if wk.crashAt(CrashAfterRebuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	return stepNext, nil
}

// receiptFailure names the failure of an included transaction whose
// receipt says, explicitly, that the contract call failed (java-tron's
// Transaction.Result.contractResult): the fee is burnt, the txid spent, no
// token moved. ok is false for a receipt that proves nothing — empty or
// DEFAULT (no result recorded, or a partial answer) or a value this code
// does not know — and for SUCCESS.
func receiptFailure(r tron.ReceiptResult) (reason string, ok bool) {
	switch r {
	case tron.ReceiptRevert:
		return aggregate.ReasonReverted, true
	case tron.ReceiptOutOfEnergy:
		return aggregate.ReasonOutOfEnergy, true
	case tron.ReceiptOutOfTime, tron.ReceiptBadJumpDest, tron.ReceiptOutOfMemory,
		tron.ReceiptIllegalOperation, tron.ReceiptStackOverflow, tron.ReceiptTransferFailed,
		tron.ReceiptPrecompiled, tron.ReceiptStackTooSmall, tron.ReceiptStackTooLarge,
		tron.ReceiptJVMStackOverflow, tron.ReceiptInvalidCode,
		// UNKNOWN is not "we do not know": java-tron sets it when the VM
		// ended on an exception it has no name for, and rolls the call back.
		tron.ReceiptUnknown:
		return strings.ToLower(string(r)), true
	}
	return "", false
}
