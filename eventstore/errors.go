package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The error catalogue of the event store. Transports map these once, at the
// edge; inside the system callers test them with errors.Is / errors.As.
var (
	// ErrConflict: the aggregate moved past the expected position. Reload,
	// re-decide, append again (with new event ids: it is a new decision).
	ErrConflict = errors.New("eventstore: conflict: aggregate moved past expected position")

	// ErrOutcomeUnknown: an append could not be confirmed either way (the
	// server or the network did not answer, even for the read-back). It is a
	// hard error, never a guess: retrying Append with the very same events
	// (same ids, see OutcomeUnknownError.Events) and the same expected
	// position is always safe and resolves it.
	ErrOutcomeUnknown = errors.New("eventstore: append outcome unknown")

	// ErrUnknownEventType: an event type that is not in the Registry, on
	// append (nothing is appended) or on read (the read stops).
	ErrUnknownEventType = errors.New("eventstore: unknown event type")

	// ErrUnknownSchema: a stored schema version newer than the registry knows,
	// or an old one with no upcaster path to the current version.
	ErrUnknownSchema = errors.New("eventstore: unknown schema version")

	// ErrNotFound is for callers that treat an empty aggregate as an error;
	// Load itself returns no records and a zero Position for it.
	ErrNotFound = errors.New("eventstore: aggregate not found")

	// ErrInvalidKey: aggregate type or id is not a single subject token.
	ErrInvalidKey = errors.New("eventstore: invalid aggregate key")

	// ErrInvalidEvent: an event that cannot be appended as given (no events,
	// too many, bad or repeated id, payload not JSON).
	ErrInvalidEvent = errors.New("eventstore: invalid event")

	// ErrInvalidPosition: an expected Position that cannot come from Load or
	// Append (a sequence without a version or the reverse, or one that does
	// not match what is stored at that sequence).
	ErrInvalidPosition = errors.New("eventstore: invalid expected position")

	// ErrEventIDReused: the server already holds one of these event ids in a
	// different place. Event ids identify one decision; a new decision needs
	// new ids.
	ErrEventIDReused = errors.New("eventstore: event id already used elsewhere")

	// ErrCorrupt: what is stored does not follow the store's own rules
	// (missing headers, broken version chain). Loud on purpose.
	ErrCorrupt = errors.New("eventstore: stored events are inconsistent")

	// ErrSnapshotMismatch: LoadSince was given a position the aggregate's
	// log does not pass through (a stale or foreign snapshot). Not an
	// integrity failure of the log: load it from the start instead.
	ErrSnapshotMismatch = errors.New("eventstore: snapshot does not match the log")

	// ErrStreamMismatch: an existing stream cannot be adopted by Open
	// (different subjects or storage type).
	ErrStreamMismatch = errors.New("eventstore: existing stream does not match configuration")
)

// ConflictError is the one typed conflict: server codes 10071 and 10164, and
// any read-back that finds another writer's event in the slot we expected.
type ConflictError struct {
	Key      Key
	Expected Position
	Actual   Position // what the store held when the conflict was resolved
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("eventstore: conflict on %s/%s: expected seq %d (version %d), actual seq %d (version %d)",
		e.Key.Type, e.Key.ID, e.Expected.Sequence, e.Expected.Version, e.Actual.Sequence, e.Actual.Version)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// OutcomeUnknownError carries what a caller needs to retry safely.
type OutcomeUnknownError struct {
	Key      Key
	Expected Position
	// Events are the events as sent, with their ids filled in. Retry with
	// exactly these.
	Events []Event
	// Err is the last transport or read-back failure.
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("eventstore: append to %s/%s at seq %d: outcome unknown (retry with the same event ids): %v",
		e.Key.Type, e.Key.ID, e.Expected.Sequence, e.Err)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap exposes the underlying failure (for example context.DeadlineExceeded).
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// Unavailable reports whether err says the server or the cluster could not
// do it now — a timeout, a lost or closing connection, no JetStream
// response, a server shutting down, a 503 from the JetStream API, an append
// whose outcome is unknown — rather than that the request was wrong.
// Retrying later (with the same event ids, for an append) may succeed.
// A conflict is not unavailability: the caller must re-decide.
func Unavailable(err error) bool {
	for _, target := range []error{
		ErrOutcomeUnknown,
		context.DeadlineExceeded, context.Canceled,
		nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed, nats.ErrConnectionDraining,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrNoStreamResponse, jetstream.ErrServerShutdown, jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusServiceUnavailable
}
