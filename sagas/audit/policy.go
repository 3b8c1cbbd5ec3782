package audit

import (
	"fmt"
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
// reporting a gap, an undecodable event, a skipped version or an invalid
// policy; each valid-looking version still enters the history so that the
// withdrawals can be judged against what was stored.
func buildPolicyHistory(recs []eventstore.Record, report func(Finding)) policyHistory {
	h := policyHistory{versions: []policyVersion{{Policy: aggregate.DefaultPolicy()}}}
	var s aggregate.PolicyState
	for i, r := range recs {
		f := Finding{Severity: Violation, Check: "policy", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type}
		if r.AggregateVersion != uint64(i+1) {
			f.What = fmt.Sprintf("policy stream: event %d has version %d", i+1, r.AggregateVersion)
			report(f)
		}
		e, err := aggregate.DecodePolicyEvent(r.Type, r.Payload)
		if err != nil {
			f.What = fmt.Sprintf("policy stream: event %d (%s): %v", r.AggregateVersion, r.Type, err)
			report(f)
			continue
		}
		ch, ok := e.(aggregate.PolicyChanged)
		if !ok {
			continue
		}
		if ch.Version != s.Policy.Version+1 {
			f.What = fmt.Sprintf("policy stream: version %d follows version %d", ch.Version, s.Policy.Version)
			report(f)
		}
		s = aggregate.EvolvePolicy(s, ch)
		if err := s.Policy.Validate(); err != nil {
			f.What = fmt.Sprintf("policy stream: version %d is not a valid policy: %v", ch.Version, err)
			report(f)
		}
		h.versions = append(h.versions, policyVersion{Policy: s.Policy, Sequence: r.Sequence, At: ch.At, By: ch.By})
	}
	return h
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
// than n approvals for amount.
func (h policyHistory) firstRequiringMore(after uint64, amount aggregate.Amount, n int) (policyVersion, bool) {
	for _, p := range h.versions {
		if p.Sequence > after && p.Policy.Required(amount) > n {
			return p, true
		}
	}
	return policyVersion{}, false
}
