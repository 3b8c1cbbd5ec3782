package aggregate

import (
	"strings"
)

// Deciders for the on-chain steps: building the envelope, signing,
// broadcasting, acceptance, rebuilding after expiry, confirmation, failure.

func decideBuildEnvelope(w Withdrawal, c BuildEnvelope) (Event, error) {
	env := c.Envelope.normalized()
	if err := env.Check(); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	switch {
	case w.isRetired(env.TxID):
		return nil, newError(CodeInvalidTransition, "envelope.txid", "txid %s was retired", env.TxID)
	case env == w.Envelope:
		return nil, nil
	case !w.Envelope.IsZero():
		return nil, newError(CodeInvalidTransition, "envelope", "an envelope is already recorded (attempt %d, txid %s)", w.Attempt, w.Envelope.TxID)
	}
	if err := CheckTransition(w.State, EventEnvelopeBuilt); err != nil {
		return nil, err
	}
	if err := EnsureApproved(w, c.Policy); err != nil {
		return nil, err
	}
	// After an unsigned envelope was retired (back to requested, approved
	// again) the next one is the next attempt.
	ev := EnvelopeBuilt{Attempt: w.Attempt + 1, Envelope: env, PolicyVersion: c.Policy.Version, At: at}
	if c.Worker != "" || !c.LeaseUntil.IsZero() {
		if err := checkToken(CodeInvalidCommand, "worker", c.Worker); err != nil {
			return nil, err
		}
		if !c.LeaseUntil.After(at) {
			return nil, newError(CodeInvalidCommand, "lease_until", "must be after at")
		}
		ev.Worker, ev.LeaseUntil = c.Worker, c.LeaseUntil.UTC()
	}
	switch {
	case c.Route.IsZero():
	case !c.Route.IsExternal():
		return nil, newError(CodeInvalidRoute, "route", "an envelope needs an external route (asked %q)", c.Route.Rail())
	case w.Route.IsZero():
		r := c.Route
		ev.Route = &r
	case !w.Route.Equal(c.Route):
		return nil, newError(CodeInvalidTransition, "route", "already routed %s (%s)", w.Route.Rail(), w.Route.Reason())
	}
	return ev, nil
}

// currentTxID refuses any txid but the current envelope's; a retired one is
// called out because a worker holding it is stale and must stop.
func currentTxID(w Withdrawal, txid string) error {
	switch {
	case txid == "":
		return newError(CodeInvalidCommand, "txid", "required")
	case w.isRetired(txid):
		return newError(CodeInvalidTransition, "txid", "txid %s was retired by a rebuild", txid)
	case txid != w.Envelope.TxID:
		return newError(CodeInvalidTransition, "txid", "txid %s is not the current envelope's", txid)
	}
	return nil
}

func decideSignature(w Withdrawal, c RecordSignature) (Event, error) {
	txid, sig := strings.ToLower(c.TxID), strings.ToLower(c.Signature)
	if err := checkSignature(sig); err != nil {
		return nil, err
	}
	if c.Send != 0 && c.Send != 1 {
		return nil, newError(CodeInvalidCommand, "send", "a signature carries the intent of the first send only (1), not send %d", c.Send)
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := currentTxID(w, txid); err != nil {
		return nil, err
	}
	if w.Signature != "" {
		switch {
		case w.Signature != sig:
			return nil, newError(CodeInvalidTransition, "signature", "txid %s already has a different signature", txid)
		case c.Send == 0 || w.Sends >= c.Send:
			return nil, nil
		}
		// Signed without an intent (recorded alone): what is left of the
		// command is the first send's intent.
		return decideIntent(w, RecordBroadcastIntent{TxID: txid, Send: c.Send, At: at})
	}
	if c.Send != 0 {
		// The first send's intent rides on the signature: the signature's
		// edge and the intent's must both be legal from here.
		if _, err := NextStateOf(w.State, Signed{Send: c.Send}); err != nil {
			return nil, err
		}
		if c.Send != w.Sends+1 {
			return nil, newError(CodeInvalidTransition, "send", "send %d after send %d", c.Send, w.Sends)
		}
	}
	// The re-check right before signing: a signature is what makes the
	// envelope able to land, so the approvals must satisfy the policy in
	// force now, counting only approvers who still hold the role.
	if err := checkPrincipals("revoked", c.Revoked); err != nil {
		return nil, err
	}
	if err := EnsureApprovedBy(w, c.Policy, c.Revoked); err != nil {
		return nil, err
	}
	return Signed{TxID: txid, Signature: sig, PolicyVersion: c.Policy.Version, Send: c.Send, At: at}, nil
}

func decideReplaceUnsigned(w Withdrawal, c ReplaceUnsigned) (Event, error) {
	env := c.Envelope.normalized()
	retired := strings.ToLower(c.RetiredTxID)
	if err := checkToken(CodeInvalidCommand, "reason", c.Reason); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	replay, err := checkRetire(w, EventEnvelopeReplaced, retired, env, func(r Retired) bool {
		return r.Unsigned && r.ReplacedBy == env.TxID && r.Reason == c.Reason
	})
	if replay || err != nil {
		return nil, err
	}
	return EnvelopeReplaced{Attempt: w.Attempt + 1, RetiredTxID: retired, Reason: c.Reason, Envelope: env, At: at}, nil
}

// checkRetire is what replacing the current envelope, retired, by env
// needs whatever the proof (EnvelopeReplaced, Rebuilt): env is well
// formed, the transition is legal and retired is the current envelope.
// A retired txid already recorded is a replay when same says it is this
// replacement, and refused otherwise.
func checkRetire(w Withdrawal, eventType, retired string, env Envelope, same func(Retired) bool) (replay bool, err error) {
	if err := env.Check(); err != nil {
		return false, err
	}
	for _, r := range w.Retired {
		if r.TxID != retired {
			continue
		}
		if same(r) {
			return true, nil
		}
		return false, newError(CodeInvalidTransition, "retired_txid", "txid %s was already retired, replaced by %s", retired, r.ReplacedBy)
	}
	if err := CheckTransition(w.State, eventType); err != nil {
		return false, err
	}
	if retired != w.Envelope.TxID {
		return false, newError(CodeInvalidTransition, "retired_txid", "only the current envelope (%s) can be retired", w.Envelope.TxID)
	}
	return false, nil
}

func checkSignature(sig string) error {
	if len(sig) != 130 || !isHex(sig) {
		return newError(CodeInvalidCommand, "signature", "must be 65 bytes (r‖s‖v) in hex")
	}
	switch sig[128:] {
	case "00", "01", "1b", "1c":
		return nil
	}
	return newError(CodeInvalidCommand, "signature", "recovery byte v must be 0, 1, 27 or 28")
}

func decideIntent(w Withdrawal, c RecordBroadcastIntent) (Event, error) {
	txid := strings.ToLower(c.TxID)
	if c.Send < 1 {
		return nil, newError(CodeInvalidCommand, "send", "sends are numbered from 1")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := currentTxID(w, txid); err != nil {
		return nil, err
	}
	if err := CheckTransition(w.State, EventBroadcasting); err != nil {
		return nil, err
	}
	if c.Send <= w.Sends {
		return nil, nil
	}
	if c.Send != w.Sends+1 {
		return nil, newError(CodeInvalidTransition, "send", "send %d after send %d", c.Send, w.Sends)
	}
	return Broadcasting{TxID: txid, Attempt: w.Attempt, Send: c.Send, At: at}, nil
}

func decideAccepted(w Withdrawal, c RecordAccepted) (Event, error) {
	txid := strings.ToLower(c.TxID)
	if c.Send < 1 {
		return nil, newError(CodeInvalidCommand, "send", "sends are numbered from 1")
	}
	if err := checkText("result", c.Result); err != nil {
		return nil, err
	}
	if c.Result == "" {
		return nil, newError(CodeInvalidCommand, "result", "required")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := currentTxID(w, txid); err != nil {
		return nil, err
	}
	if w.Acceptance.Send == c.Send {
		if w.Acceptance.Result == c.Result {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "result", "send %d was already accepted with %q", c.Send, w.Acceptance.Result)
	}
	if c.Send != w.Sends {
		return nil, newError(CodeInvalidTransition, "send", "send %d is not the latest intent (%d)", c.Send, w.Sends)
	}
	return BroadcastAccepted{TxID: txid, Attempt: w.Attempt, Send: c.Send, Result: c.Result, At: at}, nil
}

func decideRebuild(w Withdrawal, c Rebuild) (Event, error) {
	env := c.Envelope.normalized()
	retired := strings.ToLower(c.RetiredTxID)
	if retired == "" {
		return nil, newError(CodeInvalidCommand, "retired_txid", "required")
	}
	if c.Receipt != nil && !c.Evidence.IsZero() {
		return nil, newError(CodeInvalidEvidence, "evidence", "a rebuild is proven by a failing receipt or by a proof of death, not both")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	replay, err := checkRetire(w, EventRebuilt, retired, env, func(r Retired) bool {
		return r.ReplacedBy == env.TxID && r.Evidence == c.Evidence && sameReceipt(r.Receipt, c.Receipt) &&
			(env.TxID != w.Envelope.TxID || env == w.Envelope)
	})
	if replay || err != nil {
		return nil, err
	}
	return Rebuilt{Attempt: w.Attempt + 1, RetiredTxID: retired, Evidence: c.Evidence, Receipt: c.Receipt.clone(), Envelope: env, At: at}, nil
}

func decideConfirm(w Withdrawal, c Confirm) (Event, error) {
	txid := strings.ToLower(c.TxID)
	if c.Receipt != ReceiptSuccess {
		return nil, newError(CodeInvalidCommand, "receipt", "only a %s receipt confirms; %q is a Fail", ReceiptSuccess, c.Receipt)
	}
	if c.BlockNumber <= 0 {
		return nil, newError(CodeInvalidCommand, "block_number", "required")
	}
	if c.BlockTime <= 0 {
		return nil, newError(CodeInvalidCommand, "block_time", "required")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := currentTxID(w, txid); err != nil {
		return nil, err
	}
	if w.State == StateConfirmed {
		cf := w.Confirmation
		// The fee is read from the same receipt; it does not make a replay.
		if cf.TxID == txid && cf.BlockNumber == c.BlockNumber && cf.BlockTime == c.BlockTime && cf.Receipt == c.Receipt {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "", "already confirmed in block %d", cf.BlockNumber)
	}
	if c.Fee != nil && (c.Fee.Sun < 0 || c.Fee.EnergyUsed < 0) {
		return nil, newError(CodeInvalidCommand, "fee", "negative")
	}
	return Confirmed{TxID: txid, BlockNumber: c.BlockNumber, BlockTime: c.BlockTime, Receipt: c.Receipt, Fee: c.Fee.clone(), At: at}, nil
}

func decideFail(w Withdrawal, c Fail) (Event, error) {
	txid := strings.ToLower(c.TxID)
	if err := checkToken(CodeInvalidCommand, "reason", c.Reason); err != nil {
		return nil, err
	}
	if err := checkText("detail", c.Detail); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if txid != "" {
		if err := currentTxID(w, txid); err != nil {
			return nil, err
		}
	}
	if w.State == StateFailed {
		if w.Reason == c.Reason {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "reason", "already failed (%s)", w.Reason)
	}
	ev := Failed{Reason: c.Reason, TxID: w.Envelope.TxID, Detail: c.Detail, Receipt: c.Receipt.clone(), At: at}
	if c.Evidence != nil {
		e := *c.Evidence
		ev.Evidence = &e
	}
	return ev, nil
}
