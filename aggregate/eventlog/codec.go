package eventlog

import (
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// Aggregate types: the second token of an event subject
// (weir.evt.<type>.<id>).
const (
	TypeWithdrawal = "withdrawal"
	TypeAccount    = "account"
	TypePolicy     = "policy"
	// TypeWebhook holds webhook registrations (weir.evt.webhook.<id>).
	TypeWebhook = "webhook"
	TypeConfig  = "config"
)

// ConfigStreamID is the id of the one configuration aggregate
// (weir.evt.config.current).
const ConfigStreamID = "current"

// PolicyStreamID is the id of the one policy aggregate.
const PolicyStreamID = "current"

// NewRegistry returns the event registry of every event type the domain
// defines, at its current schema version. It is the one place the store
// learns the domain's vocabulary; an event type missing here is refused on
// append and is a loud error on read.
func NewRegistry() *eventstore.Registry {
	reg := eventstore.NewRegistry()
	for _, t := range aggregate.EventTypes() {
		reg.Register(t, aggregate.EventSchemaVersion)
	}
	for _, t := range aggregate.WebhookEventTypes() {
		reg.Register(t, aggregate.EventSchemaVersion)
	}
	return reg
}

// WithdrawalEvents decodes a withdrawal stream's records into domain events.
func WithdrawalEvents(recs []eventstore.Record) ([]aggregate.Event, error) {
	return decode(recs, aggregate.DecodeWithdrawalEvent)
}

// AccountEvents decodes an account stream's records into domain events.
func AccountEvents(recs []eventstore.Record) ([]aggregate.AccountEvent, error) {
	return decode(recs, aggregate.DecodeAccountEvent)
}

// WebhookEvents decodes a webhook stream's records into domain events.
func WebhookEvents(recs []eventstore.Record) ([]aggregate.WebhookEvent, error) {
	return decode(recs, aggregate.DecodeWebhookEvent)
}

// PolicyEvents decodes the policy stream's records into domain events.
func PolicyEvents(recs []eventstore.Record) ([]aggregate.PolicyEvent, error) {
	return decode(recs, aggregate.DecodePolicyEvent)
}

// ConfigEvents decodes the configuration stream's records.
func ConfigEvents(recs []eventstore.Record) ([]aggregate.ConfigChanged, error) {
	return decode(recs, aggregate.DecodeConfigEvent)
}

// decode decodes every record or names the first one it cannot.
func decode[E any](recs []eventstore.Record, one func(string, []byte) (E, error)) ([]E, error) {
	out := make([]E, 0, len(recs))
	for _, r := range recs {
		e, err := one(r.Type, r.Payload)
		if err != nil {
			return nil, fmt.Errorf("%s %s event %d (%s): %w", r.Key.Type, r.Key.ID, r.AggregateVersion, r.Type, err)
		}
		out = append(out, e)
	}
	return out, nil
}
