package sagas

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// stepResult says what a state handler wants next.
type stepResult int

const (
	stepNext stepResult = iota // the state moved: run the next handler
	stepWait                   // nothing to do until the chain moves: keep the lease, come back later
	stepStop                   // the withdrawal left the saga's hands (e.g. back to requested)
)

// ReasonInvalidAddress rejects an approved withdrawal whose destination is
// not a TRON address (intake validates it, so only a foreign writer or an
// old event can get here); nothing was ever built for it.
const ReasonInvalidAddress = "invalid_address"

// handle runs the handler of the withdrawal's state. Each handler starts
// from what the log says and asks the chain by txid where it must, so it
// is also the recovery procedure for a worker that died in that state.
func (wk *Worker) handle(ctx context.Context, f *flight) (stepResult, error) {
	switch f.w.State {
	case aggregate.StateApproved:
		return wk.prepare(ctx, f)
	case aggregate.StateSigning:
		return wk.sign(ctx, f)
	case aggregate.StateSigned:
		return wk.sendFirst(ctx, f)
	case aggregate.StateBroadcasting:
		return wk.reconcile(ctx, f)
	case aggregate.StateBroadcast:
		return wk.confirm(ctx, f)
	}
	return stepStop, nil
}

// prepare is everything before a signature exists: route, re-check the
// approvals against the policy in force now, then either settle on the
// ledger (internal route; the node is never called) or write ahead the
// first envelope.
func (wk *Worker) prepare(ctx context.Context, f *flight) (stepResult, error) {
	if wk.claimsWithEnvelope(f.w) {
		return wk.prepareInOne(ctx, f)
	}
	if f.w.Route.IsZero() {
		route, err := wk.route(f.w)
		if err != nil {
			return stepStop, err
		}
		if err := wk.write(ctx, f, aggregate.ChooseRoute{Route: route, At: wk.now()}, true); err != nil {
			return stepStop, err
		}
		if wk.crashAt(CrashAfterRoute, f.w.ID) {
			return stepStop, ErrCrashed
		}
	}
	policy, err := wk.policy(ctx)
	if err != nil {
		return stepStop, err
	}
	if stop, err := wk.recheck(ctx, f, policy); stop || err != nil {
		return stepStop, err
	}
	if f.w.Route.IsInternal() {
		if wk.crashAt(CrashBeforeSettleInternal, f.w.ID) {
			return stepStop, ErrCrashed
		}
		if err := wk.write(ctx, f, aggregate.SettleInternally{Policy: policy, Revoked: wk.revoked(f.w), At: wk.now()}, true); err != nil {
			return stepStop, err
		}
		wk.log.Info("settled internally", "withdrawal", f.w.ID, "account", f.w.Route.Account())
		return stepNext, nil
	}
	to, err := tron.ParseAddress(f.w.ToAddress)
	if err != nil {
		err := wk.write(ctx, f, aggregate.Reject{Reason: ReasonInvalidAddress, Detail: err.Error(), At: wk.now()}, true)
		return stepStop, err
	}
	env, err := wk.buildEnvelope(ctx, f.w, to, f.pos.Sequence)
	if err != nil {
		return stepWait, err
	}
	// Write-ahead: the txid and the exact bytes are in the log before a
	// signature exists, so every later question to the chain is about a
	// txid we already hold.
	if err := wk.write(ctx, f, aggregate.BuildEnvelope{Envelope: env, Policy: policy, At: wk.now()}, true); err != nil {
		return stepStop, err
	}
	wk.log.Info("envelope built", "withdrawal", f.w.ID, "txid", env.TxID, "expiration", env.Expiration)
	if wk.crashAt(CrashAfterBuild, f.w.ID) {
		return stepStop, ErrCrashed
	}
	return stepNext, nil
}

// prepareInOne is prepare for an external payout not yet claimed by this
// worker nor routed: the approvals are re-checked against the policy in
// force, the envelope is built, and the claim, the route and the
// envelope's write-ahead are one append at the position read — refused,
// like a claim, if another worker's lease is live or the stream moved.
// Nothing is signed or sent before it is in the log.
func (wk *Worker) prepareInOne(ctx context.Context, f *flight) (stepResult, error) {
	route, err := wk.route(f.w)
	if err != nil {
		return stepStop, err
	}
	policy, err := wk.policy(ctx)
	if err != nil {
		return stepStop, err
	}
	if stop, err := wk.recheck(ctx, f, policy); stop || err != nil {
		return stepStop, err
	}
	to, err := tron.ParseAddress(f.w.ToAddress)
	if err != nil {
		return stepStop, err
	}
	env, err := wk.buildEnvelope(ctx, f.w, to, f.pos.Sequence)
	if err != nil {
		return stepWait, err
	}
	claimed := f.w.Claim.Worker != wk.cfg.ID
	now := wk.now()
	if err := wk.write(ctx, f, aggregate.BuildEnvelope{
		Envelope: env, Policy: policy, Worker: wk.cfg.ID, LeaseUntil: now.Add(wk.cfg.Lease), Route: route, At: now,
	}, true); err != nil {
		return stepStop, err
	}
	wk.log.Info("claimed, routed and envelope built", "withdrawal", f.w.ID, "txid", env.TxID, "expiration", env.Expiration)
	for _, p := range []CrashPoint{CrashAfterClaim, CrashAfterRoute, CrashAfterBuild} {
		if p == CrashAfterClaim && !claimed {
			continue
		}
		if wk.crashAt(p, f.w.ID) {
			return stepStop, ErrCrashed
		}
	}
	return stepNext, nil
}

func (wk *Worker) route(w aggregate.Withdrawal) (aggregate.Route, error) {
	if account, ok := wk.cfg.Custody(w.ToAddress); ok {
		return aggregate.InternalRoute(account, "destination custodied by weir")
	}
	return aggregate.ExternalRoute("destination not custodied by weir")
}

// buildEnvelope makes a TRC-20 transfer from the node's view of the chain:
// TAPoS from the solid block (it cannot be reorganised away), creation time
// and expiration from the head block's time (chain time, never ours).
//
// No memo (a memo burns 1 TRX per transfer since TRON proposal #80): two
// withdrawals paying the same amount to the same address from the same
// reference block are kept apart by the creation timestamp instead, offset
// by seq — the stream position the build follows, which no other
// withdrawal or attempt shares (tron.UniqueTimestamp). The bytes, and with
// them the timestamp, are written ahead in the envelope.
func (wk *Worker) buildEnvelope(ctx context.Context, w aggregate.Withdrawal, to tron.Address, seq uint64) (aggregate.Envelope, error) {
	if seq == 0 {
		return aggregate.Envelope{}, fmt.Errorf("build transfer for %s: no log position to keep its txid apart from equal transfers", w.ID)
	}
	head, ref, err := wk.view.tapos(ctx, wk.cfg.Node, wk.nodeCtx)
	if err != nil {
		return aggregate.Envelope{}, err
	}
	built, err := tron.BuildTransfer(tron.TransferParams{
		Owner:      wk.cfg.Signer.Address(),
		Contract:   tron.USDTContract,
		To:         to,
		Amount:     w.Amount.Units(),
		RefBlock:   ref,
		Timestamp:  tron.UniqueTimestamp(head.Timestamp, seq),
		Expiration: head.Timestamp + wk.cfg.ExpirationWindow.Milliseconds(),
		FeeLimit:   wk.cfg.FeeLimit,
	})
	if err != nil {
		return aggregate.Envelope{}, fmt.Errorf("build transfer for %s: %w", w.ID, err)
	}
	raw := built.Raw
	refHash := ref.RefBlockHash()
	return aggregate.Envelope{
		TxID:         tron.HexID(tron.TxID(raw)),
		RawDataHex:   hex.EncodeToString(raw),
		Expiration:   built.Expiration,
		FeeLimit:     built.FeeLimit,
		RefBlockNum:  ref.Number,
		RefBlockHash: hex.EncodeToString(refHash[:]),
	}, nil
}

// storedEnvelope turns the logged envelope back into the bytes to sign and
// send, checking they still hash to the logged txid.
func storedEnvelope(w aggregate.Withdrawal) (tron.Envelope, error) {
	raw, err := hex.DecodeString(w.Envelope.RawDataHex)
	if err != nil {
		return tron.Envelope{}, fmt.Errorf("withdrawal %s: stored raw data: %w", w.ID, err)
	}
	env, err := tron.EnvelopeFromRaw(raw)
	if err != nil {
		return tron.Envelope{}, fmt.Errorf("withdrawal %s: stored raw data: %w", w.ID, err)
	}
	if env.TxIDHex() != w.Envelope.TxID {
		return tron.Envelope{}, fmt.Errorf("withdrawal %s: stored raw data hash to %s, not the logged txid %s", w.ID, env.TxIDHex(), w.Envelope.TxID)
	}
	return env, nil
}

// signedTx is the exact logged bytes with the logged signature.
func signedTx(w aggregate.Withdrawal) (tron.SignedTx, error) {
	env, err := storedEnvelope(w)
	if err != nil {
		return tron.SignedTx{}, err
	}
	sig, err := hex.DecodeString(w.Signature)
	if err != nil || len(sig) != tron.SignatureSize {
		return tron.SignedTx{}, fmt.Errorf("withdrawal %s: stored signature is not %d bytes of hex", w.ID, tron.SignatureSize)
	}
	return tron.SignedTx{Raw: env.Raw, Signature: sig}, nil
}

// recheck re-checks the approvals against policy (the policy in force,
// read from the stream leader) counting only approvers who still hold the
// role. When they fall short the withdrawal goes back to requested with
// the reason recorded — from signing, retiring the unsigned envelope,
// which can never land — and stop is true: more approvals can make it
// ready again.
func (wk *Worker) recheck(ctx context.Context, f *flight, policy aggregate.Policy) (stop bool, err error) {
	from := f.w.State
	if err := wk.write(ctx, f, aggregate.RecheckApprovals{Policy: policy, Revoked: wk.revoked(f.w), At: wk.now()}, true); err != nil {
		return true, err
	}
	if f.w.State == from {
		return false, nil
	}
	if from == aggregate.StateSigning {
		f.forget(f.w.Retired[len(f.w.Retired)-1].TxID)
	}
	wk.log.Info("approvals no longer suffice", "withdrawal", f.w.ID, "from", from, "policy_version", policy.Version,
		"reason", f.w.Reason, "discounted", f.w.Invalidation.Discounted)
	return true, nil
}

// sign signs the written-ahead envelope and sends it. Right before it, the
// approvals are re-checked against the policy in force (read from the
// stream leader) and the approver roles in force: a worker that crashed
// after the build, or a signer that was down, must not let the next worker
// sign under a policy that has since tightened. Signing again after a
// crash is harmless: the txid is fixed, and the signature does not change
// it.
//
// The signature and the intent of the first send are one append (a signed
// event with send 1), in the log before the bytes leave as the two events
// were. An envelope the chain has already passed the expiration of is
// signed alone (never sent: only the proof of death moves it on).
func (wk *Worker) sign(ctx context.Context, f *flight) (stepResult, error) {
	env, err := storedEnvelope(f.w)
	if err != nil {
		return stepStop, err
	}
	policy, err := wk.policy(ctx)
	if err != nil {
		return stepWait, err
	}
	if stop, err := wk.recheck(ctx, f, policy); stop || err != nil {
		return stepStop, err
	}
	if env.Owner != wk.cfg.Signer.Address() {
		// The hot-wallet key rotated under an envelope built for the old
		// owner: it can never be signed now, and never signed it can never
		// land, so it is replaced — recorded as such — by one for the new
		// owner.
		return wk.replaceForSigner(ctx, f, env.Owner)
	}
	head, err := wk.view.headNow(ctx, wk.cfg.Node, wk.nodeCtx)
	if err != nil {
		return stepWait, err
	}
	send := 1
	if head.Timestamp >= f.w.Envelope.Expiration {
		send = 0
	}
	stx, err := tron.SignEnvelope(tron.WithWorker(ctx, wk.cfg.ID), wk.cfg.Signer, env)
	if err != nil {
		return stepWait, fmt.Errorf("sign %s: %w", f.w.Envelope.TxID, err)
	}
	if wk.crashAt(CrashAfterSignBeforeRecord, f.w.ID) {
		return stepStop, ErrCrashed
	}
	if err := wk.write(ctx, f, aggregate.RecordSignature{
		TxID: f.w.Envelope.TxID, Signature: hex.EncodeToString(stx.Signature),
		Policy: policy, Revoked: wk.revoked(f.w), Send: send, At: wk.now(),
	}, true); err != nil {
		return stepStop, err
	}
	if wk.crashAt(CrashAfterSignature, f.w.ID) {
		return stepStop, ErrCrashed
	}
	if send == 0 {
		return stepNext, nil // signed: sendFirst finds it expired
	}
	if wk.crashAt(CrashAfterIntent, f.w.ID) || wk.dead.Load() {
		return stepStop, ErrCrashed
	}
	return wk.transmit(ctx, f, head, stx, send)
}

// replaceForSigner retires the never-signed envelope built for owner and
// writes ahead a new one for the configured signer.
func (wk *Worker) replaceForSigner(ctx context.Context, f *flight, owner tron.Address) (stepResult, error) {
	env, next, err := wk.nextEnvelope(ctx, f)
	if err != nil {
		return next, err
	}
	old := f.w.Envelope.TxID
	if err := wk.write(ctx, f, aggregate.ReplaceUnsigned{
		RetiredTxID: old, Reason: aggregate.ReasonSignerChanged, Envelope: env, At: wk.now(),
	}, true); err != nil {
		return stepStop, err
	}
	f.forget(old)
	wk.log.Warn("envelope built for another signer replaced", "withdrawal", f.w.ID, "retired", old,
		"old_owner", owner.String(), "signer", wk.cfg.Signer.Address().String(), "txid", env.TxID)
	return stepNext, nil
}

// sendFirst sends for the first time an envelope signed without its
// first send's intent (a log written before the two were one event, or an
// envelope signed once already expired) — unless the chain has already
// passed its expiration, in which case sending is pointless and only the
// proof of death can move it on.
func (wk *Worker) sendFirst(ctx context.Context, f *flight) (stepResult, error) {
	head, err := wk.view.headNow(ctx, wk.cfg.Node, wk.nodeCtx)
	if err != nil {
		return stepWait, err
	}
	if head.Timestamp >= f.w.Envelope.Expiration {
		return wk.whenExpired(ctx, f)
	}
	return wk.send(ctx, f, head)
}

// send writes the broadcasting intent and then sends the exact logged
// bytes. The intent comes first so that a worker that dies right after
// sending leaves a log that says "this txid may be out there", and so that
// a stale worker is refused here, before it reaches the node.
func (wk *Worker) send(ctx context.Context, f *flight, head tron.BlockHeader) (stepResult, error) {
	stx, err := signedTx(f.w)
	if err != nil {
		return stepStop, err
	}
	n := f.w.Sends + 1
	if err := wk.write(ctx, f, aggregate.RecordBroadcastIntent{TxID: f.w.Envelope.TxID, Send: n, At: wk.now()}, true); err != nil {
		return stepStop, err
	}
	if wk.crashAt(CrashAfterIntent, f.w.ID) || wk.dead.Load() {
		return stepStop, ErrCrashed
	}
	return wk.transmit(ctx, f, head, stx, n)
}

// transmit sends the exact logged bytes, signed, whose intent (send n) is
// in the log, and classifies the node's answer.
func (wk *Worker) transmit(ctx context.Context, f *flight, head tron.BlockHeader, stx tron.SignedTx, n int) (stepResult, error) {
	txid := f.w.Envelope.TxID
	if id, err := tron.ParseTxID(txid); err == nil {
		// Watched from the block after the head read before this send:
		// no block at or below it can hold bytes sent after.
		wk.chain.watch(id, head.Number+1)
	}
	nctx, cancel := wk.nodeCtx(ctx)
	res, sendErr := wk.cfg.Node.Broadcast(nctx, stx)
	cancel()
	f.mem().sentAt[txid] = head.Number
	if wk.crashAt(CrashAfterSend, f.w.ID) {
		return stepStop, ErrCrashed
	}
	switch tron.ClassifyBroadcast(res, sendErr) {
	case tron.OutcomeAccepted:
		// Kept in hand, not appended: the solid block decides, and a
		// worker that loses this reconciles by txid.
		wk.log.Info("broadcast accepted", "withdrawal", f.w.ID, "txid", txid, "send", n)
		f.mem().accepted[txid] = string(res.Code)
		if wk.crashAt(CrashAfterAccepted, f.w.ID) {
			return stepStop, ErrCrashed
		}
		return stepNext, nil
	case tron.OutcomeRejected:
		// A hard reject is this node's word about these bytes, not proof
		// that they can never land: they stay validly signed until their
		// expiration, another node may judge them differently (bandwidth,
		// TAPoS and contract state are per node and per moment), an earlier
		// send may sit in some pool, and anyone who can read the log holds
		// them. So the withdrawal neither fails nor moves on to a new
		// envelope here: the worker remembers the refusal, stops sending
		// these bytes itself, and waits for the chain to decide — found
		// → the normal path; the chain-time proof of death → node_rejected.
		f.mem().rejected[txid] = res
		wk.log.Warn("broadcast rejected; waiting for the chain-time proof", "withdrawal", f.w.ID, "txid", txid, "send", n,
			"result", res.String(), "expiration", f.w.Envelope.Expiration)
	default:
		wk.log.Info("broadcast ambiguous; reconciling", "withdrawal", f.w.ID, "txid", txid, "send", n, "result", res.String(), "err", sendErr)
	}
	st, err := wk.lookup(ctx, txid)
	if err != nil {
		return stepWait, err
	}
	if st.State != tron.TxUnknown {
		return wk.found(ctx, f, st)
	}
	return stepWait, nil
}

// accepted records that the network has the current envelope.
func (wk *Worker) accepted(ctx context.Context, f *flight, send int, result string) (stepResult, error) {
	if err := wk.write(ctx, f, aggregate.RecordAccepted{TxID: f.w.Envelope.TxID, Send: send, Result: result, At: wk.now()}, true); err != nil {
		return stepStop, err
	}
	if wk.crashAt(CrashAfterAccepted, f.w.ID) {
		return stepStop, ErrCrashed
	}
	return stepNext, nil
}

// failure is why a withdrawal ends without payout, with its proof: the
// failing receipt of an included transaction, or the proof of death of
// the current envelope (the decider refuses a signed envelope's failure
// without one).
type failure struct {
	reason, detail string
	receipt        *aggregate.FailureReceipt
	evidence       *aggregate.Evidence
}

// fail ends the withdrawal without payout.
func (wk *Worker) fail(ctx context.Context, f *flight, fl failure) (stepResult, error) {
	if wk.crashAt(CrashBeforeFail, f.w.ID) {
		return stepStop, ErrCrashed
	}
	reason, detail := fl.reason, clipText(fl.detail, maxDetail)
	if err := wk.write(ctx, f, aggregate.Fail{
		Reason: reason, TxID: f.w.Envelope.TxID, Detail: detail, Receipt: fl.receipt, Evidence: fl.evidence, At: wk.now(),
	}, true); err != nil {
		return stepStop, err
	}
	wk.log.Warn("failed", "withdrawal", f.w.ID, "reason", reason, "detail", detail)
	return stepNext, nil
}

// maxDetail bounds a failure's detail (the domain refuses longer text).
const maxDetail = 512

// clipText makes text from a node fit an event: control characters (which
// the domain refuses, and which a node's message may carry) become spaces,
// and the text is cut to at most max bytes on a character boundary.
func clipText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func (wk *Worker) head(ctx context.Context) (tron.BlockHeader, error) {
	nctx, cancel := wk.nodeCtx(ctx)
	defer cancel()
	h, err := wk.cfg.Node.Head(nctx)
	if err != nil {
		return h, fmt.Errorf("head: %w", err)
	}
	return h, nil
}

func (wk *Worker) lookup(ctx context.Context, txid string) (tron.TxStatus, error) {
	return wk.lookupWith(ctx, txid, wk.cfg.Node.Lookup)
}

func (wk *Worker) solidLookup(ctx context.Context, txid string) (tron.TxStatus, error) {
	return wk.lookupWith(ctx, txid, wk.cfg.Node.SolidLookup)
}

func (wk *Worker) lookupWith(ctx context.Context, txid string, call func(context.Context, [32]byte) (tron.TxStatus, error)) (tron.TxStatus, error) {
	id, err := tron.ParseTxID(txid)
	if err != nil {
		return tron.TxStatus{}, err
	}
	nctx, cancel := wk.nodeCtx(ctx)
	defer cancel()
	st, err := call(nctx, id)
	if err != nil {
		return st, fmt.Errorf("lookup %s: %w", txid, err)
	}
	return st, nil
}
