package audit

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// policyVersion is one version of the policy and where it entered the log.
type policyVersion struct {
	Policy   aggregate.Policy
	Sequence uint64 // stream sequence of its policy.changed; 0 = the built-in default
	At       time.Time
	By       string
}

func (p policyVersion) label() string {
	if p.Sequence == 0 {
		return fmt.Sprintf("v%d (the built-in default %q, before any policy was stored)", p.Policy.Version, p.Policy.Name)
	}
	return fmt.Sprintf("v%d %q (set by %s at %s)", p.Policy.Version, p.Policy.Name, p.By, fmtTime(p.At))
}

// policyHistory is the policy stream folded version by version.
type policyHistory struct {
	versions []policyVersion // in stream order; versions[0] is the default (v0)
}

// buildPolicyHistory folds the policy stream (records in stream order),
// reporting a gap, an undecodable event, a version that does not move
// forward or skips one never proposed, an invalid policy, and a change by
// quorum that its proposal and approvals do not bear out; each
// valid-looking version still enters the history so that the withdrawals
// can be judged against what was stored.
func buildPolicyHistory(recs []eventstore.Record, configs configHistory, report func(Finding)) policyHistory {
	h := policyHistory{versions: []policyVersion{{Policy: aggregate.DefaultPolicy()}}}
	var s aggregate.PolicyState
	for i, r := range recs {
		f := Finding{Severity: Violation, Check: "policy", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type}
		bad := func(format string, args ...any) {
			f.What = "policy stream: " + fmt.Sprintf(format, args...)
			report(f)
		}
		if r.AggregateVersion != uint64(i+1) {
			bad("event %d has version %d", i+1, r.AggregateVersion)
		}
		e, err := aggregate.DecodePolicyEvent(r.Type, r.Payload)
		if err != nil {
			bad("event %d (%s): %v", r.AggregateVersion, r.Type, err)
			continue
		}
		operator := func(by, what string, system bool) {
			if msg, ok := configs.checkActor(r.Sequence, by, what, "", system, aggregate.RoleOperator); !ok {
				bad("%s", msg)
			}
		}
		switch ev := e.(type) {
		case aggregate.PolicyProposed:
			operator(ev.By, fmt.Sprintf("proposal v%d", ev.Version), false)
			if ev.Version != max(s.Policy.Version, s.LastVersion)+1 {
				bad("proposal v%d follows version %d", ev.Version, max(s.Policy.Version, s.LastVersion))
			}
		case aggregate.PolicyProposalApproved:
			operator(ev.By, fmt.Sprintf("approval of proposal v%d", ev.Version), false)
			switch {
			case s.Pending == nil || s.Pending.Policy.Version != ev.Version:
				bad("%s approves v%d, which is not the open proposal", ev.By, ev.Version)
			case ev.By == s.Pending.ProposedBy || s.Pending.HasApproved(ev.By):
				bad("%s approves v%d a second time (the proposer counts as one)", ev.By, ev.Version)
			}
		case aggregate.PolicyChanged:
			// weir-serve sets the --policy file at start (quorum 1, no
			// approvers); everyone else is an operator.
			operator(ev.By, fmt.Sprintf("version %d", ev.Version), ev.Quorum <= 1 && len(ev.ApprovedBy) == 0)
			for _, by := range ev.ApprovedBy {
				operator(by, fmt.Sprintf("approval of version %d", ev.Version), false)
			}
			if cv, ok := configs.inForceAt(r.Sequence); ok && ev.By != aggregate.SystemActor {
				if n, need := 1+len(ev.ApprovedBy), cv.State.Config.PolicyQuorum; n < need {
					bad("version %d came into force with %d operator(s); policy_quorum is %d in %s", ev.Version, n, need, cv.label())
				}
			}
			switch {
			case ev.Version <= s.Policy.Version:
				bad("version %d follows version %d", ev.Version, s.Policy.Version)
			case ev.Version != s.Policy.Version+1 && ev.Version > s.LastVersion:
				bad("version %d follows version %d, skipping versions never proposed", ev.Version, s.Policy.Version)
			}
			if ev.Quorum > 1 || len(ev.ApprovedBy) > 0 {
				checkQuorum(ev, s.Pending, bad)
			}
		}
		s = aggregate.EvolvePolicy(s, e)
		ch, ok := e.(aggregate.PolicyChanged)
		if !ok {
			continue
		}
		if err := s.Policy.Validate(); err != nil {
			bad("version %d is not a valid policy: %v", ch.Version, err)
		}
		h.versions = append(h.versions, policyVersion{Policy: s.Policy, Sequence: r.Sequence, At: ch.At, By: ch.By})
	}
	return h
}

// checkQuorum judges a change that came into force by quorum against the
// open proposal it completes: same version, rules and proposer; approvers
// distinct and never the proposer; enough of them for the larger of the
// quorum it names and the one it was proposed under.
func checkQuorum(ch aggregate.PolicyChanged, open *aggregate.PolicyProposal, bad func(string, ...any)) {
	if open == nil || open.Policy.Version != ch.Version {
		bad("version %d came into force by quorum without being the open proposal", ch.Version)
		return
	}
	if open.ProposedBy != ch.By || !open.Policy.SameRules(ch.Policy()) {
		bad("version %d in force is not what %s proposed", ch.Version, open.ProposedBy)
	}
	prior := make([]string, 0, len(open.Approvals))
	for _, a := range open.Approvals[1:] {
		prior = append(prior, a.By)
	}
	n := len(open.Approvals)
	switch last := len(ch.ApprovedBy) - 1; {
	case last < 0 || !slices.Equal(ch.ApprovedBy[:last], prior):
		bad("version %d names approvers %v; the proposal recorded %v before the last", ch.Version, ch.ApprovedBy, prior)
	case open.HasApproved(ch.ApprovedBy[last]):
		bad("version %d: %s approved it twice (the proposer counts as one)", ch.Version, ch.ApprovedBy[last])
	default:
		n++
	}
	if need := max(ch.Quorum, open.Quorum); n < need {
		bad("version %d came into force with %d distinct operators; its quorum is %d", ch.Version, n, need)
	}
}

// inForceAt is the policy in force for an event at stream sequence seq: the
// last version stored before it.
func (h policyHistory) inForceAt(seq uint64) policyVersion {
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].Sequence >= seq })
	if i == 0 {
		return h.versions[0]
	}
	return h.versions[i-1]
}

// version finds a version by number (0 is the built-in default).
func (h policyHistory) version(v int) (policyVersion, bool) {
	for _, p := range h.versions {
		if p.Policy.Version == v {
			return p, true
		}
	}
	return policyVersion{}, false
}

func (h policyHistory) current() policyVersion { return h.versions[len(h.versions)-1] }

// firstRequiringMore is the first version after seq that requires more
// than n approvals of w (or refuses its destination).
func (h policyHistory) firstRequiringMore(after uint64, w aggregate.Withdrawal, n int) (policyVersion, bool) {
	for _, p := range h.versions {
		if p.Sequence > after && unmet(aggregate.RequirementUnder(w, p.Policy), n) {
			return p, true
		}
	}
	return policyVersion{}, false
}
