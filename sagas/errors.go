package sagas

import (
	"errors"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// The error codes sagas raise itself (the domain's are aggregate's). They
// are *aggregate.Error values so the transports map one error type to
// statuses, once, at the edge.
const (
	CodeNotFound    = "not_found"
	CodeForbidden   = "forbidden"
	CodeUnavailable = "unavailable"
)

var (
	ErrNotFound  = &aggregate.Error{Code: CodeNotFound}
	ErrForbidden = &aggregate.Error{Code: CodeForbidden}
	// ErrUnavailable matches (errors.Is) every UnavailableError.
	ErrUnavailable = &aggregate.Error{Code: CodeUnavailable}
)

// UnavailableError is how Repo returns a failure of the store or the
// cluster — it could not do it now, not "this command is wrong": a store
// or NATS failure (eventstore.Unavailable), a conflict that reached the
// caller, or more contention than MaxDecideAttempts. errors.Is(err,
// ErrUnavailable) holds, and the cause stays reachable (errors.Is(err,
// eventstore.ErrConflict) still tells a fenced worker to stop).
type UnavailableError struct {
	// Message is safe to show a caller: what to do about it.
	Message string
	Err     error
}

func (e *UnavailableError) Error() string { return CodeUnavailable + ": " + e.Err.Error() }

// Unwrap exposes the store's or NATS's failure.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool {
	var t *aggregate.Error
	return errors.As(target, &t) && t != nil && t.Code == CodeUnavailable
}

// unavailable wraps err in an UnavailableError when it is a store or
// cluster failure, and returns every other error (a domain refusal, a
// decode failure, a bug) as it is.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	switch {
	case errors.Is(err, eventstore.ErrOutcomeUnknown):
		return &UnavailableError{Message: "the store did not confirm the write; retry the same request (it is idempotent)", Err: err}
	case eventstore.Unavailable(err), errors.Is(err, eventstore.ErrConflict), errors.Is(err, ErrTooMuchContention):
		return &UnavailableError{Message: "the store is unavailable or too busy; retry (commands are idempotent)", Err: err}
	}
	return err
}
