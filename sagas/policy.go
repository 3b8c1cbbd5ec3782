package sagas

import (
	"context"
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// Policy changes by quorum (CONTRACT.md "Additions"): an operator's policy
// change is a proposal until PolicyQuorum distinct operators (the proposer
// counts as one) have approved it. SetPolicy (start-up configuration, the
// --policy file) puts a policy in force directly; operators' requests go
// through ProposePolicy and ApprovePolicy.

// SetPolicyQuorum sets how many distinct operators a policy change needs
// (the proposer counts as one); n ≤ 1 puts a proposal in force at once.
// Call it before the intake serves requests.
func (in *Intake) SetPolicyQuorum(n int) { in.policyQuorum = max(n, 1) }

// PolicyQuorum is the configured quorum (at least 1): with UseConfig, the
// one in force in the log as last read.
func (in *Intake) PolicyQuorum() int {
	if in.config != nil {
		return max(in.config.Last().Config.PolicyQuorum, 1)
	}
	return max(in.policyQuorum, 1)
}

// UseConfig makes the intake take the policy quorum and the credit-review
// threshold from the configuration in force in the log rather than from
// SetPolicyQuorum and SetCreditReviewAbove. Call it before serving.
func (in *Intake) UseConfig(cs *ConfigSource) { in.config = cs }

// quorum is the policy quorum in force now (read from the log with
// UseConfig).
func (in *Intake) quorum(ctx context.Context) int {
	if in.config != nil {
		in.config.Current(ctx)
	}
	return in.PolicyQuorum()
}

// creditReviewAbove is the credit-review threshold in force now.
func (in *Intake) creditReviewAbove(ctx context.Context) aggregate.Amount {
	if in.config != nil {
		return in.config.Current(ctx).Config.CreditReviewAbove
	}
	return in.reviewAbove
}

// PolicyChange is the outcome of proposing or approving a policy: the
// policy in force and, while the change waits for its quorum, the open
// proposal and how many approvals it needs in all.
type PolicyChange struct {
	InForce         aggregate.Policy
	Proposal        *aggregate.PolicyProposal // nil once the change is in force
	ApprovalsNeeded int
}

// ProposePolicy proposes p as the next policy version on behalf of by.
// Under a quorum of 1 it is in force at once; otherwise it is the open
// proposal (superseding any other). Proposing what is already in force, or
// already proposed, changes nothing and answers the same.
func (in *Intake) ProposePolicy(ctx context.Context, p aggregate.Policy, by string) (PolicyChange, error) {
	if err := CheckPolicy(p); err != nil {
		return PolicyChange{}, err
	}
	s, pos, err := in.repo.updatePolicy(ctx, aggregate.SetPolicy{Policy: p, By: by, Quorum: in.quorum(ctx), At: in.now().UTC()})
	in.policyCache.wrote(s, pos, err) // this process reads its own write at once
	if err != nil {
		return PolicyChange{}, err
	}
	c := PolicyChange{InForce: policyInForce(s)}
	if s.Pending != nil && s.Pending.Policy.SameRules(p) && !s.Policy.SameRules(p) {
		c.Proposal, c.ApprovalsNeeded = s.Pending, max(s.Pending.Quorum, in.PolicyQuorum())
	}
	return c, nil
}

// ApprovePolicy records by's approval of the open proposal version; the
// approval that completes the quorum puts it in force. The proposer cannot
// approve (self_approval); an operator's second approval counts once.
func (in *Intake) ApprovePolicy(ctx context.Context, version int, by string) (PolicyChange, error) {
	s, pos, err := in.repo.updatePolicy(ctx, aggregate.ApprovePolicy{Version: version, By: by, Quorum: in.quorum(ctx), At: in.now().UTC()})
	in.policyCache.wrote(s, pos, err) // this process reads its own write at once
	if err != nil {
		return PolicyChange{}, err
	}
	c := PolicyChange{InForce: policyInForce(s)}
	if s.Pending != nil && s.Pending.Policy.Version == version {
		c.Proposal, c.ApprovalsNeeded = s.Pending, max(s.Pending.Quorum, in.PolicyQuorum())
	}
	return c, nil
}

// PolicyProposal returns the open policy proposal, if any, and how many
// approvals it needs in all.
func (in *Intake) PolicyProposal(ctx context.Context) (*aggregate.PolicyProposal, int, error) {
	s, _, err := in.repo.Policy(ctx)
	if err != nil {
		return nil, 0, err
	}
	if s.Pending == nil {
		return nil, 0, nil
	}
	return s.Pending, max(s.Pending.Quorum, in.PolicyQuorum()), nil
}

// CheckPolicy is Policy.Validate plus what the domain cannot check without
// the rail: every address on a destination allow-list is a TRON address in
// its base58 form (T…, with a valid checksum), as withdrawals record their
// to_address, so that the list compares equal to them.
func CheckPolicy(p aggregate.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	for i, d := range p.Destinations {
		for j, s := range d.Allow {
			a, err := tron.ParseAddress(s)
			if err == nil && a.String() != s {
				err = fmt.Errorf("write it in base58 (%s)", a)
			}
			if err != nil {
				return &aggregate.Error{Code: aggregate.CodeInvalidPolicy, Field: fmt.Sprintf("destinations[%d].allow[%d]", i, j),
					Message: fmt.Sprintf("%q is not a TRON address: %v", s, err)}
			}
		}
	}
	return nil
}
