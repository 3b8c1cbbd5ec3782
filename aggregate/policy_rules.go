package aggregate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Destination and velocity rules of the approval policy. The amount rules
// (Policy.Rules) say how many approvers an amount needs; these add to that
// number, per account:
//
//   - a destination rule is an allow-list of destinations for the accounts
//     it names (globs, as principals' scopes): a destination not on it is
//     refused at request (destination_not_allowed, nothing appended) or
//     needs ExtraApprovers more approvers, as the rule says;
//   - a velocity tier raises the approvers needed once the account's sum
//     sent in the VelocityWindow before the request, plus this amount, is
//     above the tier's Above. Of the tiers naming an account, the one with
//     the highest Above exceeded applies.
//
// Required = the amount rule's approvers + the extra approvers of every
// destination rule and of the velocity tier that apply. The decision
// records which applied (AppliedRule) so that the audit can judge it then
// and now.

// VelocityWindow is the rolling window a velocity tier sums over.
const VelocityWindow = 24 * time.Hour

// Kinds of AppliedRule.
const (
	RuleKindDestination = "destination"
	RuleKindVelocity    = "velocity"
)

// Values of DestinationRule.Unlisted.
const (
	UnlistedRefuse         = "refuse"
	UnlistedExtraApprovers = "extra_approvers"
)

const (
	maxExtraRules     = 32
	maxRuleAccounts   = 64
	maxAllowedAddress = 1000
)

// DestinationRule is an allow-list of destinations for the accounts it
// names. Unlisted says what a destination not on Allow meets: "refuse", or
// "extra_approvers" (ExtraApprovers more approvers).
type DestinationRule struct {
	Name           string   `json:"name"`
	Accounts       []string `json:"accounts"`
	Allow          []string `json:"allow"`
	Unlisted       string   `json:"unlisted"`
	ExtraApprovers int      `json:"extra_approvers,omitempty"`
}

// VelocityTier raises the approvers needed by ExtraApprovers when the sum
// an account sent in the VelocityWindow before a request, plus the amount
// requested, is above Above. Accounts (globs) limits it to those accounts;
// empty means every account.
type VelocityTier struct {
	Name           string   `json:"name"`
	Accounts       []string `json:"accounts,omitempty"`
	Above          Amount   `json:"above"`
	ExtraApprovers int      `json:"extra_approvers"`
}

// MarshalJSON writes Above in canonical decimal form ("10000").
func (t VelocityTier) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name           string   `json:"name"`
		Accounts       []string `json:"accounts,omitempty"`
		Above          string   `json:"above"`
		ExtraApprovers int      `json:"extra_approvers"`
	}{t.Name, t.Accounts, t.Above.String(), t.ExtraApprovers})
}

// UnmarshalJSON reads a tier as stored in events (Above a JSON string,
// zero allowed). It does not validate the policy.
func (t *VelocityTier) UnmarshalJSON(data []byte) error {
	var td struct {
		Name           string          `json:"name"`
		Accounts       []string        `json:"accounts"`
		Above          json.RawMessage `json:"above"`
		ExtraApprovers int             `json:"extra_approvers"`
	}
	if err := json.Unmarshal(data, &td); err != nil {
		return err
	}
	above, err := parseDecimalJSON("above", td.Above)
	if err != nil {
		return err
	}
	*t = VelocityTier{Name: td.Name, Accounts: td.Accounts, Above: above, ExtraApprovers: td.ExtraApprovers}
	return nil
}

func parseDecimalJSON(field string, raw json.RawMessage) (Amount, error) {
	s, err := jsonDecimalString(field, raw)
	if err != nil {
		return Amount{}, err
	}
	return parseDecimal(field, s)
}

// AppliedRule is a destination rule or velocity tier that raised what a
// withdrawal needs: its kind and name, the approvers it added and, for a
// velocity tier, the window sum it judged (sent before the request, this
// withdrawal not included).
type AppliedRule struct {
	Kind           string  `json:"kind"`
	Name           string  `json:"name"`
	ExtraApprovers int     `json:"extra_approvers"`
	WindowSum      *Amount `json:"window_sum,omitempty"`
}

// MarshalJSON writes window_sum in canonical decimal form ("60"), as the
// withdrawal JSON writes amounts; any decimal string reads back.
func (r AppliedRule) MarshalJSON() ([]byte, error) {
	var sum *string
	if r.WindowSum != nil {
		s := r.WindowSum.String()
		sum = &s
	}
	return json.Marshal(struct {
		Kind           string  `json:"kind"`
		Name           string  `json:"name"`
		ExtraApprovers int     `json:"extra_approvers"`
		WindowSum      *string `json:"window_sum,omitempty"`
	}{r.Kind, r.Name, r.ExtraApprovers, sum})
}

func (r AppliedRule) String() string {
	if r.WindowSum != nil {
		return fmt.Sprintf("%s %q +%d (window sum %s)", r.Kind, r.Name, r.ExtraApprovers, r.WindowSum)
	}
	return fmt.Sprintf("%s %q +%d", r.Kind, r.Name, r.ExtraApprovers)
}

// SameApplied reports whether two lists of applied rules say the same.
func SameApplied(a, b []AppliedRule) bool {
	return slices.EqualFunc(a, b, func(x, y AppliedRule) bool {
		if x.Kind != y.Kind || x.Name != y.Name || x.ExtraApprovers != y.ExtraApprovers || (x.WindowSum == nil) != (y.WindowSum == nil) {
			return false
		}
		return x.WindowSum == nil || x.WindowSum.Equal(*y.WindowSum)
	})
}

// RequestFacts is what the policy judges a withdrawal by. WindowSum is the
// sum the account sent in the VelocityWindow before the request (nil when
// it was not measured: requested while no velocity tier named the account;
// a tier then judges the amount alone).
type RequestFacts struct {
	Account   string
	ToAddress string
	Amount    Amount
	WindowSum *Amount
}

// Assessment is what a policy requires of a withdrawal: its amount rule,
// the destination and velocity rules that add to it, and the total.
// RefusedBy names the destination rule that refuses the destination (Assess
// then also returns destination_not_allowed).
type Assessment struct {
	Rule         Rule
	AppliedRules []AppliedRule
	Approvers    int
	RefusedBy    string
}

// Assess judges facts under p: the approvers needed and the rules that
// say so, or destination_not_allowed (field to_address, and RefusedBy
// set) when a destination rule naming the account refuses the destination. The policy must be
// valid.
func (p Policy) Assess(f RequestFacts) (Assessment, error) {
	rule := p.RuleFor(f.Amount)
	as := Assessment{Rule: rule, Approvers: rule.Approvers}
	for _, d := range p.Destinations {
		if !matchAccount(d.Accounts, f.Account) || slices.Contains(d.Allow, f.ToAddress) {
			continue
		}
		if d.Unlisted == UnlistedRefuse {
			as.RefusedBy = d.Name
			return as, newError(CodeDestinationNotAllowed, "to_address",
				"%s is not on the allow-list of destination rule %q (policy %q v%d) for account %s", f.ToAddress, d.Name, p.Name, p.Version, f.Account)
		}
		as.AppliedRules = append(as.AppliedRules, AppliedRule{Kind: RuleKindDestination, Name: d.Name, ExtraApprovers: d.ExtraApprovers})
		as.Approvers += d.ExtraApprovers
	}
	if t, ok := p.velocityTier(f); ok {
		var sum *Amount // unmeasured: recorded as such, never as a zero
		if f.WindowSum != nil {
			s := f.WindowSum.pin()
			sum = &s
		}
		as.AppliedRules = append(as.AppliedRules, AppliedRule{Kind: RuleKindVelocity, Name: t.Name, ExtraApprovers: t.ExtraApprovers, WindowSum: sum})
		as.Approvers += t.ExtraApprovers
	}
	return as, nil
}

// velocityTier is the tier that applies to f: of those naming the account,
// the one with the highest Above that the window sum plus the amount
// exceeds. A request with no window sum — judged at its request under a
// policy that named no tier for the account, so nobody measured it — is
// judged as exceeding every tier: a tier added since then is never passed
// on a sum taken for zero (it fails closed, to the highest tier).
func (p Policy) velocityTier(f RequestFacts) (VelocityTier, bool) {
	var total Amount
	if f.WindowSum != nil {
		total = f.WindowSum.pin().Add(f.Amount)
	}
	var best VelocityTier
	found := false
	for _, t := range p.Velocity {
		if !matchAccount(t.Accounts, f.Account) || f.WindowSum != nil && total.Cmp(t.Above) <= 0 {
			continue
		}
		if !found || t.Above.Cmp(best.Above) > 0 {
			best, found = t, true
		}
	}
	return best, found
}

// MeasuresVelocity reports whether a velocity tier names account, i.e.
// whether a request on it needs its window sum.
func (p Policy) MeasuresVelocity(account string) bool {
	return slices.ContainsFunc(p.Velocity, func(t VelocityTier) bool { return matchAccount(t.Accounts, account) })
}

// matchAccount: an empty list names every account; otherwise one of the
// globs must match (path.Match, as principals' account scopes).
func matchAccount(globs []string, account string) bool {
	if len(globs) == 0 {
		return true
	}
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, account)
		return ok
	})
}

// validateExtras checks the destination rules and velocity tiers.
func (p Policy) validateExtras() error {
	if len(p.Destinations) > maxExtraRules {
		return newError(CodeInvalidPolicy, "destinations", "more than %d destination rules", maxExtraRules)
	}
	if len(p.Velocity) > maxExtraRules {
		return newError(CodeInvalidPolicy, "velocity", "more than %d velocity tiers", maxExtraRules)
	}
	for i, d := range p.Destinations {
		f := fmt.Sprintf("destinations[%d]", i)
		if err := checkUniqueName(f+".name", d.Name, p.Destinations[:i], func(o DestinationRule) string { return o.Name }); err != nil {
			return err
		}
		if len(d.Accounts) == 0 {
			return newError(CodeInvalidPolicy, f+".accounts", "at least one account (or glob such as \"*\") is required")
		}
		if err := checkGlobs(f+".accounts", d.Accounts); err != nil {
			return err
		}
		if len(d.Allow) > maxAllowedAddress {
			return newError(CodeInvalidPolicy, f+".allow", "more than %d addresses", maxAllowedAddress)
		}
		for j, a := range d.Allow {
			af := fmt.Sprintf("%s.allow[%d]", f, j)
			if err := checkAddress(a); err != nil {
				return newError(CodeInvalidPolicy, af, "%s", err.(*Error).Message)
			}
			if slices.Contains(d.Allow[:j], a) {
				return newError(CodeInvalidPolicy, af, "duplicate address %s", a)
			}
		}
		switch d.Unlisted {
		case UnlistedRefuse:
			if d.ExtraApprovers != 0 {
				return newError(CodeInvalidPolicy, f+".extra_approvers", "only with \"unlisted\":%q", UnlistedExtraApprovers)
			}
		case UnlistedExtraApprovers:
			if err := checkExtra(f+".extra_approvers", d.ExtraApprovers); err != nil {
				return err
			}
		case "":
			return newError(CodeInvalidPolicy, f+".unlisted", "required: %q or %q", UnlistedRefuse, UnlistedExtraApprovers)
		default:
			return newError(CodeInvalidPolicy, f+".unlisted", "must be %q or %q", UnlistedRefuse, UnlistedExtraApprovers)
		}
	}
	for i, t := range p.Velocity {
		f := fmt.Sprintf("velocity[%d]", i)
		if err := checkUniqueName(f+".name", t.Name, p.Velocity[:i], func(o VelocityTier) string { return o.Name }); err != nil {
			return err
		}
		if err := checkGlobs(f+".accounts", t.Accounts); err != nil {
			return err
		}
		if t.Above.Sign() < 0 {
			return newError(CodeInvalidPolicy, f+".above", "negative")
		}
		if err := checkExtra(f+".extra_approvers", t.ExtraApprovers); err != nil {
			return err
		}
	}
	return nil
}

// checkUniqueName checks a rule's name and that no earlier rule of its
// list has it.
func checkUniqueName[R any](field, name string, earlier []R, nameOf func(R) string) error {
	if err := checkName(field, name); err != nil {
		return err
	}
	if slices.ContainsFunc(earlier, func(o R) bool { return nameOf(o) == name }) {
		return newError(CodeInvalidPolicy, field, "duplicate name %q", name)
	}
	return nil
}

func checkExtra(field string, n int) error {
	if n < 1 {
		return newError(CodeInvalidPolicy, field, "at least 1")
	}
	if n > maxApprovers {
		return newError(CodeInvalidPolicy, field, "more than %d approvers", maxApprovers)
	}
	return nil
}

func checkGlobs(field string, globs []string) error {
	if len(globs) > maxRuleAccounts {
		return newError(CodeInvalidPolicy, field, "more than %d accounts", maxRuleAccounts)
	}
	for j, g := range globs {
		gf := fmt.Sprintf("%s[%d]", field, j)
		if err := checkToken(CodeInvalidPolicy, gf, g); err != nil {
			return err
		}
		if _, err := path.Match(g, ""); err != nil {
			return newError(CodeInvalidPolicy, gf, "not a valid glob: %v", err)
		}
	}
	return nil
}

// sameExtras reports whether p and q have the same destination rules and
// velocity tiers (in any order of rules).
func (p Policy) sameExtras(q Policy) bool {
	return bytes.Equal(p.canonicalExtras(), q.canonicalExtras())
}

func (p Policy) canonicalExtras() []byte {
	d := slices.Clone(p.Destinations)
	slices.SortFunc(d, func(a, b DestinationRule) int { return strings.Compare(a.Name, b.Name) })
	v := slices.Clone(p.Velocity)
	slices.SortFunc(v, func(a, b VelocityTier) int { return strings.Compare(a.Name, b.Name) })
	b, _ := json.Marshal(struct {
		D []DestinationRule
		V []VelocityTier
	}{d, v})
	return b
}

// parseExtrasJSON reads the "destinations" and "velocity" members of a
// policy document strictly (unknown members refused, amounts as strings,
// counts as integers).
func parseExtrasJSON(dests, velocity []json.RawMessage) ([]DestinationRule, []VelocityTier, error) {
	var ds []DestinationRule
	for i, raw := range dests {
		f := fmt.Sprintf("destinations[%d]", i)
		var d struct {
			Name           *string         `json:"name"`
			Accounts       []string        `json:"accounts"`
			Allow          []string        `json:"allow"`
			Unlisted       *string         `json:"unlisted"`
			ExtraApprovers json.RawMessage `json:"extra_approvers"`
		}
		if err := strictDecode(raw, &d); err != nil {
			return nil, nil, newError(CodeInvalidPolicy, f, "malformed destination rule: %v", err)
		}
		if d.Name == nil {
			return nil, nil, newError(CodeInvalidPolicy, f+".name", "required")
		}
		if d.Allow == nil {
			return nil, nil, newError(CodeInvalidPolicy, f+".allow", "required (a list of addresses, may be empty)")
		}
		if d.Unlisted == nil {
			return nil, nil, newError(CodeInvalidPolicy, f+".unlisted", "required: %q or %q", UnlistedRefuse, UnlistedExtraApprovers)
		}
		n, err := optionalInt(f+".extra_approvers", d.ExtraApprovers)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, DestinationRule{Name: *d.Name, Accounts: d.Accounts, Allow: d.Allow, Unlisted: *d.Unlisted, ExtraApprovers: n})
	}
	var vs []VelocityTier
	for i, raw := range velocity {
		f := fmt.Sprintf("velocity[%d]", i)
		var t struct {
			Name           *string         `json:"name"`
			Accounts       []string        `json:"accounts"`
			Above          json.RawMessage `json:"above"`
			ExtraApprovers json.RawMessage `json:"extra_approvers"`
		}
		if err := strictDecode(raw, &t); err != nil {
			return nil, nil, newError(CodeInvalidPolicy, f, "malformed velocity tier: %v", err)
		}
		if t.Name == nil {
			return nil, nil, newError(CodeInvalidPolicy, f+".name", "required")
		}
		above, err := parseDecimalJSON("above", t.Above)
		if err != nil {
			return nil, nil, newError(CodeInvalidPolicy, f+".above", "%s", err.(*Error).Message)
		}
		if len(bytes.TrimSpace(t.ExtraApprovers)) == 0 {
			return nil, nil, newError(CodeInvalidPolicy, f+".extra_approvers", "required")
		}
		n, err := optionalInt(f+".extra_approvers", t.ExtraApprovers)
		if err != nil {
			return nil, nil, err
		}
		vs = append(vs, VelocityTier{Name: *t.Name, Accounts: t.Accounts, Above: above, ExtraApprovers: n})
	}
	return ds, vs, nil
}

func optionalInt(field string, raw json.RawMessage) (int, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return 0, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, newError(CodeInvalidPolicy, field, "must be a JSON integer")
	}
	return n, nil
}
