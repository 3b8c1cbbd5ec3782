package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/webhook"
)

// Error codes the transports raise themselves (the domain's are the
// aggregate.Code* constants, passed through unchanged).
const (
	CodeUnauthenticated      = "unauthenticated"
	CodeForbidden            = sagas.CodeForbidden
	CodeNotFound             = sagas.CodeNotFound
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeMalformedJSON        = "malformed_json"
	CodeTooLarge             = "too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"    // the principal exceeds its request rate; Retry-After says when to retry
	CodeReplyTooLarge        = "reply_too_large" // a NATS reply would exceed the server's max payload: page
	CodeUnavailable          = sagas.CodeUnavailable
	CodeInternal             = "internal"
)

// MaxBodyBytes bounds a request body on both transports (413 too_large).
const MaxBodyBytes = 64 << 10

// StatusTable maps every error code a client can see to its HTTP status. It
// is the one mapping: the HTTP handler answers with the status, the NATS
// service sends it as the micro error code. A domain error whose code is
// not in the table is a bug: it is logged and answered as 500 internal.
var StatusTable = map[string]int{
	// the request itself
	CodeMalformedJSON:          http.StatusBadRequest,            // 400
	CodeUnauthenticated:        http.StatusUnauthorized,          // 401
	CodeForbidden:              http.StatusForbidden,             // 403
	aggregate.CodeSelfApproval: http.StatusForbidden,             // 403
	CodeNotFound:               http.StatusNotFound,              // 404
	CodeMethodNotAllowed:       http.StatusMethodNotAllowed,      // 405
	CodeTooLarge:               http.StatusRequestEntityTooLarge, // 413
	CodeUnsupportedMediaType:   http.StatusUnsupportedMediaType,  // 415
	CodeRateLimited:            http.StatusTooManyRequests,       // 429
	CodeReplyTooLarge:          http.StatusRequestEntityTooLarge, // 413

	// input the domain refuses: 422
	aggregate.CodeInvalidOperationID:    http.StatusUnprocessableEntity,
	aggregate.CodeInvalidAmount:         http.StatusUnprocessableEntity,
	aggregate.CodeInvalidAddress:        http.StatusUnprocessableEntity,
	aggregate.CodeUnsupportedAsset:      http.StatusUnprocessableEntity,
	aggregate.CodeInvalidAccount:        http.StatusUnprocessableEntity,
	aggregate.CodeInvalidPolicy:         http.StatusUnprocessableEntity,
	aggregate.CodeInvalidCommand:        http.StatusUnprocessableEntity,
	aggregate.CodeInvalidRoute:          http.StatusUnprocessableEntity,
	aggregate.CodeInvalidEnvelope:       http.StatusUnprocessableEntity,
	aggregate.CodeInvalidEvidence:       http.StatusUnprocessableEntity,
	aggregate.CodeDestinationNotAllowed: http.StatusUnprocessableEntity, // a destination rule of the policy refuses to_address
	webhook.CodeInvalidURL:              http.StatusUnprocessableEntity,

	// the state the command meets refuses it: 409
	aggregate.CodeIdempotencyConflict:   http.StatusConflict,
	aggregate.CodeInvalidTransition:     http.StatusConflict,
	aggregate.CodeNotCancellable:        http.StatusConflict,
	aggregate.CodeApprovalsInsufficient: http.StatusConflict,
	aggregate.CodeInsufficientFunds:     http.StatusConflict,
	aggregate.CodeDailyLimit:            http.StatusConflict,
	aggregate.CodeFundsNotReserved:      http.StatusConflict,
	aggregate.CodeClaimHeld:             http.StatusConflict,
	aggregate.CodeNoReservation:         http.StatusConflict,
	sagas.CodeIntegrityViolation:        http.StatusConflict, // the aggregate's log failed verification

	// ours, not the caller's
	CodeInternal:    http.StatusInternalServerError, // 500
	CodeUnavailable: http.StatusServiceUnavailable,  // 503
}

// StatusOf returns the HTTP status of an error code (500 for a code not in
// StatusTable).
func StatusOf(code string) int {
	if st, ok := StatusTable[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// internalCodes are domain codes that describe broken stored data, never a
// caller's mistake: they are logged and answered as 500 internal.
var internalCodes = map[string]bool{
	aggregate.CodeUnknownEvent: true,
	aggregate.CodeInvalidEvent: true,
	aggregate.CodeInvariant:    true,
}

// ErrorBody is the error document of both transports:
// {"error":{"code","message","field"}} (field omitted when none).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// apiError is an error the transport raises itself (auth, decoding, size).
func apiError(code, field, message string) *aggregate.Error {
	return &aggregate.Error{Code: code, Field: field, Message: message}
}

// classify turns any error from the application layer into a status and
// the body to send. internal reports that err must be logged (its text
// is not sent). Store and NATS failures arrive already translated by
// sagas.Repo (sagas.UnavailableError); a deadline or cancellation the
// transport itself imposed is unavailable too.
func classify(err error) (status int, body ErrorBody, internal bool) {
	var ue *sagas.UnavailableError
	switch {
	case errors.As(err, &ue):
		return http.StatusServiceUnavailable, ErrorBody{ErrorDetail{Code: CodeUnavailable, Message: ue.Message}}, true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, ErrorBody{ErrorDetail{Code: CodeUnavailable, Message: "the store is unavailable or too busy; retry (commands are idempotent)"}}, true
	}
	var e *aggregate.Error
	if errors.As(err, &e) && !internalCodes[e.Code] {
		if st, ok := StatusTable[e.Code]; ok {
			msg := e.Message
			if msg == "" {
				msg = defaultMessage(e.Code)
			}
			return st, ErrorBody{ErrorDetail{Code: e.Code, Message: msg, Field: e.Field}}, false
		}
	}
	return http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: CodeInternal, Message: "internal error"}}, true
}

func defaultMessage(code string) string {
	switch code {
	case CodeNotFound:
		return "not found"
	case CodeForbidden:
		return "not allowed for this principal"
	}
	return code
}
