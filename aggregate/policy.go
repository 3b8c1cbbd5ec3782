package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Rule says how many distinct approvers (never the requester) an amount
// needs. A rule's Threshold is the amount it must be exceeded by: the rule
// applies to amounts strictly greater than Threshold. The rule at zero
// therefore covers every amount (amounts are always > 0), and a rule at 1000
// starts at 1000.000001 USDT — "four-eyes above 1000" means exactly that.
type Rule struct {
	Name      string `json:"name"`
	Threshold Amount `json:"threshold"`
	Approvers int    `json:"approvers"`
}

// MarshalJSON writes the threshold in canonical decimal form ("1000").
func (r Rule) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name      string `json:"name"`
		Threshold string `json:"threshold"`
		Approvers int    `json:"approvers"`
	}{r.Name, r.Threshold.String(), r.Approvers})
}

// Policy is the approval policy in force: named rules, one of them starting at
// zero. Version is assigned when the policy is stored (the policy stream's
// PolicyChanged events); approvals record it. Treat Rules as read-only: build
// policies with NewPolicy, which copies.
type Policy struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Rules   []Rule `json:"rules"`
	// Destinations and Velocity add approvers per account (see
	// policy_rules.go); both absent in policies written before them, which
	// mean what they meant.
	Destinations []DestinationRule `json:"destinations,omitempty"`
	Velocity     []VelocityTier    `json:"velocity,omitempty"`
}

const (
	maxPolicyRules = 32
	maxApprovers   = 100
	maxNameLen     = 128
)

// NewPolicy validates rules and returns a policy (version 0, i.e. not yet
// stored) whose rules are a sorted copy of the input, lowest threshold first.
// Refused, with invalid_policy naming the field: no name, no rules, a rule
// without a name or with a duplicate name, a negative threshold, not exactly
// one rule at zero, two rules at the same threshold, approvers < 1.
func NewPolicy(name string, rules []Rule) (Policy, error) {
	return Policy{Name: name, Rules: rules}.Normalized()
}

// Normalized validates p and returns a copy (version 0) whose amount rules
// are sorted, lowest threshold first; destination rules and velocity tiers
// keep their order. See NewPolicy and validateExtras for what is refused.
func (p Policy) Normalized() (Policy, error) {
	p = p.WithVersion(0)
	// Validate before sorting so that field indexes name the input's rules.
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	slices.SortStableFunc(p.Rules, func(a, b Rule) int { return a.Threshold.Cmp(b.Threshold) })
	return p, nil
}

// WithVersion returns a copy of the policy carrying version v.
func (p Policy) WithVersion(v int) Policy {
	p.Rules = slices.Clone(p.Rules)
	p.Destinations = slices.Clone(p.Destinations)
	p.Velocity = slices.Clone(p.Velocity)
	p.Version = v
	return p
}

// Validate checks the rules NewPolicy checks; deciders call it on every policy
// they are handed, because a Policy can also be built as a literal.
func (p Policy) Validate() error {
	if err := checkName("name", p.Name); err != nil {
		return err
	}
	if p.Version < 0 {
		return newError(CodeInvalidPolicy, "version", "negative")
	}
	if len(p.Rules) == 0 {
		return newError(CodeInvalidPolicy, "rules", "at least one rule (starting at threshold 0) is required")
	}
	if len(p.Rules) > maxPolicyRules {
		return newError(CodeInvalidPolicy, "rules", "more than %d rules", maxPolicyRules)
	}
	zeros := 0
	for i, r := range p.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if err := checkName(f+".name", r.Name); err != nil {
			return err
		}
		if r.Threshold.Sign() < 0 {
			return newError(CodeInvalidPolicy, f+".threshold", "negative")
		}
		if r.Threshold.IsZero() {
			zeros++
		}
		if r.Approvers < 1 {
			return newError(CodeInvalidPolicy, f+".approvers", "at least 1 approver is required")
		}
		if r.Approvers > maxApprovers {
			return newError(CodeInvalidPolicy, f+".approvers", "more than %d approvers", maxApprovers)
		}
		for j := range i {
			if p.Rules[j].Name == r.Name {
				return newError(CodeInvalidPolicy, f+".name", "duplicate rule name %q", r.Name)
			}
			if p.Rules[j].Threshold.Equal(r.Threshold) {
				return newError(CodeInvalidPolicy, f+".threshold", "duplicate threshold %s (also rules[%d])", r.Threshold, j)
			}
		}
	}
	if zeros != 1 {
		return newError(CodeInvalidPolicy, "rules", "exactly one rule must start at threshold 0 (found %d)", zeros)
	}
	return p.validateExtras()
}

func checkName(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return newError(CodeInvalidPolicy, field, "required")
	}
	if len(s) > maxNameLen {
		return newError(CodeInvalidPolicy, field, "longer than %d characters", maxNameLen)
	}
	for _, c := range s {
		if c < ' ' || c == 0x7f {
			return newError(CodeInvalidPolicy, field, "control characters are not allowed")
		}
	}
	return nil
}

// RuleFor returns the rule that applies to amount: the one with the highest
// threshold strictly below the amount, else the rule at zero. It does not
// depend on the order of Rules. The policy must be valid.
func (p Policy) RuleFor(amount Amount) Rule {
	var best Rule
	found := false
	for _, r := range p.Rules {
		if r.Threshold.Cmp(amount) < 0 && (!found || r.Threshold.Cmp(best.Threshold) > 0) {
			best, found = r, true
		}
	}
	if !found {
		for _, r := range p.Rules {
			if r.Threshold.IsZero() {
				return r
			}
		}
	}
	return best
}

// SameRules reports whether p and q say the same thing (name, rules,
// destination rules and velocity tiers, in any order), whatever their
// versions.
func (p Policy) SameRules(q Policy) bool {
	if p.Name != q.Name || len(p.Rules) != len(q.Rules) || !p.sameExtras(q) {
		return false
	}
	for _, r := range p.Rules {
		i := slices.IndexFunc(q.Rules, func(s Rule) bool { return s.Name == r.Name })
		if i < 0 || !q.Rules[i].Threshold.Equal(r.Threshold) || q.Rules[i].Approvers != r.Approvers {
			return false
		}
	}
	return true
}

// FourEyes is the policy "amounts above `above` need two approvers, every
// other amount one": rules "single" at 0 (1 approver) and "four-eyes" at
// above (2 approvers). above must be greater than zero.
func FourEyes(above Amount) (Policy, error) {
	return NewPolicy("four-eyes above "+above.String(), []Rule{
		{Name: "single", Threshold: Amount{}, Approvers: 1},
		{Name: "four-eyes", Threshold: above, Approvers: 2},
	})
}

// DefaultPolicy is weir's default: four-eyes above 1000 USDT.
func DefaultPolicy() Policy {
	p, err := FourEyes(MustParseAmount(USDT, "1000"))
	if err != nil {
		panic(err) // a constant policy; cannot fail
	}
	return p
}

// ParsePolicyJSON reads CONTRACT.md's policy document
// {"name","rules":[{"name","threshold","approvers"}]}, with optional
// "destinations" and "velocity" (see policy_rules.go). Thresholds must be
// JSON strings in ParseAmount's grammar (zero allowed); approvers a JSON
// integer. A "version" member is tolerated and ignored, so the output of
// GET /v1/policy can be sent back: the store assigns versions. Unknown
// members and trailing data are refused. Every refusal is invalid_policy.
func ParsePolicyJSON(data []byte) (Policy, error) {
	var doc struct {
		Version      json.RawMessage   `json:"version"`
		Name         *string           `json:"name"`
		Rules        []json.RawMessage `json:"rules"`
		Destinations []json.RawMessage `json:"destinations"`
		Velocity     []json.RawMessage `json:"velocity"`
	}
	if err := strictDecode(data, &doc); err != nil {
		return Policy{}, newError(CodeInvalidPolicy, "", "malformed policy JSON: %v", err)
	}
	if doc.Name == nil {
		return Policy{}, newError(CodeInvalidPolicy, "name", "required")
	}
	rules := make([]Rule, 0, len(doc.Rules))
	for i, raw := range doc.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		var rd struct {
			Name      *string         `json:"name"`
			Threshold json.RawMessage `json:"threshold"`
			Approvers json.RawMessage `json:"approvers"`
		}
		if err := strictDecode(raw, &rd); err != nil {
			return Policy{}, newError(CodeInvalidPolicy, f, "malformed rule: %v", err)
		}
		if rd.Name == nil {
			return Policy{}, newError(CodeInvalidPolicy, f+".name", "required")
		}
		th, err := parseThreshold(rd.Threshold)
		if err != nil {
			return Policy{}, newError(CodeInvalidPolicy, f+".threshold", "%s", err.(*Error).Message)
		}
		if len(bytes.TrimSpace(rd.Approvers)) == 0 {
			return Policy{}, newError(CodeInvalidPolicy, f+".approvers", "required")
		}
		var n int
		if err := json.Unmarshal(rd.Approvers, &n); err != nil {
			return Policy{}, newError(CodeInvalidPolicy, f+".approvers", "must be a JSON integer")
		}
		rules = append(rules, Rule{Name: *rd.Name, Threshold: th, Approvers: n})
	}
	dests, velocity, err := parseExtrasJSON(doc.Destinations, doc.Velocity)
	if err != nil {
		return Policy{}, err
	}
	return Policy{Name: *doc.Name, Rules: rules, Destinations: dests, Velocity: velocity}.Normalized()
}

func parseThreshold(raw json.RawMessage) (Amount, error) {
	s, err := jsonDecimalString("threshold", raw)
	if err != nil {
		return Amount{}, err
	}
	return parseDecimal("threshold", s)
}

// UnmarshalJSON reads a rule as stored in events: the threshold must be a
// JSON string (zero allowed). It does not validate the policy.
func (r *Rule) UnmarshalJSON(data []byte) error {
	var rd struct {
		Name      string          `json:"name"`
		Threshold json.RawMessage `json:"threshold"`
		Approvers int             `json:"approvers"`
	}
	if err := json.Unmarshal(data, &rd); err != nil {
		return err
	}
	th, err := parseThreshold(rd.Threshold)
	if err != nil {
		return err
	}
	*r = Rule{Name: rd.Name, Threshold: th, Approvers: rd.Approvers}
	return nil
}

// strictDecode decodes exactly one JSON value with no unknown members.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
