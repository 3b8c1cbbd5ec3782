package aggregate

import (
	"slices"
	"time"
)

// The policy stream: proposals, their approvals, and the versions that come
// into force. A policy change takes effect only once a quorum of distinct
// operators (the proposer counts as one) has approved it; with a quorum of
// 1 a proposal is in force at once (policy.changed alone, as before quorums
// existed). Versions that come into force only ever increase; a proposal
// superseded by a newer one leaves its number unused.

// Event types of the policy stream.
const (
	PolicyChangedType          = "policy.changed"
	PolicyProposedType         = "policy.proposed"
	PolicyProposalApprovedType = "policy.proposal_approved"
)

// PolicyEvent is an event of the policy stream.
type PolicyEvent interface {
	EventType() string
	isPolicyEvent()
}

// PolicyChanged records a new version of the policy in force: who proposed
// it (By), when it came into force (At) and, under a quorum, who approved it
// besides the proposer (ApprovedBy, in order) and the quorum it met.
type PolicyChanged struct {
	Version      int               `json:"version"`
	Name         string            `json:"name"`
	Rules        []Rule            `json:"rules"`
	Destinations []DestinationRule `json:"destinations,omitempty"`
	Velocity     []VelocityTier    `json:"velocity,omitempty"`
	By           string            `json:"by"`
	ApprovedBy   []string          `json:"approved_by,omitempty"`
	Quorum       int               `json:"quorum,omitempty"`
	At           time.Time         `json:"at"`
}

// PolicyProposed records a proposed policy version waiting for its quorum.
// It supersedes any proposal still open.
type PolicyProposed struct {
	Version      int               `json:"version"`
	Name         string            `json:"name"`
	Rules        []Rule            `json:"rules"`
	Destinations []DestinationRule `json:"destinations,omitempty"`
	Velocity     []VelocityTier    `json:"velocity,omitempty"`
	By           string            `json:"by"`
	Quorum       int               `json:"quorum"`
	At           time.Time         `json:"at"`
}

// PolicyProposalApproved records one operator's approval of the open
// proposal that did not yet complete its quorum (the one that does is
// recorded in the PolicyChanged it causes).
type PolicyProposalApproved struct {
	Version int       `json:"version"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Policy is the policy version the event records (slices copied).
func (e PolicyChanged) Policy() Policy {
	return Policy{Version: e.Version, Name: e.Name, Rules: e.Rules, Destinations: e.Destinations, Velocity: e.Velocity}.WithVersion(e.Version)
}

// Policy is the policy version the event proposes (slices copied).
func (e PolicyProposed) Policy() Policy {
	return Policy{Version: e.Version, Name: e.Name, Rules: e.Rules, Destinations: e.Destinations, Velocity: e.Velocity}.WithVersion(e.Version)
}

func (PolicyChanged) EventType() string          { return PolicyChangedType }
func (PolicyChanged) isPolicyEvent()             {}
func (PolicyProposed) EventType() string         { return PolicyProposedType }
func (PolicyProposed) isPolicyEvent()            {}
func (PolicyProposalApproved) EventType() string { return PolicyProposalApprovedType }
func (PolicyProposalApproved) isPolicyEvent()    {}

// PolicyApproval is one operator's consent to a proposal.
type PolicyApproval struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// PolicyProposal is a proposed version waiting for its quorum. Approvals
// lists the proposer first (the proposer counts as one), then the others in
// order.
type PolicyProposal struct {
	Policy     Policy           `json:"policy"`
	ProposedBy string           `json:"proposed_by"`
	ProposedAt time.Time        `json:"proposed_at"`
	Approvals  []PolicyApproval `json:"approvals"`
	Quorum     int              `json:"quorum"`
}

// HasApproved reports whether principal has approved (or proposed) p.
func (p PolicyProposal) HasApproved(principal string) bool {
	return slices.ContainsFunc(p.Approvals, func(a PolicyApproval) bool { return a.By == principal })
}

// PolicyState is the fold of the policy stream. Before any event, Policy is
// the zero value and Version 0: callers fall back to their configured default.
type PolicyState struct {
	Policy     Policy    `json:"policy"`
	ChangedBy  string    `json:"changed_by"`
	ChangedAt  time.Time `json:"changed_at"`
	ApprovedBy []string  `json:"approved_by,omitempty"`
	// Pending is the open proposal, if any.
	Pending *PolicyProposal `json:"pending,omitempty"`
	// LastVersion is the highest version number assigned, in force or
	// proposed; the next proposal takes the one after it.
	LastVersion int `json:"last_version"`
	// Events is the number of events folded.
	Events uint64 `json:"events"`
}

// PolicyCommand is something asked of the policy stream: SetPolicy or
// ApprovePolicy.
type PolicyCommand interface{ isPolicyCommand() }

// SetPolicy proposes a policy. With Quorum ≤ 1 it is in force at once;
// otherwise it becomes the open proposal, needing Quorum distinct operators
// (By counts as one). The version is assigned here, whatever the command's
// policy carries.
type SetPolicy struct {
	Policy Policy
	By     string
	Quorum int
	At     time.Time
}

// ApprovePolicy is an operator's approval of the open proposal Version.
// Quorum is the quorum configured now; the proposal needs the larger of it
// and the quorum it was proposed under.
type ApprovePolicy struct {
	Version int
	By      string
	Quorum  int
	At      time.Time
}

func (SetPolicy) isPolicyCommand()     {}
func (ApprovePolicy) isPolicyCommand() {}

// DecidePolicy decides a policy command.
//
// SetPolicy: a policy that says the same as the one in force, or (under a
// quorum) as the open proposal, is a replay (no events); anything else
// becomes the next version, in force (quorum ≤ 1) or proposed.
//
// ApprovePolicy: only the open proposal can be approved (invalid_transition
// otherwise); its proposer cannot approve it (self_approval: the proposer
// already counts as one); a second approval by the same operator counts
// once (no events). The approval that completes the quorum puts the
// proposal in force.
func DecidePolicy(s PolicyState, c PolicyCommand) ([]PolicyEvent, error) {
	switch c := c.(type) {
	case SetPolicy:
		return decideSetPolicy(s, c)
	case ApprovePolicy:
		return decideApprovePolicy(s, c)
	}
	return nil, newError(CodeInvalidCommand, "", "unknown policy command %T", c)
}

func decideSetPolicy(s PolicyState, c SetPolicy) ([]PolicyEvent, error) {
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if s.Policy.Version > 0 && s.Policy.SameRules(c.Policy) {
		return nil, nil
	}
	p, _ := c.Policy.Normalized() // sorted copy; validated above
	next := max(s.Policy.Version, s.LastVersion) + 1
	if c.Quorum <= 1 {
		return []PolicyEvent{PolicyChanged{Version: next, Name: p.Name, Rules: p.Rules, Destinations: p.Destinations, Velocity: p.Velocity, By: c.By, At: at}}, nil
	}
	if s.Pending != nil && s.Pending.Policy.SameRules(p) {
		return nil, nil // already proposed: it waits for its approvals
	}
	return []PolicyEvent{PolicyProposed{Version: next, Name: p.Name, Rules: p.Rules, Destinations: p.Destinations, Velocity: p.Velocity, By: c.By, Quorum: c.Quorum, At: at}}, nil
}

func decideApprovePolicy(s PolicyState, c ApprovePolicy) ([]PolicyEvent, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if c.Version < 1 {
		return nil, newError(CodeInvalidCommand, "version", "at least 1")
	}
	p := s.Pending
	if p == nil || p.Policy.Version != c.Version {
		if c.Version == s.Policy.Version && (c.By == s.ChangedBy || slices.Contains(s.ApprovedBy, c.By)) {
			return nil, nil // already approved, and in force
		}
		if c.Version <= s.LastVersion {
			return nil, newError(CodeInvalidTransition, "version", "policy v%d is not an open proposal (in force, superseded or already decided)", c.Version)
		}
		return nil, newError(CodeInvalidTransition, "version", "no policy proposal v%d", c.Version)
	}
	if c.By == p.ProposedBy {
		return nil, newError(CodeSelfApproval, "", "%s proposed policy v%d and already counts as one approval; another operator must approve it", c.By, c.Version)
	}
	if p.HasApproved(c.By) {
		return nil, nil // the same operator twice counts once
	}
	quorum := max(p.Quorum, c.Quorum)
	if len(p.Approvals)+1 < quorum {
		return []PolicyEvent{PolicyProposalApproved{Version: c.Version, By: c.By, At: at}}, nil
	}
	approvedBy := make([]string, 0, len(p.Approvals))
	for _, a := range p.Approvals[1:] {
		approvedBy = append(approvedBy, a.By)
	}
	approvedBy = append(approvedBy, c.By)
	pol := p.Policy.WithVersion(p.Policy.Version) // copies
	return []PolicyEvent{PolicyChanged{
		Version: pol.Version, Name: pol.Name, Rules: pol.Rules, Destinations: pol.Destinations, Velocity: pol.Velocity,
		By: p.ProposedBy, ApprovedBy: approvedBy, Quorum: quorum, At: at,
	}}, nil
}

// EvolvePolicy applies one policy event.
func EvolvePolicy(s PolicyState, e PolicyEvent) PolicyState {
	s.Events++
	switch ev := e.(type) {
	case PolicyChanged:
		s.Policy = ev.Policy()
		s.ChangedBy, s.ChangedAt, s.ApprovedBy = ev.By, ev.At, slices.Clone(ev.ApprovedBy)
		s.LastVersion = max(s.LastVersion, ev.Version)
		if s.Pending != nil && s.Pending.Policy.Version <= ev.Version {
			s.Pending = nil // in force now, or overtaken by a newer version
		}
	case PolicyProposed:
		s.Pending = &PolicyProposal{
			Policy:     ev.Policy(),
			ProposedBy: ev.By, ProposedAt: ev.At, Quorum: ev.Quorum,
			Approvals: []PolicyApproval{{By: ev.By, At: ev.At}},
		}
		s.LastVersion = max(s.LastVersion, ev.Version)
	case PolicyProposalApproved:
		if s.Pending != nil && s.Pending.Policy.Version == ev.Version {
			p := *s.Pending // copy: a state kept by a caller is not altered
			p.Approvals = append(slices.Clip(p.Approvals), PolicyApproval{By: ev.By, At: ev.At})
			s.Pending = &p
		}
	}
	return s
}

// FoldPolicy replays the policy stream.
func FoldPolicy(events []PolicyEvent) PolicyState {
	var s PolicyState
	for _, e := range events {
		s = EvolvePolicy(s, e)
	}
	return s
}
