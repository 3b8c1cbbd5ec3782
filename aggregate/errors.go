package aggregate

import (
	"errors"
	"fmt"
)

// Error is the one error type of the domain. Code is stable and is what the
// transports map to HTTP statuses and NATS error codes; Field names the input
// at fault when there is one; Message is for humans and may change.
type Error struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	switch {
	case e.Field != "" && e.Message != "":
		return e.Code + ": " + e.Field + ": " + e.Message
	case e.Message != "":
		return e.Code + ": " + e.Message
	case e.Field != "":
		return e.Code + ": " + e.Field
	}
	return e.Code
}

// Is matches any *Error with the same code, so callers can write
// errors.Is(err, aggregate.ErrInvalidTransition) whatever the field and message.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) || t == nil {
		return false
	}
	return t.Code == e.Code
}

// Error codes. Where a code is part of CONTRACT.md its string value is the
// contract's, so transports can pass it through unchanged.
const (
	CodeInvalidAmount         = "invalid_amount"
	CodeInvalidAccount        = "invalid_account"
	CodeInvalidOperationID    = "invalid_operation_id"
	CodeInvalidAddress        = "invalid_address"
	CodeUnsupportedAsset      = "unsupported_asset"
	CodeInvalidTransition     = "invalid_transition"
	CodeSelfApproval          = "self_approval"
	CodeNotCancellable        = "not_cancellable"
	CodeInvalidPolicy         = "invalid_policy"
	CodeInsufficientFunds     = "insufficient_funds"
	CodeDailyLimit            = "daily_limit"
	CodeApprovalsInsufficient = "approvals_insufficient"
	CodeIdempotencyConflict   = "idempotency_conflict"
	CodeInvalidRoute          = "invalid_route"
	CodeInvalidCommand        = "invalid_command"
	CodeInvalidEnvelope       = "invalid_envelope"
	CodeInvalidEvidence       = "invalid_evidence"
	CodeFundsNotReserved      = "funds_not_reserved"
	CodeClaimHeld             = "claim_held"
	CodeNoReservation         = "no_reservation"
	CodeUnknownEvent          = "unknown_event"
	CodeInvalidEvent          = "invalid_event"
	// CodeDestinationNotAllowed: a destination rule of the policy refuses
	// the withdrawal's to_address for its account.
	CodeDestinationNotAllowed = "destination_not_allowed"
	// CodeInvariant is reported by CheckInvariants; it never comes out of
	// a decider, whose events preserve the invariants.
	CodeInvariant = "invariant_violated"
)

// Sentinels for errors.Is. They carry only a code; errors returned by this
// package carry the same code plus a field and a message.
var (
	ErrInvalidAmount         = &Error{Code: CodeInvalidAmount}
	ErrInvalidAccount        = &Error{Code: CodeInvalidAccount}
	ErrInvalidOperationID    = &Error{Code: CodeInvalidOperationID}
	ErrInvalidAddress        = &Error{Code: CodeInvalidAddress}
	ErrUnsupportedAsset      = &Error{Code: CodeUnsupportedAsset}
	ErrInvalidTransition     = &Error{Code: CodeInvalidTransition}
	ErrSelfApproval          = &Error{Code: CodeSelfApproval}
	ErrNotCancellable        = &Error{Code: CodeNotCancellable}
	ErrInvalidPolicy         = &Error{Code: CodeInvalidPolicy}
	ErrInsufficientFunds     = &Error{Code: CodeInsufficientFunds}
	ErrDailyLimit            = &Error{Code: CodeDailyLimit}
	ErrApprovalsInsufficient = &Error{Code: CodeApprovalsInsufficient}
	ErrIdempotencyConflict   = &Error{Code: CodeIdempotencyConflict}
	ErrInvalidRoute          = &Error{Code: CodeInvalidRoute}
	ErrInvalidCommand        = &Error{Code: CodeInvalidCommand}
	ErrInvalidEnvelope       = &Error{Code: CodeInvalidEnvelope}
	ErrInvalidEvidence       = &Error{Code: CodeInvalidEvidence}
	ErrFundsNotReserved      = &Error{Code: CodeFundsNotReserved}
	ErrClaimHeld             = &Error{Code: CodeClaimHeld}
	ErrNoReservation         = &Error{Code: CodeNoReservation}
	ErrUnknownEvent          = &Error{Code: CodeUnknownEvent}
	ErrInvalidEvent          = &Error{Code: CodeInvalidEvent}
	ErrDestinationNotAllowed = &Error{Code: CodeDestinationNotAllowed}
)

// CodeOf returns the code of the first *Error in err's chain, or "" if there
// is none (an error from outside the domain).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func newError(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}
