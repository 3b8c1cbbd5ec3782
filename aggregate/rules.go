package aggregate

import (
	"strings"
	"time"
)

// Rules every withdrawal event must satisfy (checkEvent, shared by Decide
// and Audit), free-text limits, approval validity, readiness to move money.

const maxTextLen = 1024

// checkText allows free text (details, node results) that is short and has
// no control characters; empty is allowed.
func checkText(field, s string) error {
	if len(s) > maxTextLen {
		return newError(CodeInvalidCommand, field, "longer than %d characters", maxTextLen)
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return newError(CodeInvalidCommand, field, "control characters are not allowed")
		}
	}
	return nil
}

// checkEvent is every rule an event must satisfy against the state it is
// applied to: the transition table plus the data invariants. Decide runs it
// on each event it emits and Audit on each stored event, so a log that
// passes Audit could have been written by Decide.
func checkEvent(w Withdrawal, e Event) error {
	if e == nil {
		return newError(CodeUnknownEvent, "", "nil event")
	}
	if _, err := NextStateOf(w.State, e); err != nil {
		return err
	}
	if e.OccurredAt().IsZero() {
		return newError(CodeInvalidEvent, "at", "missing")
	}
	switch ev := e.(type) {
	case Requested:
		if id, err := ParseOperationID(ev.ID); err != nil || id != ev.ID {
			return newError(CodeInvalidOperationID, "id", "not a canonical operation id")
		}
		if err := ValidateAccountID(ev.Account); err != nil {
			return err
		}
		if err := checkAddress(ev.ToAddress); err != nil {
			return err
		}
		as, err := LookupAsset(ev.Asset)
		if err != nil {
			return err
		}
		if _, err := as.admit("amount", ev.Amount); err != nil {
			return err
		}
		if err := checkToken(CodeInvalidCommand, "requested_by", ev.RequestedBy); err != nil {
			return err
		}
		if ev.RequiredApprovals < 1 {
			return newError(CodeInvalidEvent, "required_approvals", "at least 1")
		}
		if ev.WindowSum != nil && ev.WindowSum.Sign() < 0 {
			return newError(CodeInvalidEvent, "window_sum", "negative")
		}
		if err := checkApplied(ev.AppliedRules, ev.RequiredApprovals); err != nil {
			return err
		}
	case ApprovalRecorded:
		if err := checkApproval(w, ev.Approval, ev.RequiredApprovals); err != nil {
			return err
		}
		if err := checkApplied(ev.AppliedRules, ev.RequiredApprovals); err != nil {
			return err
		}
		if len(w.Approvals)+1 >= ev.RequiredApprovals {
			return newError(CodeInvalidEvent, "required_approvals", "this approval is sufficient: it is an %s", EventApproved)
		}
	case Approved:
		if err := checkApproval(w, ev.Approval, ev.RequiredApprovals); err != nil {
			return err
		}
		if err := checkApplied(ev.AppliedRules, ev.RequiredApprovals); err != nil {
			return err
		}
		if len(w.Approvals)+1 < ev.RequiredApprovals {
			return newError(CodeApprovalsInsufficient, "", "%d approvals given, %d required", len(w.Approvals)+1, ev.RequiredApprovals)
		}
	case ApprovalsInvalidated:
		if ev.Reason == "" {
			return newError(CodeInvalidEvent, "reason", "required")
		}
		if err := checkApplied(ev.AppliedRules, ev.RequiredApprovals); err != nil {
			return err
		}
		kept, discounted := countApprovals(w, ev.Discounted)
		if len(discounted) != len(ev.Discounted) {
			return newError(CodeInvalidEvent, "discounted", "names a principal who did not approve")
		}
		if kept >= ev.RequiredApprovals && ev.RefusedBy == "" {
			return newError(CodeInvalidEvent, "required_approvals", "the approvals that count (%d) still suffice", kept)
		}
		if (ev.RefusedBy != "") != (ev.Reason == ReasonDestinationNotAllowed) {
			return newError(CodeInvalidEvent, "refused_by", "a refused destination and reason %s go together", ReasonDestinationNotAllowed)
		}
		if (w.State == StateSigning) != (ev.RetiredTxID != "") || (ev.RetiredTxID != "" && ev.RetiredTxID != w.Envelope.TxID) {
			return newError(CodeInvalidEvent, "retired_txid", "from signing the current, unsigned envelope is retired; from approved none")
		}
	case Rejected:
		if err := checkToken(CodeInvalidEvent, "reason", ev.Reason); err != nil {
			return err
		}
		if ev.Reason == ReasonCancelled && ev.By == "" {
			return newError(CodeInvalidEvent, "by", "a cancellation records who cancelled")
		}
		if ev.Reason == ReasonDeclined {
			if ev.By == "" || strings.TrimSpace(ev.Detail) == "" {
				return newError(CodeInvalidEvent, "by", "a decline records who declined and why")
			}
			if w.State != StateRequested {
				return newError(CodeInvalidTransition, "", "only a withdrawal awaiting approval can be declined")
			}
		}
	case FundsReserved:
		if w.Reserved {
			return newError(CodeInvalidTransition, "", "already reserved")
		}
		if ev.Account != w.Account || !ev.Amount.Equal(w.Amount) {
			return newError(CodeInvalidEvent, "amount", "the reservation must be of the withdrawal's amount on its account")
		}
	case Claimed:
		if err := checkClaim(w, ev); err != nil {
			return err
		}
	case Routed:
		if err := checkRoute(w, ev.Route); err != nil {
			return err
		}
	case SettledInternally:
		if !w.Route.IsInternal() {
			return newError(CodeInvalidRoute, "route", "only an internal route settles on the ledger")
		}
		if ev.Account != w.Route.Account() || !ev.Amount.Equal(w.Amount) {
			return newError(CodeInvalidEvent, "account", "must settle the withdrawal's amount to the routed account")
		}
		if err := readyToMove(w); err != nil {
			return err
		}
	case EnvelopeBuilt:
		if c, ok := ev.claim(); ok {
			if err := checkClaim(w, c); err != nil {
				return err
			}
		} else if !ev.LeaseUntil.IsZero() {
			return newError(CodeInvalidEvent, "lease_until", "a lease without a worker")
		}
		if ev.Route != nil {
			if err := checkRoute(w, *ev.Route); err != nil {
				return err
			}
			w.Route = *ev.Route
		}
		if ev.Attempt != w.Attempt+1 || !w.Envelope.IsZero() {
			return newError(CodeInvalidTransition, "attempt", "an envelope is built when none is current (attempt %d after %d); later ones are rebuilds", ev.Attempt, w.Attempt)
		}
		if err := ev.Envelope.Check(); err != nil {
			return err
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			return newError(CodeInvalidEnvelope, "envelope.txid", "txid %s was already used", ev.Envelope.TxID)
		}
		if !w.Route.IsExternal() {
			return newError(CodeInvalidRoute, "route", "an envelope needs an external route (route is %q)", w.Route.Rail())
		}
		if err := readyToMove(w); err != nil {
			return err
		}
	case Signed:
		if ev.TxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if err := checkSignature(ev.Signature); err != nil {
			return err
		}
		if in, ok := ev.intent(w.Attempt); ok {
			// The intent of the first send, carried by the signature: the
			// rules of an intent, on the state the signature leaves.
			w.Signature = ev.Signature
			if err := checkIntent(w, in); err != nil {
				return err
			}
		}
	case Broadcasting:
		if err := checkIntent(w, ev); err != nil {
			return err
		}
	case BroadcastAccepted:
		if ev.TxID != w.Envelope.TxID || ev.Attempt != w.Attempt {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if ev.Send != w.Sends || ev.Result == "" {
			return newError(CodeInvalidTransition, "send", "must answer the latest intent (%d) with a result", w.Sends)
		}
	case Rebuilt:
		if ev.RetiredTxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "retired_txid", "only the current envelope can be retired")
		}
		if ev.Attempt != w.Attempt+1 {
			return newError(CodeInvalidTransition, "attempt", "attempt %d after attempt %d", ev.Attempt, w.Attempt)
		}
		provenAt, err := checkRebuildProof(w, ev)
		if err != nil {
			return err
		}
		if err := ev.Envelope.Check(); err != nil {
			return err
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			return newError(CodeInvalidEnvelope, "envelope.txid", "txid %s was already used", ev.Envelope.TxID)
		}
		if ev.Envelope.Expiration <= provenAt {
			return newError(CodeInvalidEnvelope, "envelope.expiration", "the new envelope is already expired at the proof's chain time")
		}
	case EnvelopeReplaced:
		if ev.RetiredTxID != w.Envelope.TxID || w.Signature != "" {
			return newError(CodeInvalidTransition, "retired_txid", "only the current envelope, never signed, can be replaced without proof")
		}
		if ev.Attempt != w.Attempt+1 {
			return newError(CodeInvalidTransition, "attempt", "attempt %d after attempt %d", ev.Attempt, w.Attempt)
		}
		if err := checkToken(CodeInvalidEvent, "reason", ev.Reason); err != nil {
			return err
		}
		if err := ev.Envelope.Check(); err != nil {
			return err
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			return newError(CodeInvalidEnvelope, "envelope.txid", "txid %s was already used", ev.Envelope.TxID)
		}
	case Confirmed:
		if ev.TxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if ev.Receipt != ReceiptSuccess || ev.BlockNumber <= 0 {
			return newError(CodeInvalidEvent, "receipt", "a confirmation is a SUCCESS receipt in a block")
		}
		if ev.Fee != nil && (ev.Fee.Sun < 0 || ev.Fee.EnergyUsed < 0) {
			return newError(CodeInvalidEvent, "fee", "negative")
		}
	case Failed:
		if err := checkToken(CodeInvalidEvent, "reason", ev.Reason); err != nil {
			return err
		}
		if ev.TxID != "" && ev.TxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if err := checkFailureProof(w, ev); err != nil {
			return err
		}
	default:
		return newError(CodeUnknownEvent, "", "unknown event value %T (events are passed as values)", e)
	}
	return nil
}

// checkIntent is the rule of a send's intent, on its own or carried by
// the signature (the first send's).
func checkIntent(w Withdrawal, ev Broadcasting) error {
	if ev.TxID != w.Envelope.TxID || ev.Attempt != w.Attempt {
		return newError(CodeInvalidTransition, "txid", "not the current envelope")
	}
	if w.Signature == "" {
		return newError(CodeInvalidTransition, "", "not signed")
	}
	if ev.Send != w.Sends+1 {
		return newError(CodeInvalidTransition, "send", "send %d after send %d", ev.Send, w.Sends)
	}
	return nil
}

// checkClaim is the rule of a claim, on its own or carried by an envelope.
func checkClaim(w Withdrawal, c Claimed) error {
	if err := checkToken(CodeInvalidEvent, "worker", c.Worker); err != nil {
		return err
	}
	if !c.LeaseUntil.After(c.At) {
		return newError(CodeInvalidEvent, "lease_until", "must be after at")
	}
	if w.Claim.Worker != c.Worker && w.Claim.HeldAt(c.At) {
		return newError(CodeClaimHeld, "", "claimed by %s until %s", w.Claim.Worker, w.Claim.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// checkRoute is the rule of a routing decision, on its own or carried by
// an envelope.
func checkRoute(w Withdrawal, r Route) error {
	if r.IsZero() {
		return newError(CodeInvalidRoute, "route", "required")
	}
	if !w.Route.IsZero() {
		return newError(CodeInvalidTransition, "route", "already routed")
	}
	return nil
}

// checkApplied: the destination and velocity rules counted in required
// name a kind and a rule, add at least one approver each, and leave room
// for the amount rule's approver.
func checkApplied(applied []AppliedRule, required int) error {
	extra := 0
	for _, r := range applied {
		if r.Kind != RuleKindDestination && r.Kind != RuleKindVelocity {
			return newError(CodeInvalidEvent, "applied_rules", "unknown rule kind %q", r.Kind)
		}
		if r.Name == "" || r.ExtraApprovers < 1 {
			return newError(CodeInvalidEvent, "applied_rules", "a rule applied names itself and adds at least one approver")
		}
		// A velocity tier records the window sum it judged, or none when
		// the request's sum was never measured (judged as exceeding every
		// tier); a destination rule judges no sum.
		if r.WindowSum != nil && (r.Kind != RuleKindVelocity || r.WindowSum.Sign() < 0) {
			return newError(CodeInvalidEvent, "applied_rules", "only a velocity tier records a window sum, never a negative one")
		}
		extra += r.ExtraApprovers
	}
	if extra >= required {
		return newError(CodeInvalidEvent, "required_approvals", "%d required cannot hold the %d extra approvers of the rules applied and the amount rule's", required, extra)
	}
	return nil
}

func checkApproval(w Withdrawal, a Approval, required int) error {
	if err := checkToken(CodeInvalidEvent, "approval.by", a.By); err != nil {
		return err
	}
	if a.By == w.RequestedBy {
		return newError(CodeSelfApproval, "", "%s requested this withdrawal and cannot approve it", a.By)
	}
	if w.HasApproval(a.By) {
		return newError(CodeInvalidTransition, "approval.by", "%s has already approved", a.By)
	}
	if a.At.IsZero() {
		return newError(CodeInvalidEvent, "approval.at", "missing")
	}
	if required < 1 {
		return newError(CodeInvalidEvent, "required_approvals", "at least 1")
	}
	if required < w.AtRequest.Approvers {
		return newError(CodeInvalidEvent, "required_approvals", "%d is below the %d required when the withdrawal was requested (policy v%d): a loosened policy never applies to a queued withdrawal",
			required, w.AtRequest.Approvers, w.AtRequest.PolicyVersion)
	}
	return nil
}

// readyToMove is what must hold before money moves by any route: the amount
// is reserved and the recorded approvals reach the recorded requirement (the
// policy re-check itself happens in Decide, which is handed the policy).
func readyToMove(w Withdrawal) error {
	if !w.Reserved {
		return newError(CodeFundsNotReserved, "", "the amount is not reserved on account %s", w.Account)
	}
	if len(w.Approvals) < w.RequiredApprovals {
		return newError(CodeApprovalsInsufficient, "", "%d approvals given, %d required", len(w.Approvals), w.RequiredApprovals)
	}
	return nil
}
