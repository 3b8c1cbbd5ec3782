package sagas

import (
	"errors"
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// CodeIntegrityViolation: the aggregate holds an event that failed
// verification or cannot be decoded. Nothing is decided on it; clients see
// 409 integrity_violation until an operator has dealt with the log.
const CodeIntegrityViolation = "integrity_violation"

// ErrIntegrityViolation matches (errors.Is) every integrity violation this
// package returns.
var ErrIntegrityViolation = &aggregate.Error{Code: CodeIntegrityViolation}

// integrityViolation turns a load that met a quarantined event into the
// code clients see, keeping the store's error (and its stream sequence)
// for errors.Is / errors.As.
func integrityViolation(typ, id string, err error) error {
	msg := fmt.Sprintf("%s %s holds an event that failed verification or decoding; it is quarantined", typ, id)
	var ie *eventstore.IntegrityError
	if errors.As(err, &ie) {
		msg += fmt.Sprintf(" (stream seq %d)", ie.Sequence)
	}
	return fmt.Errorf("%w: %w", &aggregate.Error{Code: CodeIntegrityViolation, Message: msg}, err)
}

// quarantined reports errors no retry can cure: the aggregate (or the
// event itself) failed verification or decoding.
func quarantined(err error) bool {
	return errors.Is(err, eventstore.ErrIntegrity) || errors.Is(err, ErrIntegrityViolation)
}
