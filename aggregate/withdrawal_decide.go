package aggregate

import (
	"strings"
	"time"
)

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
	At          time.Time
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
type RecheckApprovals struct {
	Policy Policy
	At     time.Time
}

// Cancel is a cancellation by the requester or an operator (the transport
// checks who may; the decider records By).
type Cancel struct {
	By string
	At time.Time
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
type SettleInternally struct {
	Policy Policy
	At     time.Time
}

// BuildEnvelope writes ahead the first transaction (approved → signing).
// Policy is the policy in force: approvals are re-checked against it.
type BuildEnvelope struct {
	Envelope Envelope
	Policy   Policy
	At       time.Time
}

// RecordSignature records the signature of the current envelope.
type RecordSignature struct {
	TxID      string
	Signature string // 65 bytes r‖s‖v in hex; v is 0/1 (27/28 accepted)
	At        time.Time
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

// Rebuild retires the current envelope with its proof of death and writes
// ahead a new one.
type Rebuild struct {
	RetiredTxID string
	Evidence    Evidence
	Envelope    Envelope
	At          time.Time
}

// Confirm records inclusion in a solid block with receipt SUCCESS. Other
// receipts (REVERT, OUT_OF_ENERGY) are a Fail with that reason.
type Confirm struct {
	TxID        string
	BlockNumber int64
	BlockTime   int64
	Receipt     string
	At          time.Time
}

// Fail ends an in-flight withdrawal without payout.
type Fail struct {
	Reason string
	TxID   string // optional: if set, must be the current envelope's
	Detail string
	At     time.Time
}

func (RequestWithdrawal) isWithdrawalCommand()     {}
func (Approve) isWithdrawalCommand()               {}
func (RecheckApprovals) isWithdrawalCommand()      {}
func (Cancel) isWithdrawalCommand()                {}
func (Reject) isWithdrawalCommand()                {}
func (RecordReservation) isWithdrawalCommand()     {}
func (ClaimWithdrawal) isWithdrawalCommand()       {}
func (ChooseRoute) isWithdrawalCommand()           {}
func (SettleInternally) isWithdrawalCommand()      {}
func (BuildEnvelope) isWithdrawalCommand()         {}
func (RecordSignature) isWithdrawalCommand()       {}
func (RecordBroadcastIntent) isWithdrawalCommand() {}
func (RecordAccepted) isWithdrawalCommand()        {}
func (Rebuild) isWithdrawalCommand()               {}
func (Confirm) isWithdrawalCommand()               {}
func (Fail) isWithdrawalCommand()                  {}

// Decide returns the events command c causes on withdrawal w: exactly one
// event, or none when c's outcome is already recorded (a replay), or a
// typed *Error. w is not modified. Timestamps are not part of what makes a
// replay: the same step decided again later with the same data is still a
// replay; the same step with different data is refused, never recorded over.
func Decide(w Withdrawal, c Command) ([]Event, error) {
	e, err := decide(w, c)
	if err != nil || e == nil {
		return nil, err
	}
	if err := checkEvent(w, e); err != nil {
		return nil, err
	}
	return []Event{e}, nil
}

func decide(w Withdrawal, c Command) (Event, error) {
	switch c := c.(type) {
	case RequestWithdrawal:
		return decideRequest(w, c)
	case Approve:
		return decideApprove(w, c)
	case RecheckApprovals:
		return decideRecheck(w, c)
	case Cancel:
		return decideCancel(w, c)
	case Reject:
		return decideReject(w, c)
	case RecordReservation:
		return decideReservation(w, c)
	case ClaimWithdrawal:
		return decideClaim(w, c)
	case ChooseRoute:
		return decideRoute(w, c)
	case SettleInternally:
		return decideSettleInternally(w, c)
	case BuildEnvelope:
		return decideBuildEnvelope(w, c)
	case RecordSignature:
		return decideSignature(w, c)
	case RecordBroadcastIntent:
		return decideIntent(w, c)
	case RecordAccepted:
		return decideAccepted(w, c)
	case Rebuild:
		return decideRebuild(w, c)
	case Confirm:
		return decideConfirm(w, c)
	case Fail:
		return decideFail(w, c)
	}
	return nil, newError(CodeInvalidCommand, "", "unknown command %T", c)
}

func decideRequest(w Withdrawal, c RequestWithdrawal) (Event, error) {
	id, err := ParseOperationID(c.ID)
	if err != nil {
		return nil, err
	}
	if err := ValidateAccountID(c.Account); err != nil {
		return nil, err
	}
	if err := checkAddress(c.ToAddress); err != nil {
		return nil, err
	}
	code := c.Asset
	if code == "" {
		code = USDT.Code
	}
	as, err := LookupAsset(code)
	if err != nil {
		return nil, err
	}
	amount, err := as.admit("amount", c.Amount)
	if err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "requested_by", c.RequestedBy); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if w.Exists() {
		// A second create on the same operation id is a replay only if it
		// means the same thing — including who asked.
		if w.ID == id && w.Account == c.Account && w.ToAddress == c.ToAddress &&
			w.Amount.Equal(amount) && w.Asset == as.Code && w.RequestedBy == c.RequestedBy {
			return nil, nil
		}
		return nil, newError(CodeIdempotencyConflict, "operation_id", "operation %s already exists with a different request", id)
	}
	rule := c.Policy.RuleFor(amount)
	return Requested{
		ID: id, Account: c.Account, ToAddress: c.ToAddress, Amount: amount, Asset: as.Code,
		RequestedBy: c.RequestedBy, RequiredApprovals: rule.Approvers, Rule: rule.Name,
		PolicyName: c.Policy.Name, PolicyVersion: c.Policy.Version, At: at,
	}, nil
}

// checkAddress is only a plausibility check; the rail (tron/) validates the
// address for real before the command is built.
func checkAddress(s string) error {
	if s == "" {
		return newError(CodeInvalidAddress, "to_address", "required")
	}
	if len(s) > maxTokenLen {
		return newError(CodeInvalidAddress, "to_address", "longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return newError(CodeInvalidAddress, "to_address", "only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

func decideApprove(w Withdrawal, c Approve) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.Exists() && c.By == w.RequestedBy {
		return nil, newError(CodeSelfApproval, "", "%s requested this withdrawal and cannot approve it", c.By)
	}
	if w.HasApproval(c.By) {
		return nil, nil // the same approver twice counts once
	}
	if err := CheckTransition(w.State, EventApproved); err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	rule := c.Policy.RuleFor(w.Amount)
	ap := Approval{By: c.By, At: at, Rule: rule.Name, PolicyVersion: c.Policy.Version}
	if len(w.Approvals)+1 >= rule.Approvers {
		return Approved{Approval: ap, RequiredApprovals: rule.Approvers, At: at}, nil
	}
	return ApprovalRecorded{Approval: ap, RequiredApprovals: rule.Approvers, At: at}, nil
}

func decideRecheck(w Withdrawal, c RecheckApprovals) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if w.State == StateRequested && w.Invalidation != nil && w.Invalidation.PolicyVersion == c.Policy.Version &&
		w.Invalidation.PolicyName == c.Policy.Name {
		return nil, nil // this policy version already sent it back
	}
	if err := CheckTransition(w.State, EventApprovalsInvalidated); err != nil {
		return nil, err
	}
	if EnsureApproved(w, c.Policy) == nil {
		return nil, nil
	}
	rule := c.Policy.RuleFor(w.Amount)
	return ApprovalsInvalidated{
		Reason: ReasonPolicyTightened, PolicyName: c.Policy.Name, PolicyVersion: c.Policy.Version,
		Rule: rule.Name, RequiredApprovals: rule.Approvers, Given: len(w.Approvals), At: at,
	}, nil
}

func decideCancel(w Withdrawal, c Cancel) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.State == StateRejected && w.Reason == ReasonCancelled {
		return nil, nil // already cancelled, whoever did it
	}
	if !w.Exists() {
		return nil, newError(CodeInvalidTransition, "", "no such withdrawal")
	}
	if !w.State.IsCancellable() {
		return nil, newError(CodeNotCancellable, "", "a withdrawal in state %s can no longer be cancelled", w.State)
	}
	return Rejected{Reason: ReasonCancelled, By: c.By, At: at}, nil
}

func decideReject(w Withdrawal, c Reject) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "reason", c.Reason); err != nil {
		return nil, err
	}
	if c.Reason == ReasonCancelled {
		return nil, newError(CodeInvalidCommand, "reason", "a cancellation is a Cancel, which records who cancelled")
	}
	if err := checkText("detail", c.Detail); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.State == StateRejected {
		if w.Reason == c.Reason {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "", "already rejected (%s)", w.Reason)
	}
	return Rejected{Reason: c.Reason, Detail: c.Detail, At: at}, nil
}

func decideReservation(w Withdrawal, c RecordReservation) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.Reserved {
		return nil, nil
	}
	return FundsReserved{Account: w.Account, Amount: w.Amount, At: at}, nil
}

func decideClaim(w Withdrawal, c ClaimWithdrawal) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "worker", c.Worker); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if !c.LeaseUntil.After(at) {
		return nil, newError(CodeInvalidCommand, "lease_until", "must be after at")
	}
	if err := CheckTransition(w.State, EventClaimed); err != nil {
		return nil, err
	}
	if w.Claim.Worker == c.Worker && w.Claim.LeaseUntil.Equal(c.LeaseUntil) {
		return nil, nil
	}
	return Claimed{Worker: c.Worker, LeaseUntil: c.LeaseUntil.UTC(), At: at}, nil
}

func decideRoute(w Withdrawal, c ChooseRoute) (Event, error) {
	if c.Route.IsZero() {
		return nil, newError(CodeInvalidRoute, "route", "required")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if !w.Route.IsZero() {
		if w.Route.Equal(c.Route) {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "route", "already routed %s (%s)", w.Route.Rail(), w.Route.Reason())
	}
	return Routed{Route: c.Route, At: at}, nil
}

func decideSettleInternally(w Withdrawal, c SettleInternally) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if w.State == StateConfirmed && w.Route.IsInternal() {
		return nil, nil
	}
	if err := CheckTransition(w.State, EventSettledInternally); err != nil {
		return nil, err
	}
	if err := EnsureApproved(w, c.Policy); err != nil {
		return nil, err
	}
	return SettledInternally{Account: w.Route.Account(), Amount: w.Amount, PolicyVersion: c.Policy.Version, At: at}, nil
}

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
	if w.Attempt > 0 {
		switch {
		case env == w.Envelope:
			return nil, nil
		case w.isRetired(env.TxID):
			return nil, newError(CodeInvalidTransition, "envelope.txid", "txid %s was retired", env.TxID)
		}
		return nil, newError(CodeInvalidTransition, "envelope", "an envelope is already recorded (attempt %d, txid %s)", w.Attempt, w.Envelope.TxID)
	}
	if err := CheckTransition(w.State, EventEnvelopeBuilt); err != nil {
		return nil, err
	}
	if err := EnsureApproved(w, c.Policy); err != nil {
		return nil, err
	}
	return EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: c.Policy.Version, At: at}, nil
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
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := currentTxID(w, txid); err != nil {
		return nil, err
	}
	if w.Signature != "" {
		if w.Signature == sig {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "signature", "txid %s already has a different signature", txid)
	}
	return Signed{TxID: txid, Signature: sig, At: at}, nil
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
	if err := env.Check(); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	for _, r := range w.Retired {
		if r.TxID != retired {
			continue
		}
		if r.ReplacedBy == env.TxID && r.Evidence == c.Evidence && (env.TxID != w.Envelope.TxID || env == w.Envelope) {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "retired_txid", "txid %s was already retired, replaced by %s", retired, r.ReplacedBy)
	}
	if err := CheckTransition(w.State, EventRebuilt); err != nil {
		return nil, err
	}
	if retired != w.Envelope.TxID {
		return nil, newError(CodeInvalidTransition, "retired_txid", "only the current envelope (%s) can be retired", w.Envelope.TxID)
	}
	return Rebuilt{Attempt: w.Attempt + 1, RetiredTxID: retired, Evidence: c.Evidence, Envelope: env, At: at}, nil
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
		if cf.TxID == txid && cf.BlockNumber == c.BlockNumber && cf.BlockTime == c.BlockTime && cf.Receipt == c.Receipt {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "", "already confirmed in block %d", cf.BlockNumber)
	}
	return Confirmed{TxID: txid, BlockNumber: c.BlockNumber, BlockTime: c.BlockTime, Receipt: c.Receipt, At: at}, nil
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
	return Failed{Reason: c.Reason, TxID: w.Envelope.TxID, Detail: c.Detail, At: at}, nil
}

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
	if err := CheckTransition(w.State, e.EventType()); err != nil {
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
	case ApprovalRecorded:
		if err := checkApproval(w, ev.Approval, ev.RequiredApprovals); err != nil {
			return err
		}
		if len(w.Approvals)+1 >= ev.RequiredApprovals {
			return newError(CodeInvalidEvent, "required_approvals", "this approval is sufficient: it is an %s", EventApproved)
		}
	case Approved:
		if err := checkApproval(w, ev.Approval, ev.RequiredApprovals); err != nil {
			return err
		}
		if len(w.Approvals)+1 < ev.RequiredApprovals {
			return newError(CodeApprovalsInsufficient, "", "%d approvals given, %d required", len(w.Approvals)+1, ev.RequiredApprovals)
		}
	case ApprovalsInvalidated:
		if ev.Reason == "" {
			return newError(CodeInvalidEvent, "reason", "required")
		}
		if len(w.Approvals) >= ev.RequiredApprovals {
			return newError(CodeInvalidEvent, "required_approvals", "the approvals given (%d) still suffice", len(w.Approvals))
		}
	case Rejected:
		if err := checkToken(CodeInvalidEvent, "reason", ev.Reason); err != nil {
			return err
		}
		if ev.Reason == ReasonCancelled && ev.By == "" {
			return newError(CodeInvalidEvent, "by", "a cancellation records who cancelled")
		}
	case FundsReserved:
		if w.Reserved {
			return newError(CodeInvalidTransition, "", "already reserved")
		}
		if ev.Account != w.Account || !ev.Amount.Equal(w.Amount) {
			return newError(CodeInvalidEvent, "amount", "the reservation must be of the withdrawal's amount on its account")
		}
	case Claimed:
		if err := checkToken(CodeInvalidEvent, "worker", ev.Worker); err != nil {
			return err
		}
		if !ev.LeaseUntil.After(ev.At) {
			return newError(CodeInvalidEvent, "lease_until", "must be after at")
		}
		if w.Claim.Worker != ev.Worker && w.Claim.HeldAt(ev.At) {
			return newError(CodeClaimHeld, "", "claimed by %s until %s", w.Claim.Worker, w.Claim.LeaseUntil.Format(time.RFC3339Nano))
		}
	case Routed:
		if ev.Route.IsZero() {
			return newError(CodeInvalidRoute, "route", "required")
		}
		if !w.Route.IsZero() {
			return newError(CodeInvalidTransition, "route", "already routed")
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
		if ev.Attempt != 1 || w.Attempt != 0 {
			return newError(CodeInvalidTransition, "attempt", "the first envelope is attempt 1; later ones are rebuilds")
		}
		if err := ev.Envelope.Check(); err != nil {
			return err
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
	case Broadcasting:
		if ev.TxID != w.Envelope.TxID || ev.Attempt != w.Attempt {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if w.Signature == "" {
			return newError(CodeInvalidTransition, "", "not signed")
		}
		if ev.Send != w.Sends+1 {
			return newError(CodeInvalidTransition, "send", "send %d after send %d", ev.Send, w.Sends)
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
		if err := ev.Evidence.Proves(w.Envelope.Expiration); err != nil {
			return err
		}
		if err := ev.Envelope.Check(); err != nil {
			return err
		}
		if w.KnowsTxID(ev.Envelope.TxID) {
			return newError(CodeInvalidEnvelope, "envelope.txid", "txid %s was already used", ev.Envelope.TxID)
		}
		if ev.Envelope.Expiration <= ev.Evidence.SolidBlockTime {
			return newError(CodeInvalidEnvelope, "envelope.expiration", "the new envelope is already expired at the proof's chain time")
		}
	case Confirmed:
		if ev.TxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
		if ev.Receipt != ReceiptSuccess || ev.BlockNumber <= 0 {
			return newError(CodeInvalidEvent, "receipt", "a confirmation is a SUCCESS receipt in a block")
		}
	case Failed:
		if err := checkToken(CodeInvalidEvent, "reason", ev.Reason); err != nil {
			return err
		}
		if ev.TxID != "" && ev.TxID != w.Envelope.TxID {
			return newError(CodeInvalidTransition, "txid", "not the current envelope")
		}
	default:
		return newError(CodeUnknownEvent, "", "unknown event value %T (events are passed as values)", e)
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
