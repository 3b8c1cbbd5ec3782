package sagas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// PolicyVersion is one version of the policy that came into force, as the
// policy stream records it: who proposed it, who else approved it under a
// quorum, and when it took effect.
type PolicyVersion struct {
	Version int              `json:"version"`
	Name    string           `json:"name"`
	Rules   []aggregate.Rule `json:"rules"`
	// Destinations and Velocity are the version's per-account destination
	// rules and velocity tiers (absent when it has none).
	Destinations []aggregate.DestinationRule `json:"destinations,omitempty"`
	Velocity     []aggregate.VelocityTier    `json:"velocity,omitempty"`
	By           string                      `json:"by"`
	ApprovedBy   []string                    `json:"approved_by"`
	Quorum       int                         `json:"quorum"`
	At           time.Time                   `json:"at"`
}

// PolicyHistory lists the versions of the policy that came into force,
// oldest first, read (verified) from the policy stream. Proposals that
// never reached their quorum are not versions in force and are not listed.
// Before any policy.changed event the list is empty: the configured
// default is in force (Policy says which).
func (in *Intake) PolicyHistory(ctx context.Context) ([]PolicyVersion, error) {
	recs, _, err := in.repo.store.Load(ctx, eventstore.Key{Type: eventlog.TypePolicy, ID: eventlog.PolicyStreamID})
	if errors.Is(err, eventstore.ErrIntegrity) {
		return nil, integrityViolation(eventlog.TypePolicy, eventlog.PolicyStreamID, err)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	events, err := eventlog.PolicyEvents(recs)
	if err != nil {
		return nil, fmt.Errorf("policy history: %w", err)
	}
	out := []PolicyVersion{}
	for _, e := range events {
		if ch, ok := e.(aggregate.PolicyChanged); ok {
			out = append(out, PolicyVersion{
				Version: ch.Version, Name: ch.Name, Rules: ch.Rules, Destinations: ch.Destinations, Velocity: ch.Velocity, By: ch.By,
				ApprovedBy: append([]string{}, ch.ApprovedBy...), Quorum: ch.Quorum, At: ch.At.UTC(),
			})
		}
	}
	return out, nil
}
