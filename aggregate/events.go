package aggregate

import (
	"slices"
	"strings"
)

// EventSchemaVersion is the schema version of every event type defined
// here. When a payload changes incompatibly, the new shape gets a new
// version and the store upcasts the old one before decoding.
const EventSchemaVersion = 1

type decoder[E any] func(data []byte) (E, error)

func decodeInto[T any, E any](data []byte) (E, error) {
	var v T
	var zero E
	if err := strictDecode(data, &v); err != nil {
		return zero, err
	}
	e, _ := any(v).(E)
	return e, nil
}

var withdrawalDecoders = map[string]decoder[Event]{
	EventRequested:            decodeInto[Requested, Event],
	EventApprovalRecorded:     decodeInto[ApprovalRecorded, Event],
	EventApproved:             decodeInto[Approved, Event],
	EventApprovalsInvalidated: decodeInto[ApprovalsInvalidated, Event],
	EventRejected:             decodeInto[Rejected, Event],
	EventFundsReserved:        decodeInto[FundsReserved, Event],
	EventClaimed:              decodeInto[Claimed, Event],
	EventRouted:               decodeInto[Routed, Event],
	EventSettledInternally:    decodeInto[SettledInternally, Event],
	EventEnvelopeBuilt:        decodeInto[EnvelopeBuilt, Event],
	EventSigned:               decodeInto[Signed, Event],
	EventBroadcasting:         decodeInto[Broadcasting, Event],
	EventBroadcastAccepted:    decodeInto[BroadcastAccepted, Event],
	EventRebuilt:              decodeInto[Rebuilt, Event],
	EventEnvelopeReplaced:     decodeInto[EnvelopeReplaced, Event],
	EventConfirmed:            decodeInto[Confirmed, Event],
	EventFailed:               decodeInto[Failed, Event],
}

var accountDecoders = map[string]decoder[AccountEvent]{
	EventAccountCredited:        decodeInto[AccountCredited, AccountEvent],
	EventAccountCreditRequested: decodeInto[AccountCreditRequested, AccountEvent],
	EventAccountReserved:        decodeInto[AccountReserved, AccountEvent],
	EventAccountReleased:        decodeInto[AccountReleased, AccountEvent],
	EventAccountSettled:         decodeInto[AccountSettled, AccountEvent],
}

var policyDecoders = map[string]decoder[PolicyEvent]{
	PolicyChangedType:          decodeInto[PolicyChanged, PolicyEvent],
	PolicyProposedType:         decodeInto[PolicyProposed, PolicyEvent],
	PolicyProposalApprovedType: decodeInto[PolicyProposalApproved, PolicyEvent],
}

var configDecoders = map[string]decoder[ConfigChanged]{
	ConfigChangedType: decodeInto[ConfigChanged, ConfigChanged],
}

func decodeWith[E any](decoders map[string]decoder[E], eventType string, data []byte) (E, error) {
	var zero E
	d, ok := decoders[eventType]
	if !ok {
		return zero, newError(CodeUnknownEvent, "type", "unknown event type %q", eventType)
	}
	e, err := d(data)
	if err != nil {
		if de, ok := err.(*Error); ok {
			return zero, newError(CodeInvalidEvent, de.Field, "%s: %s", eventType, de.Message)
		}
		return zero, newError(CodeInvalidEvent, "", "%s: %v", eventType, err)
	}
	return e, nil
}

// DecodeWithdrawalEvent decodes a stored withdrawal event payload by its
// type name. Unknown types and unknown members are refused loudly.
func DecodeWithdrawalEvent(eventType string, data []byte) (Event, error) {
	return decodeWith(withdrawalDecoders, eventType, data)
}

// DecodeAccountEvent decodes a stored account event payload by type name.
func DecodeAccountEvent(eventType string, data []byte) (AccountEvent, error) {
	return decodeWith(accountDecoders, eventType, data)
}

// DecodePolicyEvent decodes a stored policy event payload by type name.
func DecodePolicyEvent(eventType string, data []byte) (PolicyEvent, error) {
	return decodeWith(policyDecoders, eventType, data)
}

// DecodeConfigEvent decodes a stored configuration event payload by type
// name.
func DecodeConfigEvent(eventType string, data []byte) (ConfigChanged, error) {
	return decodeWith(configDecoders, eventType, data)
}

// DecodeEvent decodes any event defined here; the result is an Event,
// an AccountEvent or a PolicyEvent, chosen by the type name's prefix.
func DecodeEvent(eventType string, data []byte) (any, error) {
	switch {
	case strings.HasPrefix(eventType, "withdrawal."):
		return DecodeWithdrawalEvent(eventType, data)
	case strings.HasPrefix(eventType, "account."):
		return DecodeAccountEvent(eventType, data)
	case strings.HasPrefix(eventType, "policy."):
		return DecodePolicyEvent(eventType, data)
	case strings.HasPrefix(eventType, "config."):
		return DecodeConfigEvent(eventType, data)
	}
	return nil, newError(CodeUnknownEvent, "type", "unknown event type %q", eventType)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WithdrawalEventTypes lists every withdrawal event type, sorted.
func WithdrawalEventTypes() []string { return sortedKeys(withdrawalDecoders) }

// AccountEventTypes lists every account event type, sorted.
func AccountEventTypes() []string { return sortedKeys(accountDecoders) }

// PolicyEventTypes lists every policy event type, sorted.
func PolicyEventTypes() []string { return sortedKeys(policyDecoders) }

// ConfigEventTypes lists every configuration event type, sorted.
func ConfigEventTypes() []string { return sortedKeys(configDecoders) }

// EventTypes lists every event type this package defines, for a store's
// registry.
func EventTypes() []string {
	return slices.Concat(WithdrawalEventTypes(), AccountEventTypes(), PolicyEventTypes(), ConfigEventTypes())
}
