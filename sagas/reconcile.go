package sagas

import (
	"context"
	"fmt"

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
	if _, ok := f.mem().accepted[f.w.Envelope.TxID]; ok {
		// This worker's send was accepted: watch for the solid block as
		// for a broadcast withdrawal.
		return wk.confirm(ctx, f)
	}
	st, err := wk.lookup(ctx, f.w.Envelope.TxID)
	if err != nil {
		return stepWait, err
	}
	if err := wk.adopt(ctx, f, st); err != nil {
		return stepWait, err
	}
	if st.State != tron.TxUnknown {
		return wk.found(ctx, f, st)
	}
	return wk.resendOrProve(ctx, f)
}

// adopt makes the block scan watch the current txid of a flight this
// worker did not send (taken over after a restart, a crash, a lapsed
// lease), given what a lookup by txid said of it just now: the scan
// position lives in the log (see chainWatch). It is watched from the
// block after its envelope's reference block, which was read before the
// bytes were built, so no earlier block can hold them; and expected in the
// block the lookup found it in or, not in a block yet, the one after the
// head. A txid found in a block is marked seen, so the drop lookups leave
// it to the solid scan. A txid already watched, or an envelope written
// before reference blocks were logged, is left as it is.
func (wk *Worker) adopt(ctx context.Context, f *flight, st tron.TxStatus) error {
	env := f.w.Envelope
	id, err := tron.ParseTxID(env.TxID)
	if err != nil || env.RefBlockNum <= 0 || wk.chain.watching(id) {
		return nil
	}
	expected := st.BlockNumber
	if st.State != tron.TxIncluded {
		head, err := wk.view.headNow(ctx, wk.cfg.Node, wk.nodeCtx)
		if err != nil {
			return err
		}
		expected = head.Number + 1
		f.mem().askedAt[env.TxID] = head.Number // the lookup just made counts as this block's
	} else {
		f.mem().seen[env.TxID] = true
	}
	wk.chain.adopt(id, env.RefBlockNum+1, expected)
	return nil
}

// confirm handles broadcast (and broadcasting after this worker's send
// was accepted): the network had the transaction. Only the
// solidity view decides the outcome (a solid block is final); see settle.
// A transaction the node no longer knows was dropped from the pool: it is
// sent again, as in reconcile.
func (wk *Worker) confirm(ctx context.Context, f *flight) (stepResult, error) {
	txid := f.w.Envelope.TxID
	if id, err := tron.ParseTxID(txid); err == nil {
		if !wk.chain.watching(id) && f.w.Envelope.RefBlockNum > 0 {
			// Taken over from the log (its acceptance recorded by another
			// worker, or before a restart): one lookup, then the scan.
			st, err := wk.lookup(ctx, txid)
			if err != nil {
				return stepWait, err
			}
			if err := wk.adopt(ctx, f, st); err != nil {
				return stepWait, err
			}
			if st.State == tron.TxUnknown {
				return wk.resendOrProve(ctx, f)
			}
		}
		found, wait := wk.chain.status(id)
		if found != nil {
			next, err := wk.settle(ctx, f, statusOf(*found))
			if err == nil && next == stepWait {
				// A receipt that proves nothing: ask by txid from now on.
				wk.chain.uncover(id)
			}
			return next, err
		}
		if wait && (f.mem().seen[txid] || wk.chain.included(id)) {
			// In a block since the send (a lookup said so, or the head
			// block scan saw it): the solid block scan answers for it.
			// Only a hint — a head block can be forked away — so nothing
			// is recorded on it, and once the solid scan has passed the
			// txid by watchSlack blocks without finding it, the lookups
			// below decide.
			return stepWait, nil
		}
		if wait {
			// Until it is in a block: is it still in the pool? (A pool
			// drops transactions; a dropped one is resent.) Asked only
			// once the chain had time to include it and only if no head
			// block since the send held it, so a transaction that lands
			// is found by the scans without a call of its own. Once in a
			// block, the solid scan alone watches for it to become solid.
			due, err := wk.dropCheckDue(ctx, f, txid)
			if err != nil || !due {
				return stepWait, err
			}
			st, err := wk.lookup(ctx, txid)
			if err != nil {
				return stepWait, err
			}
			switch st.State {
			case tron.TxIncluded:
				f.mem().seen[txid] = true
				return stepWait, nil
			case tron.TxUnknown:
				return wk.resendOrProve(ctx, f)
			}
			return stepWait, nil
		}
	}
	solid, err := wk.solidLookup(ctx, txid)
	if err != nil {
		return stepWait, err
	}
	if solid.State == tron.TxIncluded {
		return wk.settle(ctx, f, solid)
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

// dropCheckBlocks is how many head blocks past a worker's send of a
// transaction it waits before asking the node by txid whether the
// transaction is still in the pool (it normally lands in the next block,
// where the block scan finds it). Far below an envelope's life (60 s of
// chain time is 20 blocks), so a dropped transaction is still resent in
// time.
const dropCheckBlocks = 3

// dropCheckDue reports whether to ask the node by txid about an accepted
// transaction neither block scan has seen yet: once dropCheckBlocks heads
// have passed since this worker's last send of it, then at most once per
// head block. The head is the round's (read once per round for every
// withdrawal of the round). A worker that does not remember a send asks at
// once, and then at most once per head block too.
func (wk *Worker) dropCheckDue(ctx context.Context, f *flight, txid string) (bool, error) {
	m := f.mem()
	sent, sentHere := m.sentAt[txid]
	last, asked := m.askedAt[txid]
	if !sentHere && !asked {
		m.askedAt[txid] = wk.view.known().Number
		return true, nil
	}
	due := int64(0)
	if sentHere {
		due = sent + dropCheckBlocks
	}
	if asked {
		due = max(due, last+1)
	}
	head := wk.view.known()
	if head.Number < due {
		var err error
		if head, err = wk.view.headNow(ctx, wk.cfg.Node, wk.nodeCtx); err != nil {
			return false, err
		}
		if head.Number < due {
			return false, nil
		}
	}
	if id, err := tron.ParseTxID(txid); err == nil && wk.chain.headPending(id, due) {
		return false, nil // the head scan answers for it first
	}
	m.askedAt[txid] = head.Number
	return true, nil
}

// statusOf is a receipt read from a solid block as a lookup answer.
func statusOf(in tron.TxInfo) tron.TxStatus {
	return tron.TxStatus{
		State: tron.TxIncluded, BlockNumber: in.BlockNumber, BlockTime: in.BlockTime,
		Receipt: in.Receipt, Message: in.Message, FeeSun: in.FeeSun, EnergyUsed: in.EnergyUsed,
	}
}

// settle records the outcome of the current envelope, included in a solid
// block (st, from the solidity view), with the fee it burnt. A SUCCESS
// receipt confirms. An explicit failing receipt (REVERT, OUT_OF_ENERGY, …)
// means the transaction is on chain, spent, and moved nothing: a worker
// with a send gate (the hot-wallet monitor) rebuilds it once the wallet
// can pay (rebuildAfterReceipt); one without fails it with that reason,
// the receipt and its block as the proof. A receipt that says nothing
// (empty, DEFAULT, or a result this code does not know) is no proof either
// way: the worker waits for a later answer rather than release money that
// may have left.
func (wk *Worker) settle(ctx context.Context, f *flight, st tron.TxStatus) (stepResult, error) {
	txid := f.w.Envelope.TxID
	fee := &aggregate.ChainFee{Sun: st.FeeSun, EnergyUsed: st.EnergyUsed}
	if st.Succeeded() {
		if wk.crashAt(CrashBeforeConfirm, f.w.ID) {
			return stepStop, ErrCrashed
		}
		if err := wk.write(ctx, f, aggregate.Confirm{
			TxID: txid, BlockNumber: st.BlockNumber, BlockTime: st.BlockTime,
			Receipt: aggregate.ReceiptSuccess, Fee: fee, At: wk.now(),
		}, true); err != nil {
			return stepStop, err
		}
		wk.log.Info("confirmed", "withdrawal", f.w.ID, "txid", txid, "block", st.BlockNumber)
		return stepNext, nil
	}
	reason, failed := aggregate.FailureReasonOf(string(st.Receipt))
	if !failed {
		wk.log.Error("included without a receipt result that proves success or failure; waiting for a later lookup",
			"withdrawal", f.w.ID, "txid", txid, "block", st.BlockNumber, "receipt", string(st.Receipt), "message", st.Message)
		return stepWait, nil
	}
	rc := aggregate.FailureReceipt{BlockNumber: st.BlockNumber, BlockTime: st.BlockTime, Result: string(st.Receipt), Fee: fee}
	detail := fmt.Sprintf("%s: %s", st, st.Message)
	if wk.cfg.Gate != nil {
		return wk.rebuildAfterReceipt(ctx, f, reason, rc, detail)
	}
	return wk.fail(ctx, f, failure{reason: reason, detail: detail, receipt: &rc})
}

// rebuildAfterReceipt follows a failing receipt of the current envelope
// in a solid block (issue 14.3). A txid is included at most once and this
// one moved nothing, so the payment has not happened and can never happen
// through these bytes: the withdrawal is rebuilt instead of failed —
//   - within the bounded attempts: with them spent it fails with
//     attempts_exhausted, this receipt its proof (the earlier ones are in
//     the rebuilds);
//   - once the wallet can pay: until the send gate says so the worker
//     waits, lease kept, nothing appended (the monitor shows sending
//     paused), and it goes on by itself once funds arrive;
//   - on the chain's word, read again: the receipt is fetched from its
//     solid block by number (write-ahead, as for the proof of death: what
//     the rebuild records is checked before it is appended). A block that
//     says SUCCESS confirms instead; one that says anything else than the
//     lookup did is waited on.
//
// The rebuilt envelope is signed only after the re-check of the approvals
// against the policy in force, as every envelope is (sign).
func (wk *Worker) rebuildAfterReceipt(ctx context.Context, f *flight, reason string, rc aggregate.FailureReceipt, detail string) (stepResult, error) {
	txid := f.w.Envelope.TxID
	if spent := f.w.SpentAttempts(); spent >= wk.cfg.MaxAttempts {
		return wk.fail(ctx, f, failure{reason: aggregate.ReasonAttemptsExhausted, receipt: &rc,
			detail: fmt.Sprintf("attempt %d of %d failed on chain (%s): %s", spent, wk.cfg.MaxAttempts, reason, detail)})
	}
	if ok, why := wk.cfg.Gate.MaySend(ctx, f.w); !ok {
		wk.log.Debug("failed receipt: the rebuild waits until the wallet can pay", "withdrawal", f.w.ID, "txid", txid,
			"result", rc.Result, "reason", why)
		return stepWait, nil
	}
	id, err := tron.ParseTxID(txid)
	if err != nil {
		return stepStop, err
	}
	nctx, cancel := wk.nodeCtx(ctx)
	in, err := solidReceipt(nctx, wk.cfg.Node, id, rc.BlockNumber)
	cancel()
	if err != nil {
		return stepWait, fmt.Errorf("withdrawal %s: receipt of %s: %w", f.w.ID, txid, err)
	}
	if in.Receipt == tron.ReceiptSuccess {
		wk.log.Warn("the lookup said the transfer failed, its solid block says SUCCESS: confirming", "withdrawal", f.w.ID,
			"txid", txid, "block", rc.BlockNumber, "lookup", rc.Result)
		return wk.settle(ctx, f, statusOf(in))
	}
	if string(in.Receipt) != rc.Result || in.BlockTime != rc.BlockTime {
		wk.log.Warn("the receipt's solid block disagrees with the lookup; waiting", "withdrawal", f.w.ID, "txid", txid,
			"block", rc.BlockNumber, "lookup", rc.Result, "block_says", string(in.Receipt))
		return stepWait, nil
	}
	// What is recorded is what the block says, fee included.
	rc.Fee = &aggregate.ChainFee{Sun: in.FeeSun, EnergyUsed: in.EnergyUsed}
	return wk.rebuild(ctx, f, aggregate.Rebuild{Receipt: &rc}, "rebuilt after a failed receipt",
		"result", rc.Result, "block", rc.BlockNumber, "fee_sun", rc.Fee.Sun, "energy_used", rc.Fee.EnergyUsed)
}

// nextEnvelope builds the envelope that is to replace the current one;
// on an error, the step result says whether to wait (the node) or stop
// (the destination).
func (wk *Worker) nextEnvelope(ctx context.Context, f *flight) (aggregate.Envelope, stepResult, error) {
	to, err := tron.ParseAddress(f.w.ToAddress)
	if err != nil {
		return aggregate.Envelope{}, stepStop, fmt.Errorf("withdrawal %s: destination: %w", f.w.ID, err)
	}
	env, err := wk.buildEnvelope(ctx, f.w, to, f.pos.Sequence)
	if err != nil {
		return aggregate.Envelope{}, stepWait, err
	}
	return env, stepNext, nil
}

// rebuild retires the current envelope with the proof in rb (a proof of
// death or a failing receipt) and writes ahead a new one; msg and args
// describe the proof in the log.
func (wk *Worker) rebuild(ctx context.Context, f *flight, rb aggregate.Rebuild, msg string, args ...any) (stepResult, error) {
	env, next, err := wk.nextEnvelope(ctx, f)
	if err != nil {
		return next, err
	}
	if wk.crashAt(CrashBeforeRebuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	old := f.w.Envelope.TxID
	rb.RetiredTxID, rb.Envelope, rb.At = old, env, wk.now()
	if err := wk.write(ctx, f, rb, true); err != nil {
		return stepStop, err
	}
	f.forget(old)
	wk.log.Info(msg, append([]any{"withdrawal", f.w.ID, "retired", old, "txid", env.TxID, "attempt", f.w.Attempt}, args...)...)
	if wk.crashAt(CrashAfterRebuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	return stepNext, nil
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
	if _, ok := f.mem().rejected[f.w.Envelope.TxID]; ok {
		// This worker's node refused these bytes: sending them again
		// cannot help, and the chain-time proof is coming anyway.
		return stepWait, nil
	}
	if last, ok := f.mem().sentAt[f.w.Envelope.TxID]; ok && head.Number <= last {
		return stepWait, nil
	}
	return wk.send(ctx, f, head)
}

// found records that the network has the current envelope, learnt from a
// lookup rather than from a broadcast answer.
func (wk *Worker) found(ctx context.Context, f *flight, st tron.TxStatus) (stepResult, error) {
	result := "found_" + st.State.String()
	if rej, ok := f.mem().rejected[f.w.Envelope.TxID]; ok {
		// The network has the bytes a node refused: the refusal was that
		// node's view, not the transaction's fate. Forget it, so that a
		// later drop from the pool is resent like any other.
		wk.log.Warn("hard-rejected transaction found on the network", "withdrawal", f.w.ID, "txid", f.w.Envelope.TxID,
			"rejected", rej.String(), "status", st.String())
		delete(f.mem().rejected, f.w.Envelope.TxID)
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
// expiration. The envelope is dead only when every solid block from its
// reference block up to the first solid block at or past expiration +
// margin has been fetched by number and holds no transaction with its
// txid (scanForExpiry, proof.go): chain time from the blocks themselves,
// never the wall clock, and never a lookup, which a lagging backend
// behind a load balancer answers "unknown" for a transaction it has not
// seen yet. With the proof, the envelope is replaced (attempt + 1, the
// proof in the event) or, when attempts are exhausted, the withdrawal
// fails with the proof; without it, the worker waits. A scan that finds
// the txid settles the withdrawal from that block's receipts. An envelope
// this worker's node hard-rejected is not replaced: with the proof the
// withdrawal fails with node_rejected, the refusal in its detail — unless
// the refusal was the hot wallet's (walletShort): then it is rebuilt on
// the proof once the send gate says the wallet can pay, within the
// attempts.
func (wk *Worker) whenExpired(ctx context.Context, f *flight) (stepResult, error) {
	txid, exp := f.w.Envelope.TxID, f.w.Envelope.Expiration
	margin := wk.cfg.ExpiryMargin.Milliseconds()
	rej, rejected := f.mem().rejected[txid]
	if rejected && wk.walletShort(rej) && f.w.SpentAttempts() < wk.cfg.MaxAttempts {
		// Refused because the hot wallet could not pay the bandwidth: the
		// wallet's shortage, not the withdrawal's, as a failed receipt is
		// (rebuildAfterReceipt). It is rebuilt on the proof of death below
		// once the gate says the wallet can pay; until then it waits, lease
		// kept, nothing appended — and nothing scanned, so a long wait
		// neither calls the node nor stretches the proof's range.
		if ok, why := wk.cfg.Gate.MaySend(ctx, f.w); !ok {
			wk.log.Debug("refused for bandwidth: the rebuild waits until the wallet can pay", "withdrawal", f.w.ID, "txid", txid,
				"rejected", rej.String(), "reason", why)
			return stepWait, nil
		}
		rejected = false
	}
	// A cheap gate, not evidence: before any solid head is far enough, a
	// scan could not finish.
	nctx, cancel := wk.nodeCtx(ctx)
	solid, err := wk.cfg.Node.SolidHead(nctx)
	cancel()
	if err != nil {
		return stepWait, fmt.Errorf("solid head: %w", err)
	}
	if solid.Timestamp < exp+margin {
		return stepWait, nil
	}
	out, err := wk.scanForExpiry(ctx, f)
	if err != nil {
		return stepWait, err
	}
	if out.found != nil {
		return wk.foundInBlock(ctx, f, *out.found)
	}
	if out.evidence == nil {
		return stepWait, nil // a block of the range is not solid where we asked
	}
	ev := *out.evidence
	if err := ev.ProvesFor(f.w.Envelope); err != nil {
		return stepStop, fmt.Errorf("withdrawal %s: expiry proof: %w", f.w.ID, err)
	}
	proof := fmt.Sprintf("solid blocks %d..%d (last at %d ≥ expiration %d + margin %d) hold no %s",
		ev.Scan.From, ev.Scan.To, ev.Scan.ToTime, exp, margin, txid)
	if rejected {
		// Keep the proof's summary whole: only the node's text is cut to fit.
		suffix := "; proof: " + proof
		return wk.fail(ctx, f, failure{reason: aggregate.ReasonNodeRejected, detail: clipText(rej.String(), maxDetail-len(suffix)) + suffix, evidence: &ev})
	}
	if spent := f.w.SpentAttempts(); spent >= wk.cfg.MaxAttempts {
		return wk.fail(ctx, f, failure{reason: aggregate.ReasonAttemptsExhausted, evidence: &ev,
			detail: fmt.Sprintf("attempt %d of %d expired unseen: %s", spent, wk.cfg.MaxAttempts, proof)})
	}
	return wk.rebuild(ctx, f, aggregate.Rebuild{Evidence: ev}, "rebuilt after proof of death",
		"blocks", fmt.Sprintf("%d..%d", ev.Scan.From, ev.Scan.To), "solid_time", ev.Scan.ToTime, "expiration", exp)
}

// walletShort reports whether a hard reject is the hot wallet's shortage
// that a send gate can see: BANDWITH_ERROR, the owner unable to pay the
// transaction's bandwidth (no TRX to burn once the free and staked
// bandwidth is used). Two processes sharing the wallet can both let its
// last TRX go; the second transfer is then refused at the node instead of
// failing on chain. Without a gate nothing tells when the wallet can pay,
// and the refusal fails the withdrawal as any other.
func (wk *Worker) walletShort(rej tron.BroadcastResult) bool {
	return wk.cfg.Gate != nil && rej.Code == tron.CodeBandwidthError
}

// foundInBlock handles a scan that found the current txid in solid block
// b: the network had it after all. The acceptance is recorded as for any
// lookup that finds it, and the outcome is settled from that block's
// receipts — asked of the node by block number, so a lagging backend that
// does not serve the block yet only delays it.
func (wk *Worker) foundInBlock(ctx context.Context, f *flight, b tron.Block) (stepResult, error) {
	txid := f.w.Envelope.TxID
	wk.log.Warn("expired envelope found in a solid block", "withdrawal", f.w.ID, "txid", txid, "block", b.Header.Number)
	delete(f.mem().scans, txid)
	st := tron.TxStatus{State: tron.TxIncluded, BlockNumber: b.Header.Number, BlockTime: b.Header.Timestamp}
	if f.w.State != aggregate.StateBroadcast {
		if next, err := wk.found(ctx, f, st); err != nil || next != stepNext {
			return next, err
		}
	}
	id, err := tron.ParseTxID(txid)
	if err != nil {
		return stepStop, err
	}
	nctx, cancel := wk.nodeCtx(ctx)
	infos, err := wk.cfg.Node.SolidTxInfosByBlockNum(nctx, b.Header.Number)
	cancel()
	if err != nil {
		return stepWait, fmt.Errorf("receipts of block %d: %w", b.Header.Number, err)
	}
	for _, in := range infos {
		if in.TxID == id {
			return wk.settle(ctx, f, statusOf(in))
		}
	}
	return stepWait, nil // this backend did not serve the block's receipts yet
}
