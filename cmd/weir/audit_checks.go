package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/tron"
)

// The audit's judgement lives here, as pure functions of the records read
// (no I/O but the chain lookups in audit_chain.go).
//
// What is checked, per withdrawal stream:
//   - the stream: its id is a canonical operation id (UUID), the requested
//     event names the same id, versions run 1..n without a gap, every
//     payload decodes;
//   - every event against the transition table (aggregate.CheckTransition)
//     and, once, the whole stream against every rule the deciders enforce
//     (aggregate.Audit, which stops at the first event that could not have
//     been decided; the table and the checks below carry on after it);
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
//     (Evidence.Proves against the retired envelope's expiration), and the
//     new envelope is new and not already expired at the proof's time;
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
//     its envelopes can land) and is not a new authorisation; one made
//     while a stricter policy is in force is a warning. An approved, not
//     yet authorised withdrawal below the current policy gets a note: the
//     pre-send re-check will send it back to requested.

// Severities of a finding.
const (
	sevViolation = "violation"
	sevWarning   = "warning"
	sevNote      = "note"
)

// auditFinding is one thing the audit found: where (withdrawal or account,
// event version and type) and what.
type auditFinding struct {
	Severity   string `json:"severity"`
	Check      string `json:"check"`
	Withdrawal string `json:"withdrawal,omitempty"`
	Account    string `json:"account,omitempty"`
	Version    uint64 `json:"version,omitempty"` // the event's version in its stream; 0 = the stream as a whole
	Event      string `json:"event,omitempty"`
	What       string `json:"what"`
}

func (f auditFinding) where() string {
	var b strings.Builder
	switch {
	case f.Withdrawal != "":
		b.WriteString("withdrawal " + f.Withdrawal)
	case f.Account != "":
		b.WriteString("account " + f.Account)
	default:
		b.WriteString("store")
	}
	if f.Version > 0 {
		fmt.Fprintf(&b, " event %d", f.Version)
		if f.Event != "" {
			b.WriteString(" (" + f.Event + ")")
		}
	}
	return b.String()
}

// detail is one key fact of an event, in display order.
type detail struct{ K, V string }

type details []detail

// MarshalJSON writes the facts as one object, in order.
func (d details) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.K)
		v, _ := json.Marshal(kv.V)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// UnmarshalJSON reads the object back, keeping its order.
func (d *details) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("details: not an object")
	}
	*d = nil
	for dec.More() {
		var k, v string
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ = t.(string)
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*d = append(*d, detail{k, v})
	}
	return nil
}

func (d details) String() string {
	parts := make([]string, len(d))
	for i, kv := range d {
		parts[i] = kv.K + "=" + kv.V
	}
	return strings.Join(parts, " ")
}

// timelineEntry is one event of a withdrawal's replay.
type timelineEntry struct {
	Version  uint64          `json:"version"`
	Sequence uint64          `json:"sequence"`
	At       time.Time       `json:"at"`
	Type     string          `json:"type"`
	State    aggregate.State `json:"state"`
	Details  details         `json:"details"`
	Findings []auditFinding  `json:"findings,omitempty"`
}

// ---- the policy history ----

// policyVersion is one version of the policy and where it entered the log.
type policyVersion struct {
	Policy   aggregate.Policy
	Sequence uint64 // stream sequence of its policy.changed; 0 = the built-in default
	At       time.Time
	By       string
}

func (p policyVersion) label() string {
	if p.Sequence == 0 {
		return fmt.Sprintf("v%d (the built-in default %q, before any policy was stored)", p.Policy.Version, p.Policy.Name)
	}
	return fmt.Sprintf("v%d %q (set by %s at %s)", p.Policy.Version, p.Policy.Name, p.By, fmtTime(p.At))
}

// policyHistory is the policy stream folded version by version.
type policyHistory struct {
	versions []policyVersion // in stream order; versions[0] is the default (v0)
}

func buildPolicyHistory(recs []eventstore.Record, report func(auditFinding)) policyHistory {
	h := policyHistory{versions: []policyVersion{{Policy: aggregate.DefaultPolicy()}}}
	var s aggregate.PolicyState
	for i, r := range recs {
		f := auditFinding{Severity: sevViolation, Check: "policy", Account: "", Version: r.AggregateVersion, Event: r.Type}
		if r.AggregateVersion != uint64(i+1) {
			f.What = fmt.Sprintf("policy stream: event %d has version %d", i+1, r.AggregateVersion)
			report(f)
		}
		evs, err := projections.PolicyEvents([]eventstore.Record{r})
		if err != nil {
			f.What = "policy stream: " + err.Error()
			report(f)
			continue
		}
		ch, ok := evs[0].(aggregate.PolicyChanged)
		if !ok {
			continue
		}
		if ch.Version != s.Policy.Version+1 {
			f.What = fmt.Sprintf("policy stream: version %d follows version %d", ch.Version, s.Policy.Version)
			report(f)
		}
		s = aggregate.EvolvePolicy(s, ch)
		if err := s.Policy.Validate(); err != nil {
			f.What = fmt.Sprintf("policy stream: version %d is not a valid policy: %v", ch.Version, err)
			report(f)
		}
		h.versions = append(h.versions, policyVersion{Policy: s.Policy, Sequence: r.Sequence, At: ch.At, By: ch.By})
	}
	return h
}

// inForceAt is the policy in force for an event at stream sequence seq: the
// last version stored before it.
func (h policyHistory) inForceAt(seq uint64) policyVersion {
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].Sequence >= seq })
	if i == 0 {
		return h.versions[0]
	}
	return h.versions[i-1]
}

// version finds a version by number (0 is the built-in default).
func (h policyHistory) version(v int) (policyVersion, bool) {
	for _, p := range h.versions {
		if p.Policy.Version == v {
			return p, true
		}
	}
	return policyVersion{}, false
}

func (h policyHistory) current() policyVersion { return h.versions[len(h.versions)-1] }

// firstRequiringMore is the first version after seq that requires more
// than n approvals for amount.
func (h policyHistory) firstRequiringMore(after uint64, amount aggregate.Amount, n int) (policyVersion, bool) {
	for _, p := range h.versions {
		if p.Sequence > after && p.Policy.Required(amount) > n {
			return p, true
		}
	}
	return policyVersion{}, false
}

// ---- one withdrawal ----

// withdrawalAudit is the replay of one withdrawal stream with its findings.
type withdrawalAudit struct {
	ID       string          `json:"id"`
	State    aggregate.State `json:"state"`
	Version  uint64          `json:"version"`
	Account  string          `json:"account"`
	To       string          `json:"to_address"`
	Amount   string          `json:"amount"`
	Units    string          `json:"amount_units"`
	Asset    string          `json:"asset"`
	By       string          `json:"requested_by"`
	Route    aggregate.Route `json:"route"`
	TxID     string          `json:"txid,omitempty"`
	Attempt  int             `json:"attempt"`
	Retired  []string        `json:"retired_txids"`
	Timeline []timelineEntry `json:"timeline"`
	Checks   []auditFinding  `json:"findings,omitempty"` // findings not tied to one event
	w        aggregate.Withdrawal
	found    []auditFinding // every finding of this withdrawal, in order
	endedAt  time.Time      // server time of the terminal event
	txids    []txidRecord
	authSeq  uint64 // stream sequence of the authorisation point (0 = none)
}

// txidRecord is a txid the withdrawal wrote ahead, for the chain checks.
type txidRecord struct {
	TxID    string
	Version uint64 // event that wrote it
	Role    string // "current" or "retired"
}

// auditor accumulates findings.
type auditor struct {
	policies policyHistory
	now      time.Time
	grace    time.Duration
	findings []auditFinding
}

func (a *auditor) add(f auditFinding) { a.findings = append(a.findings, f) }

// auditWithdrawal replays one withdrawal stream (records in version order)
// and checks it. The findings go to the returned replay (wa.found, and
// under their event or in wa.Checks); the auditor is only read, so
// withdrawals can be audited concurrently.
func (a *auditor) auditWithdrawal(id string, recs []eventstore.Record) *withdrawalAudit {
	wa := &withdrawalAudit{ID: id, Retired: []string{}}
	report := func(i int, sev, check, format string, args ...any) {
		f := auditFinding{Severity: sev, Check: check, Withdrawal: id, What: fmt.Sprintf(format, args...)}
		if i >= 0 {
			f.Version, f.Event = recs[i].AggregateVersion, recs[i].Type
			wa.Timeline[i].Findings = append(wa.Timeline[i].Findings, f)
		} else {
			wa.Checks = append(wa.Checks, f)
		}
		wa.found = append(wa.found, f)
	}
	if canon, err := aggregate.ParseOperationID(id); err != nil || canon != id {
		report(-1, sevViolation, "stream", "the stream id %q is not a canonical operation id (UUID): one operation must have exactly one stream", id)
	}

	// Decode each record on its own so that one bad payload does not hide
	// the rest.
	wa.Timeline = make([]timelineEntry, len(recs))
	events := make([]aggregate.Event, len(recs))
	for i, r := range recs {
		wa.Timeline[i] = timelineEntry{Version: r.AggregateVersion, Sequence: r.Sequence, At: r.Time, Type: r.Type}
		if r.AggregateVersion != uint64(i+1) {
			report(i, sevViolation, "stream", "event %d of the stream carries version %d: the stream has a gap or a duplicate", i+1, r.AggregateVersion)
		}
		e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
		if err != nil {
			report(i, sevViolation, "decode", "payload does not decode: %v", err)
			continue
		}
		events[i] = e
		if at := e.OccurredAt(); !at.IsZero() {
			wa.Timeline[i].At = at.UTC()
		}
	}

	// The deciders' own rules, on the whole stream at once: the first event
	// that could not have been decided.
	var decoded []aggregate.Event
	var index []int
	for i, e := range events {
		if e != nil {
			decoded = append(decoded, e)
			index = append(index, i)
		}
	}
	firstBad := -1
	var firstBadErr error
	if folded, err := aggregate.Audit(decoded); err != nil && int(folded.Version) < len(index) {
		firstBad, firstBadErr = index[folded.Version], err
	}

	var w aggregate.Withdrawal
	for i, e := range events {
		if e == nil {
			continue
		}
		before := w
		if err := aggregate.CheckTransition(before.State, e.EventType()); err != nil {
			report(i, sevViolation, "transition", "%s in state %s: not in the transition table", e.EventType(), stateName(before.State))
		}
		wa.Timeline[i].Details = a.checkEvent(before, e, recs[i], func(sev, check, format string, args ...any) {
			report(i, sev, check, format, args...)
		}, wa)
		w = aggregate.Evolve(w, e)
		wa.Timeline[i].State = w.State
		if i == firstBad && !hasViolation(wa.Timeline[i].Findings) {
			var de *aggregate.Error
			msg := firstBadErr.Error()
			if errors.As(firstBadErr, &de) {
				msg = de.Error()
			}
			report(i, sevViolation, "decider", "could not have been decided: %s", msg)
		}
		if w.State.IsTerminal() && wa.endedAt.IsZero() {
			wa.endedAt = recs[i].Time
		}
	}
	if len(recs) > 0 && events[0] != nil {
		if req, ok := events[0].(aggregate.Requested); ok && req.ID != id {
			report(0, sevViolation, "stream", "the requested event names operation %s but lives on the stream of %s", req.ID, id)
		}
	}

	w.Version = uint64(len(recs))
	wa.w = w
	wa.State, wa.Version, wa.Account, wa.To = w.State, w.Version, w.Account, w.ToAddress
	wa.Amount, wa.Units, wa.Asset, wa.By = w.Amount.String(), w.Amount.UnitsString(), w.Asset, w.RequestedBy
	wa.Route, wa.TxID, wa.Attempt = w.Route, w.Envelope.TxID, w.Attempt
	wa.Retired = append(wa.Retired, w.RetiredTxIDs()...)
	a.checkPolicyNow(wa, func(sev, check, format string, args ...any) { report(-1, sev, check, format, args...) })
	return wa
}

func hasViolation(fs []auditFinding) bool {
	for _, f := range fs {
		if f.Severity == sevViolation {
			return true
		}
	}
	return false
}

func stateName(s aggregate.State) string {
	if s == aggregate.StateNone {
		return "(new)"
	}
	return string(s)
}

// distinctApprovals counts approvals that can count: distinct approvers,
// never the requester.
func distinctApprovals(w aggregate.Withdrawal) int {
	seen := map[string]bool{}
	for _, ap := range w.Approvals {
		if ap.By != "" && ap.By != w.RequestedBy {
			seen[ap.By] = true
		}
	}
	return len(seen)
}

type reportFunc func(sev, check, format string, args ...any)

// checkEvent checks one event against the state before it and returns its
// key facts for the timeline.
func (a *auditor) checkEvent(w aggregate.Withdrawal, e aggregate.Event, rec eventstore.Record, report reportFunc, wa *withdrawalAudit) details {
	var d details
	add := func(k string, v any) { d = append(d, detail{k, fmt.Sprint(v)}) }
	switch ev := e.(type) {
	case aggregate.Requested:
		add("account", ev.Account)
		add("to", ev.ToAddress)
		add("amount", ev.Amount.String()+" "+ev.Asset)
		add("requested_by", ev.RequestedBy)
		add("rule", ev.Rule)
		add("required", ev.RequiredApprovals)
		add("policy_version", ev.PolicyVersion)
		pv, ok := a.policies.version(ev.PolicyVersion)
		switch {
		case !ok:
			report(sevViolation, "policy_then", "snapshots policy v%d, which was never stored", ev.PolicyVersion)
		case pv.Sequence > rec.Sequence:
			report(sevViolation, "policy_then", "snapshots policy v%d, which was stored later (stream sequence %d > %d)", ev.PolicyVersion, pv.Sequence, rec.Sequence)
		default:
			rule := pv.Policy.RuleFor(ev.Amount)
			if rule.Name != ev.Rule || rule.Approvers != ev.RequiredApprovals {
				report(sevViolation, "policy_then", "records rule %q needing %d approvals; policy v%d says rule %q needing %d for %s",
					ev.Rule, ev.RequiredApprovals, ev.PolicyVersion, rule.Name, rule.Approvers, ev.Amount)
			}
		}
	case aggregate.ApprovalRecorded:
		d = a.checkApproval(w, ev.Approval, ev.RequiredApprovals, false, rec, report)
	case aggregate.Approved:
		d = a.checkApproval(w, ev.Approval, ev.RequiredApprovals, true, rec, report)
	case aggregate.ApprovalsInvalidated:
		add("reason", ev.Reason)
		add("policy_version", ev.PolicyVersion)
		add("rule", ev.Rule)
		add("required", ev.RequiredApprovals)
		add("given", ev.Given)
		if pv, ok := a.policies.version(ev.PolicyVersion); !ok || pv.Sequence > rec.Sequence {
			report(sevViolation, "policy_then", "invalidates under policy v%d, which was not stored before it", ev.PolicyVersion)
		} else if rule := pv.Policy.RuleFor(w.Amount); rule.Approvers != ev.RequiredApprovals || rule.Name != ev.Rule {
			report(sevViolation, "policy_then", "records rule %q needing %d; policy v%d says rule %q needing %d", ev.Rule, ev.RequiredApprovals, ev.PolicyVersion, rule.Name, rule.Approvers)
		}
		if n := distinctApprovals(w); n >= ev.RequiredApprovals {
			report(sevViolation, "policy_then", "sent back to requested although its %d approvals satisfy the %d required", n, ev.RequiredApprovals)
		}
	case aggregate.Rejected:
		add("reason", ev.Reason)
		if ev.By != "" {
			add("by", ev.By)
		}
		if ev.Detail != "" {
			add("detail", ev.Detail)
		}
	case aggregate.FundsReserved:
		add("account", ev.Account)
		add("amount", ev.Amount)
		if ev.Account != w.Account || !ev.Amount.Equal(w.Amount) {
			report(sevViolation, "reservation", "reserves %s on %s; the withdrawal is %s on %s", ev.Amount, ev.Account, w.Amount, w.Account)
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
			report(sevViolation, "route", "settles %s to %s on the ledger; the withdrawal is %s routed %s %s", ev.Amount, ev.Account, w.Amount, w.Route.Rail(), w.Route.Account())
		}
	case aggregate.EnvelopeBuilt:
		add("attempt", ev.Attempt)
		add("txid", ev.Envelope.TxID)
		add("expiration", fmtMs(ev.Envelope.Expiration))
		add("policy_version", ev.PolicyVersion)
		a.checkAuthorisation(w, ev.PolicyVersion, rec, report, wa)
		if !w.Route.IsExternal() {
			report(sevViolation, "route", "an envelope for a withdrawal routed %q", w.Route.Rail())
		}
		if owner, ok := checkEnvelope(w, ev.Envelope, report); ok {
			add("owner", owner)
		}
		wa.txids = append(wa.txids, txidRecord{TxID: ev.Envelope.TxID, Version: rec.AggregateVersion, Role: "current"})
	case aggregate.Signed:
		add("txid", ev.TxID)
		if ev.TxID != w.Envelope.TxID {
			report(sevViolation, "envelope", "signs txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
		}
		if signer, ok := checkSignature(w, ev, report); ok {
			add("signer", signer)
		}
	case aggregate.Broadcasting:
		add("txid", ev.TxID)
		add("attempt", ev.Attempt)
		add("send", ev.Send)
		if ev.TxID != w.Envelope.TxID {
			report(sevViolation, "envelope", "sends txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
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
		add("evidence", fmt.Sprintf("solid block %d at %s, expiration %s + margin %dms, lookup %s",
			ed.SolidBlockNumber, fmtMs(ed.SolidBlockTime), fmtMs(ed.Expiration), ed.Margin, ed.Lookup))
		if ev.RetiredTxID != w.Envelope.TxID {
			report(sevViolation, "evidence", "retires txid %s; the current envelope is %s", ev.RetiredTxID, w.Envelope.TxID)
		}
		if err := ed.Proves(w.Envelope.Expiration); err != nil {
			report(sevViolation, "evidence", "the evidence does not prove txid %s dead: %v", w.Envelope.TxID, err)
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			report(sevViolation, "envelope", "the new envelope reuses txid %s", ev.Envelope.TxID)
		}
		if ev.Envelope.Expiration <= ed.SolidBlockTime {
			report(sevViolation, "envelope", "the new envelope expires at %s, already past at the proof's chain time %s", fmtMs(ev.Envelope.Expiration), fmtMs(ed.SolidBlockTime))
		}
		checkEnvelope(w, ev.Envelope, report)
		if p := a.policies.inForceAt(rec.Sequence); wa.authSeq > 0 && p.Policy.Required(w.Amount) > distinctApprovals(w) {
			report(sevWarning, "policy_then", "re-signed while policy %s requires %d approvals (%d given); the payment was authorised earlier and a rebuild replaces it, it is not a new one",
				p.label(), p.Policy.Required(w.Amount), distinctApprovals(w))
		}
		wa.txids = append(wa.txids, txidRecord{TxID: ev.Envelope.TxID, Version: rec.AggregateVersion, Role: "current"})
	case aggregate.Confirmed:
		add("txid", ev.TxID)
		add("block", ev.BlockNumber)
		add("block_time", fmtMs(ev.BlockTime))
		add("receipt", ev.Receipt)
		if ev.TxID != w.Envelope.TxID {
			report(sevViolation, "envelope", "confirms txid %s; the current envelope is %s", ev.TxID, w.Envelope.TxID)
		}
		if ev.Receipt != aggregate.ReceiptSuccess {
			report(sevViolation, "receipt", "confirmed with receipt %q: only SUCCESS pays", ev.Receipt)
		}
	case aggregate.Failed:
		add("reason", ev.Reason)
		if ev.TxID != "" {
			add("txid", ev.TxID)
		}
		if ev.Detail != "" {
			add("detail", ev.Detail)
		}
	}
	return d
}

// checkApproval: approvers are distinct and never the requester; the
// recorded rule is what the named policy version says; the version existed
// (THEN). approved also checks the count reaches the requirement.
func (a *auditor) checkApproval(w aggregate.Withdrawal, ap aggregate.Approval, required int, approves bool, rec eventstore.Record, report reportFunc) details {
	d := details{{"by", ap.By}, {"rule", ap.Rule}, {"policy_version", fmt.Sprint(ap.PolicyVersion)}, {"required", fmt.Sprint(required)}}
	if ap.By == w.RequestedBy {
		report(sevViolation, "approval", "approval by %s, who requested the withdrawal (self-approval)", ap.By)
	}
	if w.HasApproval(ap.By) {
		report(sevViolation, "approval", "a second approval by %s: approvers must be distinct", ap.By)
	}
	n := distinctApprovals(w)
	if ap.By != w.RequestedBy && !w.HasApproval(ap.By) {
		n++
	}
	d = append(d, detail{"approvals", fmt.Sprintf("%d of %d", n, required)})
	if approves && n < required {
		report(sevViolation, "approval", "approved with %d valid approvals; %d required", n, required)
	}
	pv, ok := a.policies.version(ap.PolicyVersion)
	switch {
	case !ok:
		report(sevViolation, "policy_then", "approval by %s names policy v%d, which was never stored", ap.By, ap.PolicyVersion)
		return d
	case pv.Sequence > rec.Sequence:
		report(sevViolation, "policy_then", "approval by %s names policy v%d, stored later (stream sequence %d > %d)", ap.By, ap.PolicyVersion, pv.Sequence, rec.Sequence)
		return d
	}
	rule := pv.Policy.RuleFor(w.Amount)
	if rule.Name != ap.Rule || rule.Approvers != required {
		report(sevViolation, "policy_then", "approval by %s records rule %q needing %d; policy v%d says rule %q needing %d for %s",
			ap.By, ap.Rule, required, ap.PolicyVersion, rule.Name, rule.Approvers, w.Amount)
	}
	if inForce := a.policies.inForceAt(rec.Sequence); inForce.Policy.Version != ap.PolicyVersion {
		if need := inForce.Policy.Required(w.Amount); need != required {
			report(sevWarning, "policy_then", "approval by %s was decided under policy v%d, but %s was already in force and requires %d, not %d; the authorisation point judges it",
				ap.By, ap.PolicyVersion, inForce.label(), need, required)
		}
	}
	return d
}

// checkAuthorisation judges the moment money is committed to move (the
// first envelope's write-ahead, or an internal settlement): reserved, and
// approvals that satisfy both the policy the event says it checked and the
// policy actually in force at this position of the log.
func (a *auditor) checkAuthorisation(w aggregate.Withdrawal, checked int, rec eventstore.Record, report reportFunc, wa *withdrawalAudit) {
	if wa.authSeq == 0 {
		wa.authSeq = rec.Sequence
	}
	if !w.Reserved {
		report(sevViolation, "reservation", "money committed to move before the amount was reserved on account %s", w.Account)
	}
	n := distinctApprovals(w)
	pv, ok := a.policies.version(checked)
	switch {
	case !ok:
		report(sevViolation, "policy_then", "says it checked policy v%d, which was never stored", checked)
	case pv.Sequence > rec.Sequence:
		report(sevViolation, "policy_then", "says it checked policy v%d, stored later (stream sequence %d > %d)", checked, pv.Sequence, rec.Sequence)
	case n < pv.Policy.Required(w.Amount):
		report(sevViolation, "policy_then", "money committed with %d valid approvals; policy v%d, which this event says it checked, requires %d",
			n, checked, pv.Policy.Required(w.Amount))
	}
	inForce := a.policies.inForceAt(rec.Sequence)
	if inForce.Policy.Version != checked && n < inForce.Policy.Required(w.Amount) {
		report(sevViolation, "policy_then", "money committed with %d valid approvals after policy %s required %d (the event says it checked v%d)",
			n, inForce.label(), inForce.Policy.Required(w.Amount), checked)
	}
}

// checkPolicyNow judges the approvals against the current policy.
func (a *auditor) checkPolicyNow(wa *withdrawalAudit, report reportFunc) {
	w := wa.w
	if !w.Exists() || w.State == aggregate.StateRejected || w.State == aggregate.StateFailed {
		return
	}
	cur := a.policies.current()
	n, need := distinctApprovals(w), cur.Policy.Required(w.Amount)
	if n >= need {
		return
	}
	switch {
	case wa.authSeq > 0:
		then := a.policies.inForceAt(wa.authSeq)
		if n < then.Policy.Required(w.Amount) {
			return // THEN already reported the violation
		}
		change, _ := a.policies.firstRequiringMore(wa.authSeq, w.Amount, n)
		report(sevWarning, "policy_now", "its %d approvals no longer satisfy the current policy v%d (rule %q needs %d); they satisfied policy v%d in force when the payment was authorised, before %s tightened it",
			n, cur.Policy.Version, cur.Policy.RuleFor(w.Amount).Name, need, then.Policy.Version, change.label())
	case w.State == aggregate.StateApproved:
		report(sevNote, "policy_now", "approved with %d approvals; the current policy v%d needs %d: the pre-send re-check will send it back to requested",
			n, cur.Policy.Version, need)
	}
}

// checkEnvelope checks an envelope against the withdrawal: txid =
// sha256(raw_data); raw_data is one TRC-20 transfer of USDT paying
// to_address exactly amount_units; the recorded expiration is the one in
// the bytes (the proof of death relies on it). Returns the owner.
func checkEnvelope(w aggregate.Withdrawal, env aggregate.Envelope, report reportFunc) (string, bool) {
	raw, err := hex.DecodeString(env.RawDataHex)
	if err != nil || len(raw) == 0 {
		report(sevViolation, "envelope", "raw_data_hex is not hex bytes")
		return "", false
	}
	if sum := tron.HexID(tron.TxID(raw)); !strings.EqualFold(sum, env.TxID) {
		report(sevViolation, "envelope", "txid %s is not sha256(raw_data) = %s", env.TxID, sum)
	}
	r, err := tron.DecodeRaw(raw)
	if err != nil {
		report(sevViolation, "envelope", "raw_data does not decode as a TRON transaction: %v", err)
		return "", false
	}
	if r.Expiration != env.Expiration {
		report(sevViolation, "envelope", "records expiration %d; the bytes say %d", env.Expiration, r.Expiration)
	}
	if r.FeeLimit != env.FeeLimit {
		report(sevWarning, "envelope", "records fee_limit %d; the bytes say %d", env.FeeLimit, r.FeeLimit)
	}
	tt, err := r.TokenTransfer()
	if err != nil {
		report(sevViolation, "envelope", "raw_data is not exactly one TRC-20 transfer: %v", err)
		return "", false
	}
	if w.Asset == aggregate.USDT.Code && tt.Contract != tron.USDTContract {
		report(sevViolation, "envelope", "pays token contract %s, not USDT (%s)", tt.Contract, tron.USDTContract)
	}
	if tt.To.String() != w.ToAddress {
		report(sevViolation, "envelope", "pays %s, not the withdrawal's to_address %s", tt.To, w.ToAddress)
	}
	if want := w.Amount.Units(); tt.Amount.Cmp(want) != 0 {
		report(sevViolation, "envelope", "pays %s units, not the withdrawal's amount_units %s", tt.Amount, want)
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
		report(sevViolation, "signature", "signature is not hex")
		return "", false
	}
	id, err := tron.ParseTxID(ev.TxID)
	if err != nil {
		report(sevViolation, "signature", "txid %q: %v", ev.TxID, err)
		return "", false
	}
	signer, err := tron.RecoverSigner(id, sig)
	if err != nil {
		report(sevWarning, "signature", "the signature recovers no key: %v", err)
		return "", false
	}
	raw, err := hex.DecodeString(w.Envelope.RawDataHex)
	if err == nil {
		if r, err := tron.DecodeRaw(raw); err == nil {
			if owner, err := r.Owner(); err == nil && owner != signer {
				report(sevWarning, "signature", "signed by %s, not the envelope's owner %s", signer, owner)
			}
		}
	}
	return signer.String(), true
}

func fmtMs(ms int64) string {
	if ms == 0 {
		return "0"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// ---- accounts and reservations ----

// accountAudit is one account stream, replayed.
type accountAudit struct {
	ID      string
	Account aggregate.Account
	Events  int
}

// auditAccount replays an account stream and checks that every event
// could have been decided and that available + reserved + settled =
// credits. aggregate.AuditAccount does exactly that but re-checks the
// invariants over every reservation after every event, which is quadratic
// in the account's history (a busy account has millions of events), so
// it runs only to name the bad event once a linear pass has found one:
// FoldAccount applies exactly the events that pass the decider's checks
// and ignores the rest, and every applied event leaves a trace (a credit
// id, a reservation, its closing status), so an event that left none was
// one that could not have been decided.
func (a *auditor) auditAccount(id string, recs []eventstore.Record) accountAudit {
	aa := accountAudit{ID: id, Events: len(recs)}
	var events []aggregate.AccountEvent
	for i, r := range recs {
		if r.AggregateVersion != uint64(i+1) {
			a.add(auditFinding{Severity: sevViolation, Check: "stream", Account: id, Version: r.AggregateVersion, Event: r.Type,
				What: fmt.Sprintf("event %d of the stream carries version %d", i+1, r.AggregateVersion)})
		}
		e, err := aggregate.DecodeAccountEvent(r.Type, r.Payload)
		if err != nil {
			a.add(auditFinding{Severity: sevViolation, Check: "decode", Account: id, Version: r.AggregateVersion, Event: r.Type, What: "payload does not decode: " + err.Error()})
			continue
		}
		events = append(events, e)
	}
	aa.Account = aggregate.FoldAccount(events)
	if aa.Account.ID != "" && aa.Account.ID != id {
		a.add(auditFinding{Severity: sevViolation, Check: "account", Account: id, What: fmt.Sprintf("the stream of account %s holds the events of account %s", id, aa.Account.ID)})
	}
	if allApplied(aa.Account, events) && aa.Account.CheckInvariants() == nil {
		return aa
	}
	if _, err := aggregate.AuditAccount(events); err != nil {
		a.add(auditFinding{Severity: sevViolation, Check: "account", Account: id, What: err.Error()})
	} else {
		a.add(auditFinding{Severity: sevViolation, Check: "account", Account: id, What: "an event left no trace in the account's state"})
	}
	return aa
}

// allApplied reports whether folding events applied every one of them.
func allApplied(acct aggregate.Account, events []aggregate.AccountEvent) bool {
	credits := map[string]bool{}
	reserved := map[string]bool{}
	closed := map[string]aggregate.ReservationStatus{}
	for _, e := range events {
		switch ev := e.(type) {
		case aggregate.AccountCredited:
			amt, ok := acct.CreditAmount(ev.CreditID)
			if credits[ev.CreditID] || !ok || !amt.Equal(ev.Amount) {
				return false
			}
			credits[ev.CreditID] = true
		case aggregate.AccountReserved:
			r, ok := acct.Reservation(ev.WithdrawalID)
			if reserved[ev.WithdrawalID] || !ok || !r.Amount.Equal(ev.Amount) || r.Day != ev.Day {
				return false
			}
			reserved[ev.WithdrawalID] = true
		case aggregate.AccountReleased:
			if _, dup := closed[ev.WithdrawalID]; dup || !reserved[ev.WithdrawalID] {
				return false
			}
			closed[ev.WithdrawalID] = aggregate.ReservationReleased
		case aggregate.AccountSettled:
			if _, dup := closed[ev.WithdrawalID]; dup || !reserved[ev.WithdrawalID] {
				return false
			}
			closed[ev.WithdrawalID] = aggregate.ReservationSettled
		default:
			return false
		}
	}
	for wid := range reserved {
		r, _ := acct.Reservation(wid)
		want, ok := closed[wid]
		if !ok {
			want = aggregate.ReservationHeld
		}
		if r.Status != want {
			return false
		}
	}
	return true
}

// checkReservation (safe to call concurrently; accounts are only read):
// the account's reservation of a withdrawal matches the
// withdrawal — held while it is open, settled once confirmed, released (or
// never made) once rejected or failed — and an internal transfer credited
// its destination. A terminal withdrawal whose account has not caught up
// yet is a warning for `grace` after it ended (the ledger saga completes
// it asynchronously), a violation after.
func (a *auditor) checkReservation(wa *withdrawalAudit, accounts map[string]accountAudit) {
	w := wa.w
	if !w.Exists() {
		return
	}
	report := func(sev, format string, args ...any) {
		f := auditFinding{Severity: sev, Check: "reservation", Withdrawal: w.ID, What: fmt.Sprintf(format, args...)}
		wa.Checks = append(wa.Checks, f)
		wa.found = append(wa.found, f)
	}
	lagging := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if !wa.endedAt.IsZero() && a.now.Sub(wa.endedAt) < a.grace {
			report(sevWarning, "%s (it ended %s ago; the ledger saga completes it — audit again if this persists)", msg, a.now.Sub(wa.endedAt).Round(time.Millisecond))
			return
		}
		report(sevViolation, "%s", msg)
	}
	acct := accounts[w.Account].Account
	res, has := acct.Reservation(w.ID)
	if has && !res.Amount.Equal(w.Amount) {
		report(sevViolation, "account %s holds %s for it; the withdrawal is %s", w.Account, res.Amount, w.Amount)
	}
	if w.Reserved && !has {
		report(sevViolation, "the withdrawal records funds_reserved but account %s has no reservation for it", w.Account)
	}
	switch w.State {
	case aggregate.StateConfirmed:
		switch {
		case !has:
			report(sevViolation, "confirmed but nothing was ever reserved on account %s", w.Account)
		case res.Status == aggregate.ReservationReleased:
			report(sevViolation, "confirmed (paid) but its reservation on account %s was released: the money counts twice", w.Account)
		case res.Status == aggregate.ReservationHeld:
			lagging("confirmed but its reservation on account %s is still held, not settled", w.Account)
		}
		if w.Route.IsInternal() {
			dest := accounts[w.Route.Account()].Account
			amt, ok := dest.CreditAmount("internal:" + w.ID)
			switch {
			case !ok:
				lagging("settled internally but account %s was not credited (credit internal:%s)", w.Route.Account(), w.ID)
			case !amt.Equal(w.Amount):
				report(sevViolation, "account %s was credited %s for it; the withdrawal is %s", w.Route.Account(), amt, w.Amount)
			}
		}
	case aggregate.StateRejected, aggregate.StateFailed:
		switch {
		case has && res.Status == aggregate.ReservationSettled:
			report(sevViolation, "%s (not paid) but its reservation on account %s was settled: the account lost the money", w.State, w.Account)
		case has && res.Status == aggregate.ReservationHeld:
			lagging("%s but its reservation on account %s is still held, not released", w.State, w.Account)
		}
	default:
		if has && res.Status != aggregate.ReservationHeld {
			report(sevViolation, "still %s but its reservation on account %s is already %s", w.State, w.Account, res.Status)
		}
		if has && !w.Reserved {
			report(sevNote, "reserved on account %s, not yet recorded on the withdrawal (the ledger saga records it)", w.Account)
		}
	}
}

// checkOrphanReservations: every reservation on an account belongs to a
// withdrawal of that account (--all only).
func (a *auditor) checkOrphanReservations(accounts map[string]accountAudit, withdrawals map[string]*withdrawalAudit) {
	ids := make([]string, 0, len(accounts))
	for id := range accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, r := range accounts[id].Account.Reservations() {
			wa, ok := withdrawals[r.WithdrawalID]
			switch {
			case !ok:
				a.add(auditFinding{Severity: sevViolation, Check: "reservation", Account: id,
					What: fmt.Sprintf("reservation of %s (%s) for withdrawal %s, which does not exist", r.Amount, r.Status, r.WithdrawalID)})
			case wa.w.Account != id:
				a.add(auditFinding{Severity: sevViolation, Check: "reservation", Account: id,
					What: fmt.Sprintf("reservation for withdrawal %s, which draws on account %s", r.WithdrawalID, wa.w.Account)})
			}
		}
	}
}
