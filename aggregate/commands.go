package aggregate

import (
	"time"
)

// Withdrawal commands: what can be asked of a withdrawal, one type per
// step. Deciding them is in decide*.go; the invariants in rules.go.

// Command is something asked of a withdrawal. Every command carries the time
// it is decided at (from the caller's clock, or chain time where the chain is
// the authority); Decide never reads a clock.
type Command interface{ isWithdrawalCommand() }

// RequestWithdrawal creates the withdrawal. ID is the client's operation_id;
// ToAddress must already have been validated for its rail by the caller
// (aggregate only checks it is a plausible token). An empty Asset means
// USDT-TRC20. Policy is the policy in force: its requirement for the amount
// is snapshotted into the withdrawal.
type RequestWithdrawal struct {
	ID          string
	Account     string
	ToAddress   string
	Amount      Amount
	Asset       string
	RequestedBy string
	Policy      Policy
	// WindowSum is what the account sent (reserved, not released) in the
	// VelocityWindow before At; the caller measures it when a velocity tier
	// of Policy names the account (nil otherwise).
	WindowSum *Amount
	At        time.Time
}

// Approve is an approver's consent; By is the authenticated principal, never
// a body field. Policy is the policy in force now.
type Approve struct {
	By     string
	Policy Policy
	At     time.Time
}

// RecheckApprovals is the pre-send re-check against the policy in force. It
// emits ApprovalsInvalidated (approved → requested) when the approvals no
// longer suffice, and nothing when they do.
//
// It also runs in signing, right before the envelope is signed: there it
// retires the unsigned envelope back to requested. Revoked names the
// principals who no longer hold the approver role (from the principals in
// force); their approvals no longer count and are discounted.
type RecheckApprovals struct {
	Policy  Policy
	Revoked []string
	At      time.Time
}

// Cancel is a cancellation by the requester or an operator (the transport
// checks who may; the decider records By).
type Cancel struct {
	By string
	At time.Time
}

// Decline is an approver's refusal of a withdrawal awaiting approval
// (state requested), with the reason they give. It ends the withdrawal as
// Rejected{Reason: ReasonDeclined, By, Detail: Reason}: every reader of a
// rejection (the ledger's release, the projections, the audit) handles it
// as any other, so a decline needs no second path to drift.
type Decline struct {
	By     string
	Reason string
	At     time.Time
}

// Reject is a rejection by the system (ReasonInsufficientFunds,
// ReasonDailyLimit, …). Cancellations use Cancel.
type Reject struct {
	Reason string
	Detail string
	At     time.Time
}

// RecordReservation records on the withdrawal that its amount is now held on
// the account (the account decider's Reserve succeeded).
type RecordReservation struct {
	At time.Time
}

// ClaimWithdrawal takes or renews a broadcast worker's lease. Another
// worker's unexpired lease (as of At) refuses it with claim_held.
type ClaimWithdrawal struct {
	Worker     string
	LeaseUntil time.Time
	At         time.Time
}

// ChooseRoute records the routing decision.
type ChooseRoute struct {
	Route Route
	At    time.Time
}

// SettleInternally records that the ledger transfer of an internal route is
// done (approved → confirmed). Policy is the policy in force: approvals are
// re-checked against it before money moves.
//
// Revoked names approvers who no longer hold the role: their approvals do
// not count.
type SettleInternally struct {
	Policy  Policy
	Revoked []string
	At      time.Time
}

// BuildEnvelope writes ahead the first transaction (approved → signing).
// Policy is the policy in force: approvals are re-checked against it.
//
// Worker and LeaseUntil, when set, claim the withdrawal in the same event
// (as ClaimWithdrawal would: another worker's live lease refuses it with
// claim_held), and Route, when set, routes it (it must be external and the
// withdrawal not routed yet): one append for what were three.
type BuildEnvelope struct {
	Envelope   Envelope
	Policy     Policy
	Worker     string
	LeaseUntil time.Time
	Route      Route
	At         time.Time
}

// RecordSignature records the signature of the current envelope. Policy
// is the policy in force right before signing and Revoked the approvers who
// no longer hold the role: the approvals are re-checked against both, and
// a signature is refused (approvals_insufficient) when they fall short.
//
// Send, when 1, records in the same event the intent of the first send of
// the current attempt (signing → broadcasting), as RecordBroadcastIntent
// would: one append for what were two. 0 records the signature alone;
// any other value is refused (later sends are RecordBroadcastIntent).
type RecordSignature struct {
	TxID      string
	Signature string // 65 bytes r‖s‖v in hex; v is 0/1 (27/28 accepted)
	Policy    Policy
	Revoked   []string
	Send      int
	At        time.Time
}

// ReplaceUnsigned retires the current envelope, never signed, and writes
// ahead a new one (e.g. for a rotated signing key; Reason says why).
type ReplaceUnsigned struct {
	RetiredTxID string
	Reason      string
	Envelope    Envelope
	At          time.Time
}

// RecordBroadcastIntent is written before each send; Send numbers the sends
// of the current attempt from 1.
type RecordBroadcastIntent struct {
	TxID string
	Send int
	At   time.Time
}

// RecordAccepted records that the network has the transaction.
type RecordAccepted struct {
	TxID   string
	Send   int
	Result string
	At     time.Time
}

// Rebuild retires the current envelope with its proof and writes ahead a
// new one. The proof is exactly one of Evidence (the chain-time proof of
// death) and Receipt (the envelope's failing receipt in a solid block,
// verified on the chain by the caller: a txid is included at most once,
// so a failed one can never pay).
type Rebuild struct {
	RetiredTxID string
	Evidence    Evidence
	Receipt     *FailureReceipt
	Envelope    Envelope
	At          time.Time
}

// Confirm records inclusion in a solid block with receipt SUCCESS. Other
// receipts (REVERT, OUT_OF_ENERGY) are a Fail with that reason.
//
// Fee, when known, is what the transaction burnt.
type Confirm struct {
	TxID        string
	BlockNumber int64
	BlockTime   int64
	Receipt     string
	Fee         *ChainFee
	At          time.Time
}

// Fail ends an in-flight withdrawal without payout. Once the current
// envelope is signed, exactly one proof is required: Receipt (the failing
// receipt, whose result must name Reason) or Evidence (the proof of death
// of the current envelope, as for a rebuild).
type Fail struct {
	Reason   string
	TxID     string // optional: if set, must be the current envelope's
	Detail   string
	Receipt  *FailureReceipt
	Evidence *Evidence
	At       time.Time
}

func (RequestWithdrawal) isWithdrawalCommand()     {}
func (Approve) isWithdrawalCommand()               {}
func (RecheckApprovals) isWithdrawalCommand()      {}
func (Cancel) isWithdrawalCommand()                {}
func (Reject) isWithdrawalCommand()                {}
func (Decline) isWithdrawalCommand()               {}
func (RecordReservation) isWithdrawalCommand()     {}
func (ClaimWithdrawal) isWithdrawalCommand()       {}
func (ChooseRoute) isWithdrawalCommand()           {}
func (SettleInternally) isWithdrawalCommand()      {}
func (BuildEnvelope) isWithdrawalCommand()         {}
func (RecordSignature) isWithdrawalCommand()       {}
func (RecordBroadcastIntent) isWithdrawalCommand() {}
func (RecordAccepted) isWithdrawalCommand()        {}
func (Rebuild) isWithdrawalCommand()               {}
func (ReplaceUnsigned) isWithdrawalCommand()       {}
func (Confirm) isWithdrawalCommand()               {}
func (Fail) isWithdrawalCommand()                  {}
