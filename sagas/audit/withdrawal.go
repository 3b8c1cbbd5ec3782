package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/tron"
)

// The judgement of one withdrawal stream, as pure functions of the records
// read (accounts in account.go, the chain in chain.go).
//
// What is checked, per withdrawal stream:
//   - the stream: its id is a canonical operation id (UUID), the requested
//     event names the same id, versions run 1..n without a gap, every
//     payload decodes;
//   - every event against the transition table (aggregate.NextStateOf: a
//     signature carrying the first send's intent is both edges)
//     and, once, the whole stream against every rule the deciders enforce
//     (aggregate.Audit, which stops at the first event that could not have
//     been decided; the table and the checks below carry on after it);
//   - the request: what it records is what the policy version it names
//     says, and it carries a window sum when that policy has a velocity
//     tier for the account (the sum itself is taken on the intake's word);
//   - approvals: never the requester, never the same approver twice, the
//     rule and requirement they record are what the policy version they
//     name says for the amount, and that version existed when they were
//     given;
//   - the policy THEN and NOW (see policyJudgement below);
//   - every envelope (first and rebuilt): txid = sha256(raw_data), raw_data
//     decodes to exactly one TRC-20 transfer of the USDT contract paying
//     to_address exactly amount_units, and the expiration the proof of
//     death relies on is the one in the bytes; every signature recovers to
//     the envelope's owner;
//   - every rebuild: its evidence proves the retired envelope dead
//     (Evidence.Proves against the retired envelope's expiration), or its
//     failing receipt (never SUCCESS) is the retired envelope's, checked
//     on the chain as a failure's receipt is; the new envelope is new and
//     not already expired at the proof's time;
//   - every signature, first or after a rebuild: the approvals satisfy
//     the policy in force right there (the re-check before signing);
//   - every confirmation names the current txid with a SUCCESS receipt.
//
// policyJudgement — "the policy in force then and now". Time is the
// stream's order: one JetStream stream holds the policy stream and every
// withdrawal, so "the policy in force at event E" is the last policy.changed
// with a smaller stream sequence than E — no wall clocks of different
// processes are compared. Approvals are consent; money moves only at the
// authorisation point, the first envelope's write-ahead (envelope_built)
// or an internal settlement (settled_internally), where the decider
// re-checks the approvals against the policy it is handed.
//   - THEN, at each approval: the recorded policy version and rule must be
//     real and consistent (violation otherwise). An approval decided
//     against a version already superseded (a set-policy racing the
//     approve) is a warning: it is consent, and the authorisation point
//     judges it.
//   - THEN, at the authorisation point: the distinct approvals must satisfy
//     both the version the event says it checked and the version actually
//     in force at that position of the log. Money that moved after a
//     tightening its approvals do not meet is a violation, even when it
//     was a race (the worker read the policy just before it changed): the
//     guarantee is "approvals that satisfy the policy in force", and the
//     auditor must see it.
//   - NOW: a withdrawal authorised (in flight or confirmed) whose approvals
//     no longer satisfy the current policy is a warning, not a violation:
//     it was authorised under the policy then in force, before the change,
//     and a later tightening cannot unsign a transaction. If it was
//     authorised after the tightening, THEN already reports the violation.
//     A rebuild re-signs the same payment (a replacement; at most one of
//     its envelopes can land) and is not a new authorisation, but its
//     signature is judged as every signature is: approvals short of the
//     policy in force at the signed event are a violation. An approved, not
//     yet authorised withdrawal below the current policy gets a note: the
//     pre-send re-check will send it back to requested.

// txidRecord is a txid the withdrawal wrote ahead, for the chain checks.
type txidRecord struct {
	TxID    string
	Version uint64 // event that wrote it
	Role    string // "current" or "retired"
}

// auditWithdrawal replays one withdrawal stream (records in version order)
// and checks it. The findings go to the returned replay (wa.found, and
// under their event or in wa.Checks); the auditor is only read, so
// withdrawals can be audited concurrently.
func (a *auditor) auditWithdrawal(id string, recs []eventstore.Record) *Replay {
	wa := &Replay{ID: id, Retired: []string{}}
	report := func(i int, sev Severity, check, format string, args ...any) {
		f := Finding{Severity: sev, Check: check, Withdrawal: id, What: fmt.Sprintf(format, args...)}
		if i >= 0 {
			f.Version, f.Sequence, f.Event = recs[i].AggregateVersion, recs[i].Sequence, recs[i].Type
			wa.Timeline[i].Findings = append(wa.Timeline[i].Findings, f)
		} else {
			wa.Checks = append(wa.Checks, f)
		}
		wa.found = append(wa.found, f)
	}
	if canon, err := aggregate.ParseOperationID(id); err != nil || canon != id {
		report(-1, Violation, "stream", "the stream id %q is not a canonical operation id (UUID): one operation must have exactly one stream", id)
	}

	// Decode each record on its own so that one bad payload does not hide
	// the rest.
	wa.Timeline = make([]Entry, len(recs))
	events := make([]aggregate.Event, len(recs))
	for i, r := range recs {
		wa.Timeline[i] = Entry{Version: r.AggregateVersion, Sequence: r.Sequence, At: r.Time, Type: r.Type}
		if r.AggregateVersion != uint64(i+1) {
			report(i, Violation, "stream", "event %d of the stream carries version %d: the stream has a gap or a duplicate", i+1, r.AggregateVersion)
		}
		e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
		if err != nil {
			report(i, Violation, "decode", "payload does not decode: %v", err)
			continue
		}
		events[i] = e
		if at := e.OccurredAt(); !at.IsZero() {
			wa.Timeline[i].At = at.UTC()
		}
	}

	// The deciders' own rules, on the whole stream at once: the first event
	// that could not have been decided.
	// Claims are judged on the server's record time, as the decider judged
	// them (aggregate.AuditRecorded).
	var decoded []aggregate.Event
	var recorded []time.Time
	var index []int
	for i, e := range events {
		if e != nil {
			decoded = append(decoded, e)
			recorded = append(recorded, recs[i].Time)
			index = append(index, i)
		}
	}
	firstBad := -1
	var firstBadErr error
	if folded, err := aggregate.AuditRecorded(decoded, recorded); err != nil && int(folded.Version) < len(index) {
		firstBad, firstBadErr = index[folded.Version], err
	}

	var w aggregate.Withdrawal
	for i, e := range events {
		if e == nil {
			continue
		}
		before := w
		if _, err := aggregate.NextStateOf(before.State, e); err != nil {
			report(i, Violation, "transition", "%s in state %s: not in the transition table", describeType(e), StateName(before.State))
		}
		wa.Timeline[i].Details = a.checkEvent(before, e, recs[i], func(sev Severity, check, format string, args ...any) {
			report(i, sev, check, format, args...)
		}, wa)
		w = aggregate.EvolveRecorded(w, e, recs[i].Time)
		wa.Timeline[i].State = w.State
		if i == firstBad && !hasViolation(wa.Timeline[i].Findings) {
			var de *aggregate.Error
			msg := firstBadErr.Error()
			if errors.As(firstBadErr, &de) {
				msg = de.Error()
			}
			report(i, Violation, "decider", "could not have been decided: %s", msg)
		}
		if w.State.IsTerminal() && wa.endedAt.IsZero() {
			wa.endedAt = recs[i].Time
		}
	}
	if len(recs) > 0 && events[0] != nil {
		if req, ok := events[0].(aggregate.Requested); ok && req.ID != id {
			report(0, Violation, "stream", "the requested event names operation %s but lives on the stream of %s", req.ID, id)
		}
	}

	w.Version = uint64(len(recs))
	wa.w = w
	wa.State, wa.Version, wa.Account, wa.To = w.State, w.Version, w.Account, w.ToAddress
	wa.Amount, wa.Units, wa.Asset, wa.By = w.Amount.String(), w.Amount.UnitsString(), w.Asset, w.RequestedBy
	wa.Route, wa.TxID, wa.Attempt = w.Route, w.Envelope.TxID, w.Attempt
	wa.Retired = append(wa.Retired, w.RetiredTxIDs()...)
	a.checkPolicyNow(wa, func(sev Severity, check, format string, args ...any) { report(-1, sev, check, format, args...) })
	return wa
}

// describeType names e's type for a finding; a signature that is also the
// first send's intent says so.
func describeType(e aggregate.Event) string {
	if s, ok := e.(aggregate.Signed); ok && s.Send != 0 {
		return fmt.Sprintf("%s (with the intent of send %d)", e.EventType(), s.Send)
	}
	return e.EventType()
}

// reasonRebuiltOnReceipt names, as the reason of the failure its proof is
// checked as, a rebuild proven by a failing receipt.
const reasonRebuiltOnReceipt = "rebuilt_after_failed_receipt"

func fmtReceipt(rc aggregate.FailureReceipt) string {
	s := fmt.Sprintf("%s in block %d at %s", rc.Result, rc.BlockNumber, fmtMs(rc.BlockTime))
	if rc.Fee != nil {
		s += ", " + fmtFee(*rc.Fee)
	}
	return s
}

func fmtFee(f aggregate.ChainFee) string {
	return fmt.Sprintf("fee %s TRX for %d energy", tron.FormatUnits(big.NewInt(f.Sun), tron.TRXDecimals), f.EnergyUsed)
}

// retiredByReceipt reports whether txid was retired by a rebuild proven by
// its failing receipt: it is on chain, and must have failed there.
func (wa *Replay) retiredByReceipt(txid string) bool {
	for _, r := range wa.w.Retired {
		if r.TxID == txid && r.Receipt != nil {
			return true
		}
	}
	return false
}

func hasViolation(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == Violation {
			return true
		}
	}
	return false
}

type reportFunc func(sev Severity, check, format string, args ...any)

// checkEvent checks one event against the state before it and returns its
// key facts for the timeline.
func (a *auditor) checkEvent(w aggregate.Withdrawal, e aggregate.Event, rec eventstore.Record, report reportFunc, wa *Replay) Details {
	var d Details
	add := func(k string, v any) { d = append(d, Detail{k, fmt.Sprint(v)}) }
	switch ev := e.(type) {
	case aggregate.Requested:
		add("account", ev.Account)
		add("to", ev.ToAddress)
		add("amount", ev.Amount.String()+" "+ev.Asset)
		add("requested_by", ev.RequestedBy)
		add("rule", ev.Rule)
		add("required", ev.RequiredApprovals)
		add("policy_version", ev.PolicyVersion)
		addApplied(add, ev.AppliedRules, ev.WindowSum)
		if msg, ok := a.configs.checkActor(rec.Sequence, ev.RequestedBy, "requested", ev.Account, false, aggregate.RoleRequester); !ok {
			report(Violation, "authority", "%s", msg)
		}
		pv, ok := a.policies.version(ev.PolicyVersion)
		switch {
		case !ok:
			report(Violation, "policy_then", "snapshots policy v%d, which was never stored", ev.PolicyVersion)
		case pv.Sequence > rec.Sequence:
			report(Violation, "policy_then", "snapshots policy v%d, which was stored later (stream sequence %d > %d)", ev.PolicyVersion, pv.Sequence, rec.Sequence)
		default:
			req := aggregate.RequirementUnder(aggregate.Evolve(w, ev), pv.Policy)
			switch {
			case req.RefusedBy != "":
				report(Violation, "policy_then", "accepted a request whose destination %s destination rule %q of policy v%d refuses for account %s",
					ev.ToAddress, req.RefusedBy, ev.PolicyVersion, ev.Account)
			case req.Rule != ev.Rule || req.Approvers != ev.RequiredApprovals || !aggregate.SameApplied(req.AppliedRules, ev.AppliedRules):
				report(Violation, "policy_then", "records %s; policy v%d says %s for %s to %s",
					describeRule(ev.Rule, ev.RequiredApprovals, ev.AppliedRules), ev.PolicyVersion, describe(req), ev.Amount, ev.ToAddress)
			}
			// The window sum is the intake's word (not recomputed here:
			// racing requests may each measure without the other), but a
			// policy with a velocity tier for the account needs one: without
			// it the tiers were judged as if nothing had been sent.
			if ev.WindowSum == nil && pv.Policy.MeasuresVelocity(ev.Account) {
				report(Violation, "policy_then", "records no window_sum, though policy v%d has a velocity tier for account %s: its tiers were judged on nothing sent",
					ev.PolicyVersion, ev.Account)
			}
		}
	case aggregate.ApprovalRecorded:
		d = a.checkApproval(w, ev.Approval, ev.RequiredApprovals, ev.AppliedRules, false, rec, report)
	case aggregate.Approved:
		d = a.checkApproval(w, ev.Approval, ev.RequiredApprovals, ev.AppliedRules, true, rec, report)
	case aggregate.ApprovalsInvalidated:
		add("reason", ev.Reason)
		add("policy_version", ev.PolicyVersion)
		add("rule", ev.Rule)
		add("required", ev.RequiredApprovals)
		add("given", ev.Given)
		addApplied(add, ev.AppliedRules, nil)
		if ev.RefusedBy != "" {
			add("refused_by", ev.RefusedBy)
		}
		if pv, ok := a.policies.version(ev.PolicyVersion); !ok || pv.Sequence > rec.Sequence {
			report(Violation, "policy_then", "invalidates under policy v%d, which was not stored before it", ev.PolicyVersion)
		} else if req := aggregate.RequirementUnder(w, pv.Policy); req.RefusedBy != ev.RefusedBy ||
			(req.RefusedBy == "" && (req.Approvers != ev.RequiredApprovals || req.Rule != ev.Rule || !aggregate.SameApplied(req.AppliedRules, ev.AppliedRules))) {
			report(Violation, "policy_then", "records %s; policy v%d says %s", describeRecorded(ev.Rule, ev.RequiredApprovals, ev.AppliedRules, ev.RefusedBy), ev.PolicyVersion, describe(req))
		}
		if n := w.DistinctApprovals(); n >= ev.RequiredApprovals && ev.RefusedBy == "" {
			report(Violation, "policy_then", "sent back to requested although its %d approvals satisfy the %d required", n, ev.RequiredApprovals)
		}
	case aggregate.Rejected:
		add("reason", ev.Reason)
		if ev.By != "" {
			add("by", ev.By)
		}
		if ev.Detail != "" {
			add("detail", ev.Detail)
		}
		a.checkEnding(w, ev, rec, report)
	case aggregate.FundsReserved:
		add("account", ev.Account)
		add("amount", ev.Amount)
		if ev.Account != w.Account || !ev.Amount.Equal(w.Amount) {
			report(Violation, "reservation", "reserves %s on %s; the withdrawal is %s on %s", ev.Amount, ev.Account, w.Amount, w.Account)
		}
	case aggregate.Claimed:
		add("worker", ev.Worker)
		add("lease_until", fmtTime(ev.LeaseUntil))
	case aggregate.Routed:
		add("rail", ev.Route.Rail())
		if ev.Route.Account() != "" {
			add("account", ev.Route.Account())
		}
		add("reason", ev.Route.Reason())
	case aggregate.SettledInternally:
		add("account", ev.Account)
		add("amount", ev.Amount)
		add("policy_version", ev.PolicyVersion)
		a.checkAuthorisation(w, ev.PolicyVersion, rec, report, wa)
		if !w.Route.IsInternal() || ev.Account != w.Route.Account() || !ev.Amount.Equal(w.Amount) {
			report(Violation, "route", "settles %s to %s on the ledger; the withdrawal is %s routed %s %s", ev.Amount, ev.Account, w.Amount, w.Route.Rail(), w.Route.Account())
		}
	case aggregate.EnvelopeBuilt:
		add("attempt", ev.Attempt)
		add("txid", ev.Envelope.TxID)
		add("expiration", fmtMs(ev.Envelope.Expiration))
		add("policy_version", ev.PolicyVersion)
		if ev.Worker != "" { // claimed and routed in the same event
			add("worker", ev.Worker)
			add("lease_until", fmtTime(ev.LeaseUntil))
		}
		if ev.Route != nil {
			add("rail", ev.Route.Rail())
			w.Route = *ev.Route
		}
		a.checkAuthorisation(w, ev.PolicyVersion, rec, report, wa)
		if !w.Route.IsExternal() {
			report(Violation, "route", "an envelope for a withdrawal routed %q", w.Route.Rail())
		}
		if owner, ok := checkEnvelope(w, ev.Envelope, report); ok {
			add("owner", owner)
			a.checkOwner(rec, owner, report)
		}
		wa.txids = append(wa.txids, txidRecord{TxID: ev.Envelope.TxID, Version: rec.AggregateVersion, Role: "current"})
	case aggregate.Signed:
		add("txid", ev.TxID)
		if ev.Send != 0 { // also the intent of the first send
			add("send", ev.Send)
		}
		if ev.TxID != w.Envelope.TxID {
			report(Violation, "envelope", "signs txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
		}
		// The re-check right before signing, every envelope (first or
		// rebuilt): the approvals satisfy the policy in force here. Logs
		// from before that re-check (no policy_version) only warn. The
		// whole requirement: a destination the policy refuses is unmet
		// whatever the count, and its Approvers then count the amount
		// rule alone.
		p := a.policies.inForceAt(rec.Sequence)
		if req, n := aggregate.RequirementFor(w, p.Policy), w.DistinctApprovals(); unmet(req, n) {
			sev := Violation
			if ev.PolicyVersion == 0 {
				sev = Warning
			}
			report(sev, "policy_then", "signed with %d approvals while policy %s said %s: the re-check right before signing refuses that",
				n, p.label(), describe(req))
		}
		if signer, ok := checkSignature(w, ev, report); ok {
			add("signer", signer)
			if msg, ok := a.configs.checkHotWallet(rec.Sequence, signer, "signed by"); !ok {
				report(Violation, "signature", "%s", msg)
			}
		}
	case aggregate.Broadcasting:
		add("txid", ev.TxID)
		add("attempt", ev.Attempt)
		add("send", ev.Send)
		if ev.TxID != w.Envelope.TxID {
			report(Violation, "envelope", "sends txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
		}
	case aggregate.BroadcastAccepted:
		add("txid", ev.TxID)
		add("send", ev.Send)
		add("result", ev.Result)
	case aggregate.Rebuilt:
		ed := ev.Evidence
		add("attempt", ev.Attempt)
		add("retired_txid", ev.RetiredTxID)
		add("txid", ev.Envelope.TxID)
		if ev.RetiredTxID != w.Envelope.TxID {
			report(Violation, "evidence", "retires txid %s; the current envelope is %s", ev.RetiredTxID, w.Envelope.TxID)
		}
		provenAt := ed.SolidBlockTime
		if rc := ev.Receipt; rc != nil {
			// Proven by the retired envelope's failing receipt: checked on
			// the chain as a failure's receipt is (a SUCCESS there is a
			// rebuild after the money moved).
			add("receipt", fmtReceipt(*rc))
			provenAt = rc.BlockTime
			f := aggregate.Failed{Reason: reasonRebuiltOnReceipt, TxID: w.Envelope.TxID, Receipt: rc}
			wa.proofs = append(wa.proofs, proofRecord{Version: rec.AggregateVersion, Env: w.Envelope, Failed: &f, Signed: true})
			if _, ok := aggregate.FailureReasonOf(rc.Result); !ok || !ed.IsZero() {
				report(Violation, "evidence", "rebuilt on receipt %q of txid %s: only a failing receipt, and no second proof, allows a rebuild", rc.Result, w.Envelope.TxID)
			}
		} else {
			add("evidence", fmt.Sprintf("solid blocks %d..%d, last at %s, expiration %s + margin %dms, lookup %s",
				ed.Scan.From, ed.Scan.To, fmtMs(ed.SolidBlockTime), fmtMs(ed.Expiration), ed.Margin, ed.Lookup))
			wa.proofs = append(wa.proofs, proofRecord{Version: rec.AggregateVersion, Env: w.Envelope, Evidence: &ev.Evidence})
			if err := ed.ProvesFor(w.Envelope); err != nil {
				report(Violation, "evidence", "the evidence does not prove txid %s dead: %v", w.Envelope.TxID, err)
			}
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			report(Violation, "envelope", "the new envelope reuses txid %s", ev.Envelope.TxID)
		}
		if ev.Envelope.Expiration <= provenAt {
			report(Violation, "envelope", "the new envelope expires at %s, already past at the proof's chain time %s", fmtMs(ev.Envelope.Expiration), fmtMs(provenAt))
		}
		if owner, ok := checkEnvelope(w, ev.Envelope, report); ok {
			a.checkOwner(rec, owner, report)
		}
		wa.txids = append(wa.txids, txidRecord{TxID: ev.Envelope.TxID, Version: rec.AggregateVersion, Role: "current"})
	case aggregate.Confirmed:
		add("txid", ev.TxID)
		add("block", ev.BlockNumber)
		add("block_time", fmtMs(ev.BlockTime))
		add("receipt", ev.Receipt)
		if ev.TxID != w.Envelope.TxID {
			report(Violation, "envelope", "confirms txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
		}
		if ev.Receipt != aggregate.ReceiptSuccess {
			report(Violation, "receipt", "confirmed with receipt %q: only SUCCESS pays", ev.Receipt)
		}
		if ev.Fee != nil {
			add("fee", fmtFee(*ev.Fee))
		}
	case aggregate.Failed:
		add("reason", ev.Reason)
		if ev.TxID != "" {
			add("txid", ev.TxID)
		}
		if ev.Detail != "" {
			add("detail", ev.Detail)
		}
		if ev.Receipt != nil {
			add("receipt", fmtReceipt(*ev.Receipt))
		}
		if ev.Evidence != nil {
			add("evidence", fmt.Sprintf("solid blocks %d..%d, last at %s", ev.Evidence.Scan.From, ev.Evidence.Scan.To, fmtMs(ev.Evidence.SolidBlockTime)))
		}
		if w.Envelope.TxID != "" {
			f := ev
			wa.proofs = append(wa.proofs, proofRecord{Version: rec.AggregateVersion, Env: w.Envelope, Failed: &f, Signed: w.Signature != ""})
		}
	}
	return d
}

// checkApproval: approvers are distinct and never the requester; the
// recorded rule is what the named policy version says; the version existed
// (THEN). approved also checks the count reaches the requirement.
func (a *auditor) checkApproval(w aggregate.Withdrawal, ap aggregate.Approval, required int, applied []aggregate.AppliedRule, approves bool, rec eventstore.Record, report reportFunc) Details {
	d := Details{{"by", ap.By}, {"rule", ap.Rule}, {"policy_version", fmt.Sprint(ap.PolicyVersion)}, {"required", fmt.Sprint(required)}}
	addApplied(func(k string, v any) { d = append(d, Detail{k, fmt.Sprint(v)}) }, applied, nil)
	if ap.By == w.RequestedBy {
		report(Violation, "approval", "approval by %s, who requested the withdrawal (self-approval)", ap.By)
	}
	if msg, ok := a.configs.checkActor(rec.Sequence, ap.By, "approval", w.Account, false, aggregate.RoleApprover); !ok {
		report(Violation, "authority", "%s", msg)
	}
	if w.HasApproval(ap.By) {
		report(Violation, "approval", "a second approval by %s: approvers must be distinct", ap.By)
	}
	n := w.DistinctApprovals()
	if ap.By != w.RequestedBy && !w.HasApproval(ap.By) {
		n++
	}
	d = append(d, Detail{"approvals", fmt.Sprintf("%d of %d", n, required)})
	if approves && n < required {
		report(Violation, "approval", "approved with %d valid approvals; %d required", n, required)
	}
	pv, ok := a.policies.version(ap.PolicyVersion)
	switch {
	case !ok:
		report(Violation, "policy_then", "approval by %s names policy v%d, which was never stored", ap.By, ap.PolicyVersion)
		return d
	case pv.Sequence > rec.Sequence:
		report(Violation, "policy_then", "approval by %s names policy v%d, stored later (stream sequence %d > %d)", ap.By, ap.PolicyVersion, pv.Sequence, rec.Sequence)
		return d
	}
	switch req := aggregate.RequirementUnder(w, pv.Policy); {
	case req.RefusedBy != "":
		report(Violation, "policy_then", "approval by %s under policy v%d, whose destination rule %q refuses %s for account %s",
			ap.By, ap.PolicyVersion, req.RefusedBy, w.ToAddress, w.Account)
	case req.Rule != ap.Rule || req.Approvers != required || !aggregate.SameApplied(req.AppliedRules, applied):
		report(Violation, "policy_then", "approval by %s records %s; policy v%d says %s for %s to %s",
			ap.By, describeRule(ap.Rule, required, applied), ap.PolicyVersion, describe(req), w.Amount, w.ToAddress)
	}
	if floor := w.AtRequest; floor.Approvers > required {
		report(Violation, "policy_then", "approval by %s counts against %d approvals; policy v%d required %d when the withdrawal was requested (a loosened policy applied to a queued withdrawal)",
			ap.By, required, floor.PolicyVersion, floor.Approvers)
	}
	if inForce := a.policies.inForceAt(rec.Sequence); inForce.Policy.Version != ap.PolicyVersion {
		if req := aggregate.RequirementUnder(w, inForce.Policy); unmet(req, required) {
			report(Warning, "policy_then", "approval by %s was decided under policy v%d, but %s was already in force and says %s, not %d; the authorisation point judges it",
				ap.By, ap.PolicyVersion, inForce.label(), describe(req), required)
		}
	}
	return d
}

// checkEnding judges who ended a withdrawal against the configuration in
// force: a cancel by its requester or an operator, a decline by an
// approver who may act on its account. Refusals weir decides itself
// (insufficient funds, daily limit) name no one.
func (a *auditor) checkEnding(w aggregate.Withdrawal, ev aggregate.Rejected, rec eventstore.Record, report reportFunc) {
	var msg string
	ok := true
	switch ev.Reason {
	case aggregate.ReasonCancelled:
		if ev.By != "" && ev.By == w.RequestedBy {
			msg, ok = a.configs.checkActor(rec.Sequence, ev.By, "cancel", "", false, aggregate.RoleRequester, aggregate.RoleApprover, aggregate.RoleOperator, aggregate.RoleAuditor)
		} else {
			msg, ok = a.configs.checkActor(rec.Sequence, ev.By, "cancel of another's withdrawal", "", false, aggregate.RoleOperator)
		}
	case aggregate.ReasonDeclined:
		msg, ok = a.configs.checkActor(rec.Sequence, ev.By, "decline", w.Account, false, aggregate.RoleApprover)
	}
	if !ok {
		report(Violation, "authority", "%s", msg)
	}
}

// checkOwner: the envelope is paid from a hot wallet in force.
func (a *auditor) checkOwner(rec eventstore.Record, owner string, report reportFunc) {
	if msg, ok := a.configs.checkHotWallet(rec.Sequence, owner, "an envelope owned by"); !ok {
		report(Violation, "envelope", "%s", msg)
	}
}

// checkAuthorisation judges the moment money is committed to move (the
// first envelope's write-ahead, or an internal settlement): reserved, and
// approvals that satisfy both the policy the event says it checked and the
// policy actually in force at this position of the log.
func (a *auditor) checkAuthorisation(w aggregate.Withdrawal, checked int, rec eventstore.Record, report reportFunc, wa *Replay) {
	if wa.authSeq == 0 {
		wa.authSeq = rec.Sequence
	}
	if !w.Reserved {
		report(Violation, "reservation", "money committed to move before the amount was reserved on account %s", w.Account)
	}
	n := w.DistinctApprovals()
	pv, ok := a.policies.version(checked)
	switch {
	case !ok:
		report(Violation, "policy_then", "says it checked policy v%d, which was never stored", checked)
	case pv.Sequence > rec.Sequence:
		report(Violation, "policy_then", "says it checked policy v%d, stored later (stream sequence %d > %d)", checked, pv.Sequence, rec.Sequence)
	default:
		if req := aggregate.RequirementUnder(w, pv.Policy); unmet(req, n) {
			report(Violation, "policy_then", "money committed with %d valid approvals; policy v%d, which this event says it checked, says %s",
				n, checked, describe(req))
		}
	}
	inForce := a.policies.inForceAt(rec.Sequence)
	if req := aggregate.RequirementUnder(w, inForce.Policy); inForce.Policy.Version != checked && unmet(req, n) {
		report(Violation, "policy_then", "money committed with %d valid approvals after policy %s said %s (the event says it checked v%d)",
			n, inForce.label(), describe(req), checked)
	}
	if floor := w.AtRequest; n < floor.Approvers {
		report(Violation, "policy_then", "money committed with %d valid approvals; policy v%d required %d when the withdrawal was requested, and a later policy never lowers that",
			n, floor.PolicyVersion, floor.Approvers)
	}
}

// checkPolicyNow judges the approvals against the current policy.
func (a *auditor) checkPolicyNow(wa *Replay, report reportFunc) {
	w := wa.w
	if !w.Exists() || w.State == aggregate.StateRejected || w.State == aggregate.StateFailed {
		return
	}
	cur := a.policies.current()
	n, req := w.DistinctApprovals(), aggregate.RequirementFor(w, cur.Policy)
	if !unmet(req, n) {
		return
	}
	switch {
	case wa.authSeq > 0:
		then := a.policies.inForceAt(wa.authSeq)
		if unmet(aggregate.RequirementUnder(w, then.Policy), n) || n < w.AtRequest.Approvers {
			return // THEN already reported the violation
		}
		change, _ := a.policies.firstRequiringMore(wa.authSeq, w, n)
		report(Warning, "policy_now", "its %d approvals no longer satisfy the current policy v%d (%s); they satisfied policy v%d in force when the payment was authorised, before %s tightened it",
			n, cur.Policy.Version, describe(req), then.Policy.Version, change.label())
	case w.State == aggregate.StateApproved:
		report(Note, "policy_now", "approved with %d approvals; the current policy v%d says %s: the pre-send re-check will send it back to requested",
			n, cur.Policy.Version, describe(req))
	}
}

// checkEnvelope checks an envelope against the withdrawal: txid =
// sha256(raw_data); raw_data is one TRC-20 transfer of USDT paying
// to_address exactly amount_units; the recorded expiration is the one in
// the bytes (the proof of death relies on it). Returns the owner.
func checkEnvelope(w aggregate.Withdrawal, env aggregate.Envelope, report reportFunc) (string, bool) {
	raw, err := hex.DecodeString(env.RawDataHex)
	if err != nil || len(raw) == 0 {
		report(Violation, "envelope", "raw_data_hex is not hex bytes")
		return "", false
	}
	if sum := tron.HexID(tron.TxID(raw)); !strings.EqualFold(sum, env.TxID) {
		report(Violation, "envelope", "txid %s is not sha256(raw_data) = %s", env.TxID, sum)
	}
	r, err := tron.DecodeRaw(raw)
	if err != nil {
		report(Violation, "envelope", "raw_data does not decode as a TRON transaction: %v", err)
		return "", false
	}
	if r.Expiration != env.Expiration {
		report(Violation, "envelope", "records expiration %d; the bytes say %d", env.Expiration, r.Expiration)
	}
	if r.FeeLimit != env.FeeLimit {
		report(Warning, "envelope", "records fee_limit %d; the bytes say %d", env.FeeLimit, r.FeeLimit)
	}
	tt, err := r.TokenTransfer()
	if err != nil {
		report(Violation, "envelope", "raw_data is not exactly one TRC-20 transfer: %v", err)
		return "", false
	}
	if w.Asset == aggregate.USDT.Code && tt.Contract != tron.USDTContract {
		report(Violation, "envelope", "pays token contract %s, not USDT (%s)", tt.Contract, tron.USDTContract)
	}
	if tt.To.String() != w.ToAddress {
		report(Violation, "envelope", "pays %s, not the withdrawal's to_address %s", tt.To, w.ToAddress)
	}
	if want := w.Amount.Units(); tt.Amount.Cmp(want) != 0 {
		report(Violation, "envelope", "pays %s units, not the withdrawal's amount_units %s", tt.Amount, want)
	}
	return tt.Owner.String(), true
}

// checkSignature: the signature over the current txid recovers to the
// envelope's owner. A mismatch is a warning: no node accepts such a
// transaction (it cannot move money), but a confirmation of it would mean
// the log or the node lies — the chain check settles that.
func checkSignature(w aggregate.Withdrawal, ev aggregate.Signed, report reportFunc) (string, bool) {
	sig, err := hex.DecodeString(ev.Signature)
	if err != nil {
		report(Violation, "signature", "signature is not hex")
		return "", false
	}
	id, err := tron.ParseTxID(ev.TxID)
	if err != nil {
		report(Violation, "signature", "txid %q: %v", ev.TxID, err)
		return "", false
	}
	signer, err := tron.RecoverSigner(id, sig)
	if err != nil {
		report(Warning, "signature", "the signature recovers no key: %v", err)
		return "", false
	}
	raw, err := hex.DecodeString(w.Envelope.RawDataHex)
	if err == nil {
		if r, err := tron.DecodeRaw(raw); err == nil {
			if owner, err := r.Owner(); err == nil && owner != signer {
				report(Warning, "signature", "signed by %s, not the envelope's owner %s", signer, owner)
			}
		}
	}
	return signer.String(), true
}

// unmet reports whether n approvals fall short of r; a refused destination
// is short whatever n.
func unmet(r aggregate.Requirement, n int) bool { return r.RefusedBy != "" || n < r.Approvers }

// describe says what a requirement is, for findings.
func describe(r aggregate.Requirement) string {
	return describeRecorded(r.Rule, r.Approvers, r.AppliedRules, r.RefusedBy)
}

func describeRecorded(rule string, approvers int, applied []aggregate.AppliedRule, refusedBy string) string {
	if refusedBy != "" {
		return fmt.Sprintf("destination rule %q refuses the destination", refusedBy)
	}
	return describeRule(rule, approvers, applied)
}

func describeRule(rule string, approvers int, applied []aggregate.AppliedRule) string {
	s := fmt.Sprintf("rule %q", rule)
	for _, r := range applied {
		s += " + " + r.String()
	}
	return fmt.Sprintf("%s needing %d", s, approvers)
}

// addApplied adds the destination and velocity rules a decision counted
// (and the window sum a request measured) to an event's timeline facts.
func addApplied(add func(string, any), applied []aggregate.AppliedRule, windowSum *aggregate.Amount) {
	for _, r := range applied {
		add("applied_rule", r.String())
	}
	if windowSum != nil {
		add("window_sum", windowSum.String())
	}
}
