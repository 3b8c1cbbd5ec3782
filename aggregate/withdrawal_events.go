package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Event is an event of a withdrawal stream. Every concrete event is a value
// type in this file, with JSON tags for the log; pass values, not pointers.
type Event interface {
	EventType() string
	OccurredAt() time.Time
	isWithdrawalEvent()
}

// Approval is one approver's consent, recorded with the rule and policy
// version in force when it was given.
type Approval struct {
	By            string    `json:"by"`
	At            time.Time `json:"at"`
	Rule          string    `json:"rule"`
	PolicyVersion int       `json:"policy_version"`
}

// Envelope is one signed-to-be TRON transaction, fixed before signing: its
// txid is sha256 of the raw_data bytes, which is checked, not trusted.
// Times are chain times in milliseconds since the epoch, as on chain.
type Envelope struct {
	TxID         string `json:"txid"`         // 64 lowercase hex digits
	RawDataHex   string `json:"raw_data_hex"` // the exact bytes that are signed and sent
	Expiration   int64  `json:"expiration"`   // ms
	FeeLimit     int64  `json:"fee_limit"`    // sun
	RefBlockNum  int64  `json:"ref_block_num,omitempty"`
	RefBlockHash string `json:"ref_block_hash,omitempty"` // hex
}

// IsZero reports whether no envelope is present.
func (e Envelope) IsZero() bool { return e == Envelope{} }

// maxRawHex bounds raw_data; a TRC-20 transfer is a few hundred bytes.
const maxRawHex = 64 << 10

// normalized returns the envelope with its hex in lower case.
func (e Envelope) normalized() Envelope {
	e.TxID = strings.ToLower(e.TxID)
	e.RawDataHex = strings.ToLower(e.RawDataHex)
	e.RefBlockHash = strings.ToLower(e.RefBlockHash)
	return e
}

// Check validates the envelope, including txid == sha256(raw_data): a txid
// that does not hash from the bytes we hold would make write-ahead recovery
// ask the chain about the wrong transaction.
func (e Envelope) Check() error {
	if len(e.TxID) != 64 || !isHex(e.TxID) {
		return newError(CodeInvalidEnvelope, "envelope.txid", "must be 64 hex digits")
	}
	if e.RawDataHex == "" || len(e.RawDataHex)%2 != 0 || !isHex(e.RawDataHex) {
		return newError(CodeInvalidEnvelope, "envelope.raw_data_hex", "must be non-empty hex of whole bytes")
	}
	if len(e.RawDataHex) > maxRawHex {
		return newError(CodeInvalidEnvelope, "envelope.raw_data_hex", "longer than %d hex digits", maxRawHex)
	}
	raw, _ := hex.DecodeString(e.RawDataHex)
	sum := sha256.Sum256(raw)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), e.TxID) {
		return newError(CodeInvalidEnvelope, "envelope.txid", "is not sha256(raw_data)")
	}
	if e.Expiration <= 0 {
		return newError(CodeInvalidEnvelope, "envelope.expiration", "must be a chain time in ms")
	}
	if e.FeeLimit <= 0 {
		return newError(CodeInvalidEnvelope, "envelope.fee_limit", "must be positive")
	}
	if e.RefBlockNum < 0 {
		return newError(CodeInvalidEnvelope, "envelope.ref_block_num", "negative")
	}
	if e.RefBlockHash != "" && (len(e.RefBlockHash)%2 != 0 || !isHex(e.RefBlockHash)) {
		return newError(CodeInvalidEnvelope, "envelope.ref_block_hash", "must be hex")
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// Rejection reasons (Rejected.Reason).
const (
	ReasonCancelled = "cancelled"
	// ReasonDeclined: an approver declined it while it awaited approval;
	// Rejected.By is the decliner and Rejected.Detail their reason.
	ReasonDeclined          = "declined"
	ReasonInsufficientFunds = "insufficient_funds"
	ReasonDailyLimit        = "daily_limit"
)

// Failure reasons commonly used by the broadcast saga (Failed.Reason is free,
// these are the names we agree on).
const (
	ReasonNodeRejected      = "node_rejected"
	ReasonReverted          = "reverted"
	ReasonOutOfEnergy       = "out_of_energy"
	ReasonAttemptsExhausted = "attempts_exhausted"
)

// Reasons of ApprovalsInvalidated: the policy in force wants more
// approvals, or approvals were discounted because their approvers no longer
// hold the approver role.
const (
	ReasonPolicyTightened = "policy_tightened"
	ReasonApproverRevoked = "approver_revoked"
	// ReasonDestinationNotAllowed: a destination rule of the policy in
	// force refuses the destination.
	ReasonDestinationNotAllowed = CodeDestinationNotAllowed
)

// ReasonSignerChanged is the reason of EnvelopeReplaced when the signer's
// address is no longer the envelope's owner (the hot-wallet key rotated).
const ReasonSignerChanged = "signer_changed"

// ReceiptSuccess is the only receipt result that confirms a payout.
const ReceiptSuccess = "SUCCESS"

// Requested creates the withdrawal. RequiredApprovals, Rule and the policy
// fields are the snapshot of the policy in force at request time.
type Requested struct {
	ID                string `json:"id"`
	Account           string `json:"account"`
	ToAddress         string `json:"to_address"`
	Amount            Amount `json:"amount"`
	Asset             string `json:"asset"`
	RequestedBy       string `json:"requested_by"`
	RequiredApprovals int    `json:"required_approvals"`
	Rule              string `json:"rule"`
	PolicyName        string `json:"policy_name"`
	PolicyVersion     int    `json:"policy_version"`
	// AppliedRules are the destination rules and velocity tier that added
	// to RequiredApprovals (Rule is the amount rule); WindowSum is what the
	// account sent in the VelocityWindow before the request, measured when
	// a velocity tier named the account. Both absent on older events.
	AppliedRules []AppliedRule `json:"applied_rules,omitempty"`
	WindowSum    *Amount       `json:"window_sum,omitempty"`
	At           time.Time     `json:"at"`
}

// ApprovalRecorded adds an approval that is not yet enough. AppliedRules
// are the destination and velocity rules counted in RequiredApprovals.
type ApprovalRecorded struct {
	Approval          Approval      `json:"approval"`
	RequiredApprovals int           `json:"required_approvals"`
	AppliedRules      []AppliedRule `json:"applied_rules,omitempty"`
	At                time.Time     `json:"at"`
}

// Approved adds the approval that makes the count sufficient: requested →
// approved.
type Approved struct {
	Approval          Approval      `json:"approval"`
	RequiredApprovals int           `json:"required_approvals"`
	AppliedRules      []AppliedRule `json:"applied_rules,omitempty"`
	At                time.Time     `json:"at"`
}

// ApprovalsInvalidated records that the approvals given no longer satisfy the
// policy in force (approved → requested). The approvals stay recorded and
// still count: further distinct approvals can satisfy the new rule.
//
// From signing (an envelope built, never signed) the same re-check right
// before signing retires that envelope: RetiredTxID names it, and it can
// never land because it was never signed. Discounted lists the approvers
// whose approvals no longer count because they no longer hold the approver
// role; their approvals are dropped from the withdrawal.
type ApprovalsInvalidated struct {
	Reason            string   `json:"reason"`
	RetiredTxID       string   `json:"retired_txid,omitempty"`
	Discounted        []string `json:"discounted,omitempty"`
	PolicyName        string   `json:"policy_name"`
	PolicyVersion     int      `json:"policy_version"`
	Rule              string   `json:"rule"`
	RequiredApprovals int      `json:"required_approvals"`
	Given             int      `json:"given"`
	// AppliedRules are the destination and velocity rules counted in
	// RequiredApprovals; RefusedBy names the destination rule of the policy
	// in force that refuses the destination (reason
	// destination_not_allowed: no number of approvals suffices then).
	AppliedRules []AppliedRule `json:"applied_rules,omitempty"`
	RefusedBy    string        `json:"refused_by,omitempty"`
	At           time.Time     `json:"at"`
}

// Rejected ends the withdrawal before anything was sent. By is who cancelled
// or declined (empty for a system rejection such as insufficient_funds);
// Detail is a decliner's reason.
type Rejected struct {
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// FundsReserved records that the amount is held on the account (the account
// stream holds the money; this is the withdrawal's receipt of it).
type FundsReserved struct {
	Account string    `json:"account"`
	Amount  Amount    `json:"amount"`
	At      time.Time `json:"at"`
}

// Claimed is a broadcast worker's lease on the withdrawal.
type Claimed struct {
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
	At         time.Time `json:"at"`
}

// Routed records the routing decision.
type Routed struct {
	Route Route     `json:"route"`
	At    time.Time `json:"at"`
}

// SettledInternally is the internal route's outcome: the ledger transfer to
// Account is done (approved → confirmed).
type SettledInternally struct {
	Account       string    `json:"account"`
	Amount        Amount    `json:"amount"`
	PolicyVersion int       `json:"policy_version"`
	At            time.Time `json:"at"`
}

// EnvelopeBuilt is the write-ahead of the first transaction (approved →
// signing): its txid is in the log before it is signed or sent.
//
// It may also carry the broadcast worker's claim and the routing decision
// (Worker, LeaseUntil, Route): a worker that claims, routes and writes
// ahead in one decision appends one event instead of three, fenced at the
// position it read exactly as the three were. Without them (logs written
// before, or a withdrawal already claimed and routed) the claim and route
// are the earlier claimed and routed events.
type EnvelopeBuilt struct {
	Attempt       int       `json:"attempt"`
	Envelope      Envelope  `json:"envelope"`
	PolicyVersion int       `json:"policy_version"`
	Worker        string    `json:"worker,omitempty"`
	LeaseUntil    time.Time `json:"lease_until,omitzero"`
	Route         *Route    `json:"route,omitempty"`
	At            time.Time `json:"at"`
}

// claim is the claim an envelope event carries, if any.
func (e EnvelopeBuilt) claim() (Claimed, bool) {
	if e.Worker == "" {
		return Claimed{}, false
	}
	return Claimed{Worker: e.Worker, LeaseUntil: e.LeaseUntil, At: e.At}, true
}

// Signed records the signature of the current envelope (signing → signed).
// PolicyVersion is the policy in force the approvals were re-checked
// against right before signing.
//
// Send, when 1, makes the same event the intent of the first send of the
// current attempt as well (signing → broadcasting, Sends = 1): a worker
// that signs and sends at once appends one event instead of a signature
// and a broadcasting intent, and the signature and the intent are both in
// the log before the bytes leave, as the two were. Without it (logs
// written before, or a signature not sent at once) the intent is a later
// broadcasting event. It is never anything but 0 or 1: resends are
// broadcasting events.
type Signed struct {
	TxID          string    `json:"txid"`
	Signature     string    `json:"signature"` // 65 bytes r‖s‖v, hex
	PolicyVersion int       `json:"policy_version,omitempty"`
	Send          int       `json:"send,omitempty"`
	At            time.Time `json:"at"`
}

// intent is the broadcasting intent a signature carries, if any.
func (e Signed) intent(attempt int) (Broadcasting, bool) {
	if e.Send == 0 {
		return Broadcasting{}, false
	}
	return Broadcasting{TxID: e.TxID, Attempt: attempt, Send: e.Send, At: e.At}, true
}

// EnvelopeReplaced retires an envelope that was never signed and writes
// ahead a new one (signing → signing), e.g. after the hot wallet's key
// changed: an envelope built for the old owner can never be signed, and
// an unsigned envelope can never land, so no proof of death is needed.
type EnvelopeReplaced struct {
	Attempt     int       `json:"attempt"`
	RetiredTxID string    `json:"retired_txid"`
	Reason      string    `json:"reason"`
	Envelope    Envelope  `json:"envelope"`
	At          time.Time `json:"at"`
}

// Broadcasting is the intent written before every send of the current
// envelope; Send counts sends within the attempt, from 1.
type Broadcasting struct {
	TxID    string    `json:"txid"`
	Attempt int       `json:"attempt"`
	Send    int       `json:"send"`
	At      time.Time `json:"at"`
}

// BroadcastAccepted records that the network has the transaction (the node
// said so, or a lookup by txid found it): broadcasting → broadcast.
type BroadcastAccepted struct {
	TxID    string    `json:"txid"`
	Attempt int       `json:"attempt"`
	Send    int       `json:"send"`
	Result  string    `json:"result"`
	At      time.Time `json:"at"`
}

// Rebuilt retires the current envelope, with its proof, and writes ahead a
// new one (attempt + 1): signed/broadcasting/broadcast → signing. It is the
// only event that retires a signed txid, so no txid is ever retired without
// evidence. The proof is exactly one of: Evidence, the chain-time proof of
// death (the envelope can never be included), or Receipt, the failing
// receipt of the envelope in a solid block (it was included, burnt its fee
// and moved no token; a txid is included at most once). Events written
// before failed receipts were rebuilt always carry Evidence.
type Rebuilt struct {
	Attempt     int             `json:"attempt"`
	RetiredTxID string          `json:"retired_txid"`
	Evidence    Evidence        `json:"evidence,omitzero"`
	Receipt     *FailureReceipt `json:"receipt,omitempty"`
	Envelope    Envelope        `json:"envelope"`
	At          time.Time       `json:"at"`
}

// Confirmed records inclusion in a solid block with a successful receipt
// (broadcast → confirmed, or broadcasting → confirmed: a solid block that
// includes the txid is a stronger word than any acceptance, which a
// worker then need not write). BlockTime is chain time in ms.
//
// Fee is what the transaction burnt, from its receipt (nil in events
// written before it was recorded).
type Confirmed struct {
	TxID        string    `json:"txid"`
	BlockNumber int64     `json:"block_number"`
	BlockTime   int64     `json:"block_time"`
	Receipt     string    `json:"receipt"`
	Fee         *ChainFee `json:"fee,omitempty"`
	At          time.Time `json:"at"`
}

// Failed ends an in-flight withdrawal without payout: a hard node
// rejection, an on-chain revert or out-of-energy, or attempts exhausted with
// proof nothing landed. TxID, when set, is the envelope the failure is about.
// Once the envelope is signed, a failure releases money that might
// otherwise leave, so it carries its proof: Receipt (a failing receipt in a
// solid block) or Evidence (the proof of death of the current envelope).
type Failed struct {
	Reason   string          `json:"reason"`
	TxID     string          `json:"txid,omitempty"`
	Detail   string          `json:"detail,omitempty"`
	Receipt  *FailureReceipt `json:"receipt,omitempty"`
	Evidence *Evidence       `json:"evidence,omitempty"`
	At       time.Time       `json:"at"`
}

func (Requested) EventType() string            { return EventRequested }
func (ApprovalRecorded) EventType() string     { return EventApprovalRecorded }
func (Approved) EventType() string             { return EventApproved }
func (ApprovalsInvalidated) EventType() string { return EventApprovalsInvalidated }
func (Rejected) EventType() string             { return EventRejected }
func (FundsReserved) EventType() string        { return EventFundsReserved }
func (Claimed) EventType() string              { return EventClaimed }
func (Routed) EventType() string               { return EventRouted }
func (SettledInternally) EventType() string    { return EventSettledInternally }
func (EnvelopeBuilt) EventType() string        { return EventEnvelopeBuilt }
func (Signed) EventType() string               { return EventSigned }
func (Broadcasting) EventType() string         { return EventBroadcasting }
func (BroadcastAccepted) EventType() string    { return EventBroadcastAccepted }
func (Rebuilt) EventType() string              { return EventRebuilt }
func (EnvelopeReplaced) EventType() string     { return EventEnvelopeReplaced }
func (Confirmed) EventType() string            { return EventConfirmed }
func (Failed) EventType() string               { return EventFailed }

func (e Requested) OccurredAt() time.Time            { return e.At }
func (e ApprovalRecorded) OccurredAt() time.Time     { return e.At }
func (e Approved) OccurredAt() time.Time             { return e.At }
func (e ApprovalsInvalidated) OccurredAt() time.Time { return e.At }
func (e Rejected) OccurredAt() time.Time             { return e.At }
func (e FundsReserved) OccurredAt() time.Time        { return e.At }
func (e Claimed) OccurredAt() time.Time              { return e.At }
func (e Routed) OccurredAt() time.Time               { return e.At }
func (e SettledInternally) OccurredAt() time.Time    { return e.At }
func (e EnvelopeBuilt) OccurredAt() time.Time        { return e.At }
func (e Signed) OccurredAt() time.Time               { return e.At }
func (e Broadcasting) OccurredAt() time.Time         { return e.At }
func (e BroadcastAccepted) OccurredAt() time.Time    { return e.At }
func (e Rebuilt) OccurredAt() time.Time              { return e.At }
func (e EnvelopeReplaced) OccurredAt() time.Time     { return e.At }
func (e Confirmed) OccurredAt() time.Time            { return e.At }
func (e Failed) OccurredAt() time.Time               { return e.At }

func (Requested) isWithdrawalEvent()            {}
func (ApprovalRecorded) isWithdrawalEvent()     {}
func (Approved) isWithdrawalEvent()             {}
func (ApprovalsInvalidated) isWithdrawalEvent() {}
func (Rejected) isWithdrawalEvent()             {}
func (FundsReserved) isWithdrawalEvent()        {}
func (Claimed) isWithdrawalEvent()              {}
func (Routed) isWithdrawalEvent()               {}
func (SettledInternally) isWithdrawalEvent()    {}
func (EnvelopeBuilt) isWithdrawalEvent()        {}
func (Signed) isWithdrawalEvent()               {}
func (Broadcasting) isWithdrawalEvent()         {}
func (BroadcastAccepted) isWithdrawalEvent()    {}
func (Rebuilt) isWithdrawalEvent()              {}
func (EnvelopeReplaced) isWithdrawalEvent()     {}
func (Confirmed) isWithdrawalEvent()            {}
func (Failed) isWithdrawalEvent()               {}
