package aggregate

import (
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Withdrawal is the state of one withdrawal: the fold of its stream. It is a
// value; Evolve returns a new one and never changes its input (slices are
// copied before they grow). Treat the slices as read-only.
type Withdrawal struct {
	ID    string `json:"id"` // the operation_id, canonical UUID; the stream id
	State State  `json:"state"`
	// Version is the number of events folded, which is the aggregate version
	// the store reports when the stream is folded from its start. Callers
	// holding a store position may overwrite it.
	Version uint64 `json:"version"`

	Account     string    `json:"account"`
	ToAddress   string    `json:"to_address"`
	Amount      Amount    `json:"amount"` // at the asset's scale
	Asset       string    `json:"asset"`
	RequestedBy string    `json:"requested_by"`
	RequestedAt time.Time `json:"requested_at"`

	// RequiredApprovals and Rule come from the policy snapshot at request
	// time, updated by later approvals and invalidations (each of which
	// applies the stricter of AtRequest and the policy then in force);
	// PolicyVersion says which policy version set the binding rule.
	RequiredApprovals int        `json:"required_approvals"`
	Rule              string     `json:"rule"`
	PolicyVersion     int        `json:"policy_version"`
	Approvals         []Approval `json:"approvals"`
	// AtRequest is the requirement snapshotted at request time. It never
	// changes: a later policy can raise what the withdrawal needs, never
	// lower it (see RequirementFor).
	AtRequest Requirement `json:"at_request"`
	// AppliedRules are the destination and velocity rules counted in
	// RequiredApprovals; WindowSum the account's sum sent in the
	// VelocityWindow before the request (nil when not measured).
	AppliedRules []AppliedRule         `json:"applied_rules,omitempty"`
	WindowSum    *Amount               `json:"window_sum,omitempty"`
	ApprovedAt   time.Time             `json:"approved_at"`            // zero unless approved; orders the ready queue
	Invalidation *ApprovalsInvalidated `json:"invalidation,omitempty"` // the latest

	Reserved   bool      `json:"reserved"`
	ReservedAt time.Time `json:"reserved_at"`

	Route Route `json:"route"`
	Claim Claim `json:"claim"`

	// Attempt counts envelopes (1 = the first); Envelope is the current one.
	Attempt    int        `json:"attempt"`
	Envelope   Envelope   `json:"envelope"`
	Signature  string     `json:"signature,omitempty"`
	Sends      int        `json:"sends"` // intents recorded for the current attempt
	Acceptance Acceptance `json:"acceptance"`
	Retired    []Retired  `json:"retired"`
	// Receipts are the receipts the chain gave its envelopes, oldest
	// first: each failed one a rebuild or the failure recorded, and the
	// confirmation's.
	Receipts []ChainReceipt `json:"receipts,omitempty"`

	Confirmation Confirmation `json:"confirmation"`

	// Reason, Detail and ResolvedBy describe a rejection or a failure.
	Reason     string `json:"reason,omitempty"`
	Detail     string `json:"detail,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`

	UpdatedAt time.Time `json:"updated_at"`
}

// Claim is the broadcast saga's lease on a withdrawal.
//
// LeaseUntil and At are the claimant's clock. RecordedAt is the store's
// (the server's) record time of the claim, stamped when the stream is read
// (EvolveRecorded); the lease then ends no later than RecordedAt plus the
// lease's length, so a claimant whose clock runs fast cannot hold a
// withdrawal beyond what it asked for, measured on the server's clock.
type Claim struct {
	Worker     string    `json:"worker,omitempty"`
	LeaseUntil time.Time `json:"lease_until"`
	At         time.Time `json:"at"`
	RecordedAt time.Time `json:"recorded_at,omitzero"`
}

// Until is when the lease ends: LeaseUntil, bounded by the server's record
// time of the claim plus the lease's length when that is known.
func (c Claim) Until() time.Time {
	if c.RecordedAt.IsZero() {
		return c.LeaseUntil
	}
	if bound := c.RecordedAt.Add(c.LeaseUntil.Sub(c.At)); bound.Before(c.LeaseUntil) {
		return bound
	}
	return c.LeaseUntil
}

// HeldAt reports whether the lease is held by someone at time t.
func (c Claim) HeldAt(t time.Time) bool { return c.Worker != "" && t.Before(c.Until()) }

// Acceptance is what the network said about the current attempt's last
// accepted send.
type Acceptance struct {
	Send   int       `json:"send,omitempty"`
	Result string    `json:"result,omitempty"`
	At     time.Time `json:"at"`
}

// Retired is an envelope that a rebuild replaced, with its proof (the
// proof of death, or its failing Receipt), or (Unsigned) one that was
// never signed and so needed none: retired by the re-check before signing
// or replaced for another signer (Reason).
type Retired struct {
	TxID       string          `json:"txid"`
	Attempt    int             `json:"attempt"`
	Evidence   Evidence        `json:"evidence"`
	Receipt    *FailureReceipt `json:"receipt,omitempty"`
	ReplacedBy string          `json:"replaced_by"`
	Unsigned   bool            `json:"unsigned,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	At         time.Time       `json:"at"`
}

// Confirmation is the on-chain outcome (zero for internal settlements,
// which have none).
type Confirmation struct {
	TxID        string    `json:"txid,omitempty"`
	BlockNumber int64     `json:"block_number,omitempty"`
	BlockTime   int64     `json:"block_time,omitempty"`
	Receipt     string    `json:"receipt,omitempty"`
	Fee         *ChainFee `json:"fee,omitempty"`
	At          time.Time `json:"at"`
}

// ChainReceipt is one receipt the chain gave an envelope of the
// withdrawal: Result SUCCESS for the confirmation, a failing result for
// an envelope a rebuild or the failure retired. Fee is nil when the event
// that recorded it predates fees being recorded.
type ChainReceipt struct {
	TxID        string    `json:"txid"`
	Attempt     int       `json:"attempt"`
	BlockNumber int64     `json:"block_number"`
	BlockTime   int64     `json:"block_time"`
	Result      string    `json:"result"`
	Fee         *ChainFee `json:"fee,omitempty"`
}

// receipted appends a receipt of the current envelope.
func (w *Withdrawal) receipted(r FailureReceipt) {
	w.Receipts = append(slices.Clip(w.Receipts), ChainReceipt{
		TxID: w.Envelope.TxID, Attempt: w.Attempt, BlockNumber: r.BlockNumber, BlockTime: r.BlockTime, Result: r.Result, Fee: r.Fee,
	})
}

// retire records the current envelope as retired (r: its proof or reason)
// and makes env, attempt, the current one: nothing of it is signed or sent.
func (w *Withdrawal) retire(r Retired, attempt int, env Envelope) {
	w.Retired = append(slices.Clip(w.Retired), r)
	w.Attempt, w.Envelope = attempt, env
	w.Signature, w.Sends, w.Acceptance = "", 0, Acceptance{}
}

// Exists reports whether the withdrawal has been requested.
func (w Withdrawal) Exists() bool { return w.State != StateNone }

// Terminal reports whether the withdrawal has ended (confirmed, rejected,
// failed).
func (w Withdrawal) Terminal() bool { return w.State.IsTerminal() }

// TxID is the current envelope's txid, "" before the first envelope.
func (w Withdrawal) TxID() string { return w.Envelope.TxID }

// ReadyToSend reports whether the broadcast saga may take the withdrawal:
// approved and its amount reserved.
func (w Withdrawal) ReadyToSend() bool { return w.State == StateApproved && w.Reserved }

// HasApproval reports whether principal has approved.
func (w Withdrawal) HasApproval(principal string) bool {
	return slices.ContainsFunc(w.Approvals, func(a Approval) bool { return a.By == principal })
}

// DistinctApprovals counts the approvals that can count: distinct
// approvers, never the requester. Decide records no other kind, so on a
// log it wrote this is len(Approvals); an auditor reading a log it does not
// trust counts this way.
func (w Withdrawal) DistinctApprovals() int {
	seen := make(map[string]bool, len(w.Approvals))
	for _, ap := range w.Approvals {
		if ap.By != "" && ap.By != w.RequestedBy {
			seen[ap.By] = true
		}
	}
	return len(seen)
}

// RetiredTxIDs lists the txids retired by rebuilds, oldest first.
func (w Withdrawal) RetiredTxIDs() []string {
	out := make([]string, len(w.Retired))
	for i, r := range w.Retired {
		out[i] = r.TxID
	}
	return out
}

// KnowsTxID reports whether txid is the current or a retired envelope's.
func (w Withdrawal) KnowsTxID(txid string) bool {
	return txid != "" && (txid == w.Envelope.TxID || w.isRetired(txid))
}

func (w Withdrawal) isRetired(txid string) bool {
	return slices.ContainsFunc(w.Retired, func(r Retired) bool { return r.TxID == txid })
}

// Requirement is how many distinct approvals a withdrawal needs and which
// rule of which policy version says so.
//
// Approvers counts the amount rule (Rule) and the destination and velocity
// rules in AppliedRules. RefusedBy, when set, is the destination rule that
// refuses the withdrawal's destination: no number of approvals suffices.
type Requirement struct {
	PolicyName    string        `json:"policy_name"`
	PolicyVersion int           `json:"policy_version"`
	Rule          string        `json:"rule"`
	Approvers     int           `json:"approvers"`
	AppliedRules  []AppliedRule `json:"applied_rules,omitempty"`
	RefusedBy     string        `json:"refused_by,omitempty"`
	refusal       error
}

// Facts are what the policy judges w by: account, destination, amount and
// the window sum recorded at its request.
func (w Withdrawal) Facts() RequestFacts {
	return RequestFacts{Account: w.Account, ToAddress: w.ToAddress, Amount: w.Amount, WindowSum: w.WindowSum}
}

// RequirementUnder is what policy p says w needs (its facts as recorded
// at the request, the window sum included), whichever policy was in force
// when.
func RequirementUnder(w Withdrawal, p Policy) Requirement {
	as, err := p.Assess(w.Facts())
	return Requirement{
		PolicyName: p.Name, PolicyVersion: p.Version, Rule: as.Rule.Name, Approvers: as.Approvers,
		AppliedRules: as.AppliedRules, RefusedBy: as.RefusedBy, refusal: err,
	}
}

// RequirementFor is what w needs now: the stricter of the requirement
// snapshotted at its request and what current (the policy in force) says
// for it — its amount, destination and window sum. Tightening the policy
// therefore applies to queued withdrawals; loosening it never does. On a
// tie the policy in force names the rule. A destination the policy in
// force refuses is refused whatever was required before.
func RequirementFor(w Withdrawal, current Policy) Requirement {
	now := RequirementUnder(w, current)
	if now.RefusedBy == "" && w.AtRequest.Approvers > now.Approvers {
		return w.AtRequest
	}
	return now
}

// Refusal is the destination_not_allowed error of a refused requirement
// (nil when the destination is allowed).
func (r Requirement) Refusal() error {
	if r.RefusedBy == "" {
		return nil
	}
	if r.refusal != nil {
		return r.refusal
	}
	return newError(CodeDestinationNotAllowed, "to_address", "destination rule %q of policy %q v%d refuses the destination", r.RefusedBy, r.PolicyName, r.PolicyVersion)
}

// EnsureApproved checks the approvals given against RequirementFor(w,
// current) (used before anything is signed or settled): the distinct
// approvals recorded — never the requester's, which cannot be recorded —
// must reach both what the policy in force requires for the amount and what
// the policy at request time required. Approvals given under an older
// policy version still count; it is their number that must suffice.
func EnsureApproved(w Withdrawal, current Policy) error {
	return EnsureApprovedBy(w, current, nil)
}

// EnsureApprovedBy is EnsureApproved where the approvals of the principals
// in revoked (who no longer hold the approver role) do not count.
func EnsureApprovedBy(w Withdrawal, current Policy, revoked []string) error {
	if err := current.Validate(); err != nil {
		return err
	}
	req := RequirementFor(w, current)
	if err := req.Refusal(); err != nil {
		return err
	}
	kept, discounted := countApprovals(w, revoked)
	if kept < req.Approvers {
		msg := ""
		if len(discounted) > 0 {
			msg = fmt.Sprintf(" (%v no longer approvers)", discounted)
		}
		return newError(CodeApprovalsInsufficient, "", "rule %q of policy %q v%d needs %d approvals, %d count%s",
			req.Rule, req.PolicyName, req.PolicyVersion, req.Approvers, kept, msg)
	}
	return nil
}

// countApprovals counts the approvals that still count, and lists the
// approvers among revoked whose approvals do not.
func countApprovals(w Withdrawal, revoked []string) (kept int, discounted []string) {
	for _, a := range w.Approvals {
		if slices.Contains(revoked, a.By) {
			discounted = append(discounted, a.By)
			continue
		}
		kept++
	}
	return kept, discounted
}

// SpentAttempts counts the envelopes that were signed (the current one
// included, once built): envelopes retired unsigned never could land and
// do not use up an attempt.
func (w Withdrawal) SpentAttempts() int {
	n := w.Attempt
	for _, r := range w.Retired {
		if r.Unsigned {
			n--
		}
	}
	return n
}

// Evolve applies one event and returns the new state. The log is written
// only through Decide, so every stored event is legal; an event the table
// does not allow from the current state is nevertheless ignored (only the
// version advances) rather than trusted — Audit reports it.
func Evolve(w Withdrawal, e Event) Withdrawal {
	w.Version++
	to, err := NextStateOf(w.State, e)
	if err != nil {
		return w
	}
	w.UpdatedAt = e.OccurredAt()
	switch ev := e.(type) {
	case Requested:
		w.ID, w.Account, w.ToAddress, w.Amount = ev.ID, ev.Account, ev.ToAddress, ev.Amount
		w.Asset, w.RequestedBy, w.RequestedAt = ev.Asset, ev.RequestedBy, ev.At
		w.RequiredApprovals, w.Rule, w.PolicyVersion = ev.RequiredApprovals, ev.Rule, ev.PolicyVersion
		w.AtRequest = Requirement{PolicyName: ev.PolicyName, PolicyVersion: ev.PolicyVersion, Rule: ev.Rule, Approvers: ev.RequiredApprovals, AppliedRules: ev.AppliedRules}
		w.AppliedRules, w.WindowSum = ev.AppliedRules, ev.WindowSum
		if as, err := LookupAsset(ev.Asset); err == nil {
			if a, err := ev.Amount.In(as); err == nil {
				w.Amount = a // a decoded amount carries the scale it was written with; pin it
			}
		}
	case ApprovalRecorded:
		w.Approvals = append(slices.Clip(w.Approvals), ev.Approval)
		w.RequiredApprovals, w.Rule, w.PolicyVersion = ev.RequiredApprovals, ev.Approval.Rule, ev.Approval.PolicyVersion
		w.AppliedRules = ev.AppliedRules
	case Approved:
		w.Approvals = append(slices.Clip(w.Approvals), ev.Approval)
		w.RequiredApprovals, w.Rule, w.PolicyVersion = ev.RequiredApprovals, ev.Approval.Rule, ev.Approval.PolicyVersion
		w.AppliedRules = ev.AppliedRules
		w.ApprovedAt = ev.At
		w.Reason = "" // a policy_tightened reason is history once approved again
	case ApprovalsInvalidated:
		inv := ev
		w.Invalidation = &inv
		if len(ev.Discounted) > 0 {
			w.Approvals = slices.DeleteFunc(slices.Clone(w.Approvals), func(a Approval) bool {
				return slices.Contains(ev.Discounted, a.By)
			})
		}
		if ev.RetiredTxID != "" {
			w.Retired = append(slices.Clip(w.Retired), Retired{
				TxID: ev.RetiredTxID, Attempt: w.Attempt, Unsigned: true, Reason: ev.Reason, At: ev.At,
			})
			w.Envelope, w.Signature, w.Sends, w.Acceptance = Envelope{}, "", 0, Acceptance{}
		}
		w.Reason = ev.Reason
		w.RequiredApprovals, w.Rule, w.PolicyVersion = ev.RequiredApprovals, ev.Rule, ev.PolicyVersion
		w.AppliedRules = ev.AppliedRules
		w.ApprovedAt = time.Time{}
		w.Claim = Claim{} // a claim is on a ready withdrawal; this one is no longer ready
	case Rejected:
		w.Reason, w.Detail, w.ResolvedBy = ev.Reason, ev.Detail, ev.By
	case FundsReserved:
		w.Reserved, w.ReservedAt = true, ev.At
	case Claimed:
		w.Claim = Claim{Worker: ev.Worker, LeaseUntil: ev.LeaseUntil, At: ev.At}
	case Routed:
		w.Route = ev.Route
	case SettledInternally:
		w.Claim = Claim{}
	case EnvelopeBuilt:
		if c, ok := ev.claim(); ok {
			w.Claim = Claim{Worker: c.Worker, LeaseUntil: c.LeaseUntil, At: c.At}
		}
		if ev.Route != nil {
			w.Route = *ev.Route
		}
		w.Attempt, w.Envelope = ev.Attempt, ev.Envelope
		w.Signature, w.Sends, w.Acceptance = "", 0, Acceptance{}
	case EnvelopeReplaced:
		w.retire(Retired{
			TxID: ev.RetiredTxID, Attempt: w.Attempt, Unsigned: true, Reason: ev.Reason, ReplacedBy: ev.Envelope.TxID, At: ev.At,
		}, ev.Attempt, ev.Envelope)
	case Signed:
		w.Signature = ev.Signature
		if in, ok := ev.intent(w.Attempt); ok {
			w.Sends = in.Send
		}
	case Broadcasting:
		w.Sends = ev.Send
	case BroadcastAccepted:
		w.Acceptance = Acceptance{Send: ev.Send, Result: ev.Result, At: ev.At}
	case Rebuilt:
		if ev.Receipt != nil {
			w.receipted(*ev.Receipt)
		}
		w.retire(Retired{
			TxID: ev.RetiredTxID, Attempt: w.Attempt, Evidence: ev.Evidence, Receipt: ev.Receipt, ReplacedBy: ev.Envelope.TxID, At: ev.At,
		}, ev.Attempt, ev.Envelope)
	case Confirmed:
		w.Confirmation = Confirmation{TxID: ev.TxID, BlockNumber: ev.BlockNumber, BlockTime: ev.BlockTime, Receipt: ev.Receipt, Fee: ev.Fee, At: ev.At}
		w.receipted(FailureReceipt{BlockNumber: ev.BlockNumber, BlockTime: ev.BlockTime, Result: ev.Receipt, Fee: ev.Fee})
		w.Claim = Claim{}
	case Failed:
		w.Reason, w.Detail = ev.Reason, ev.Detail
		if ev.Receipt != nil {
			w.receipted(*ev.Receipt)
		}
		w.Claim = Claim{}
	}
	w.State = to
	return w
}

// Fold replays a withdrawal stream from its start.
func Fold(events []Event) Withdrawal {
	var w Withdrawal
	for _, e := range events {
		w = Evolve(w, e)
	}
	return w
}

// Audit replays a stream and checks every event against the table and the
// rules Decide enforces on its data (txid = sha256(raw), rebuild evidence,
// distinct non-requester approvals, …). It returns the state folded so far
// and, on the first event that could not have been decided, an error naming
// its position (1-based, as the store's aggregate version).
func Audit(events []Event) (Withdrawal, error) {
	return AuditRecorded(events, nil)
}

// AuditRecorded is Audit for a stream read with the store's record time of
// each event (recordedAt[i] for events[i]; nil or a zero time when not
// known), folded as EvolveRecorded folds them: a claim taken over after
// the server-time bound of an earlier claim (see Claim.Until) is then
// judged on that bound, as the decider judged it.
func AuditRecorded(events []Event, recordedAt []time.Time) (Withdrawal, error) {
	var w Withdrawal
	for i, e := range events {
		if err := checkEvent(w, e); err != nil {
			return w, fmt.Errorf("event %d (%s): %w", i+1, eventType(e), err)
		}
		var t time.Time
		if i < len(recordedAt) {
			t = recordedAt[i]
		}
		w = EvolveRecorded(w, e, t)
	}
	return w, nil
}

// EvolveRecorded is Evolve for an event read from the store with its record
// time (the server's timestamp of the stored message; zero if unknown).
// Only a claim uses it: its lease is bounded by the server's clock, never
// by the claimant's alone (Claim.Until).
func EvolveRecorded(w Withdrawal, e Event, recordedAt time.Time) Withdrawal {
	w = Evolve(w, e)
	if claims(e) && !recordedAt.IsZero() && w.Claim.Worker != "" {
		w.Claim.RecordedAt = recordedAt.UTC()
	}
	return w
}

// claims reports whether e takes or renews a claim (a claimed event, or an
// envelope written ahead together with its claim).
func claims(e Event) bool {
	switch ev := e.(type) {
	case Claimed:
		return true
	case EnvelopeBuilt:
		_, ok := ev.claim()
		return ok
	}
	return false
}

func eventType(e Event) string {
	if e == nil {
		return ""
	}
	return e.EventType()
}

// WithdrawalView is CONTRACT.md's withdrawal JSON (absent values as null),
// plus a few additions the contract allows.
type WithdrawalView struct {
	ID                string     `json:"id"`
	State             State      `json:"state"`
	Version           uint64     `json:"version"`
	Account           string     `json:"account"`
	ToAddress         string     `json:"to_address"`
	Amount            string     `json:"amount"`
	AmountUnits       string     `json:"amount_units"`
	Asset             string     `json:"asset"`
	RequestedBy       string     `json:"requested_by"`
	RequiredApprovals int        `json:"required_approvals"`
	Approvals         []Approval `json:"approvals"`
	Route             Route      `json:"route"`
	TxID              *string    `json:"txid"`
	Attempt           int        `json:"attempt"`
	Reason            *string    `json:"reason"`
	Terminal          bool       `json:"terminal"`
	// ResolvedBy is who cancelled or declined it; Detail a decliner's
	// reason or a failure's detail (null when none).
	ResolvedBy *string `json:"resolved_by"`
	Detail     *string `json:"detail"`

	Reserved     bool       `json:"reserved"`
	RequestedAt  time.Time  `json:"requested_at"`
	ApprovedAt   *time.Time `json:"approved_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	RetiredTxIDs []string   `json:"retired_txids"`
	// Receipts are the chain's receipts of its envelopes, oldest first
	// (failed ones that a rebuild or the failure recorded, then the
	// confirmation's), each with the fee it burnt; FeeBurnedTRX is their
	// total fee, null when none records one.
	Receipts     []ReceiptView `json:"receipts"`
	FeeBurnedTRX *string       `json:"fee_burned_trx"`
	// AppliedRules are the destination and velocity rules counted in
	// required_approvals beside the amount rule (never null); WindowSum the
	// account's sum sent in the 24 h before the request, when measured.
	AppliedRules []AppliedRule `json:"applied_rules"`
	WindowSum    *string       `json:"window_sum"`
}

// ReceiptView is one receipt in WithdrawalView: the fee fields are null
// when the event that recorded the receipt predates fees being recorded.
type ReceiptView struct {
	TxID        string  `json:"txid"`
	Attempt     int     `json:"attempt"`
	Result      string  `json:"result"`
	BlockNumber int64   `json:"block_number"`
	BlockTime   int64   `json:"block_time"`
	FeeSun      *int64  `json:"fee_sun"`
	FeeTRX      *string `json:"fee_trx"`
	EnergyUsed  *int64  `json:"energy_used"`
}

// sunDecimals is TRX's precision: 1 TRX = 10^6 sun.
const sunDecimals = 6

func trxString(sun int64) string { return newAmount(big.NewInt(sun), sunDecimals).String() }

// receiptViews renders the receipts and their total fee.
func receiptViews(rs []ChainReceipt) ([]ReceiptView, *string) {
	out := make([]ReceiptView, 0, len(rs))
	var total int64
	known := false
	for _, r := range rs {
		v := ReceiptView{TxID: r.TxID, Attempt: r.Attempt, Result: r.Result, BlockNumber: r.BlockNumber, BlockTime: r.BlockTime}
		if r.Fee != nil {
			sun, energy, trx := r.Fee.Sun, r.Fee.EnergyUsed, trxString(r.Fee.Sun)
			v.FeeSun, v.EnergyUsed, v.FeeTRX = &sun, &energy, &trx
			total += sun
			known = true
		}
		out = append(out, v)
	}
	if !known {
		return out, nil
	}
	t := trxString(total)
	return out, &t
}

// View renders the withdrawal for the API.
func (w Withdrawal) View() WithdrawalView {
	v := WithdrawalView{
		ID: w.ID, State: w.State, Version: w.Version, Account: w.Account, ToAddress: w.ToAddress,
		Amount: w.Amount.String(), AmountUnits: w.Amount.UnitsString(), Asset: w.Asset,
		RequestedBy: w.RequestedBy, RequiredApprovals: w.RequiredApprovals,
		Approvals: append([]Approval{}, w.Approvals...), Route: w.Route, Attempt: w.Attempt,
		Terminal: w.Terminal(), Reserved: w.Reserved, RequestedAt: w.RequestedAt,
		UpdatedAt: w.UpdatedAt, RetiredTxIDs: w.RetiredTxIDs(),
		AppliedRules: append([]AppliedRule{}, w.AppliedRules...),
	}
	if w.WindowSum != nil {
		s := w.WindowSum.pin().String()
		v.WindowSum = &s
	}
	v.Receipts, v.FeeBurnedTRX = receiptViews(w.Receipts)
	if w.Envelope.TxID != "" {
		txid := w.Envelope.TxID
		v.TxID = &txid
	}
	if w.Reason != "" {
		r := w.Reason
		v.Reason = &r
	}
	if w.ResolvedBy != "" {
		by := w.ResolvedBy
		v.ResolvedBy = &by
	}
	if w.Detail != "" {
		d := w.Detail
		v.Detail = &d
	}
	if !w.ApprovedAt.IsZero() {
		t := w.ApprovedAt
		v.ApprovedAt = &t
	}
	return v
}
