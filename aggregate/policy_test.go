package aggregate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestNewPolicyRefusesAmbiguousRules(t *testing.T) {
	zero := Amount{}
	cases := []struct {
		name  string
		rules []Rule
		field string
	}{
		{"no rules", nil, "rules"},
		{"no rule at zero", []Rule{{Name: "a", Threshold: usdt("1"), Approvers: 1}}, "rules"},
		{"two rules at zero", []Rule{{Name: "a", Threshold: zero, Approvers: 1}, {Name: "b", Threshold: newAmount(bigInt(0), 6), Approvers: 2}}, "rules[1].threshold"},
		{"duplicate thresholds", []Rule{{Name: "a", Threshold: zero, Approvers: 1}, {Name: "b", Threshold: usdt("5"), Approvers: 2}, {Name: "c", Threshold: usdt("5.000"), Approvers: 3}}, "rules[2].threshold"},
		{"zero approvers", []Rule{{Name: "a", Threshold: zero, Approvers: 0}}, "rules[0].approvers"},
		{"negative threshold", []Rule{{Name: "a", Threshold: zero, Approvers: 1}, {Name: "b", Threshold: usdt("1").Sub(usdt("2")), Approvers: 1}}, "rules[1].threshold"},
		{"unnamed rule", []Rule{{Name: "", Threshold: zero, Approvers: 1}}, "rules[0].name"},
		{"duplicate rule names", []Rule{{Name: "a", Threshold: zero, Approvers: 1}, {Name: "a", Threshold: usdt("1"), Approvers: 2}}, "rules[1].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPolicy("p", tc.rules)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidPolicy || e.Field != tc.field {
				t.Fatalf("want invalid_policy on %s, got %#v", tc.field, err)
			}
		})
	}
	if _, err := NewPolicy("", []Rule{{Name: "a", Approvers: 1}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatal("unnamed policy accepted")
	}
}

func TestNewPolicySortsACopy(t *testing.T) {
	in := []Rule{{Name: "big", Threshold: usdt("100"), Approvers: 2}, {Name: "base", Approvers: 1}}
	p, err := NewPolicy("p", in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules[0].Name != "base" || in[0].Name != "big" {
		t.Fatalf("rules %v, input %v", p.Rules, in)
	}
	q := p.WithVersion(7)
	q.Rules[0].Approvers = 99
	if p.Rules[0].Approvers != 1 || q.Version != 7 || p.Version != 0 {
		t.Fatal("WithVersion shares rules")
	}
}

func TestParsePolicyJSON(t *testing.T) {
	good := `{"name":"tiers","rules":[{"name":"base","threshold":"0","approvers":1},{"name":"big","threshold":"1000.50","approvers":2}]}`
	p, err := ParsePolicyJSON([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "tiers" || len(p.Rules) != 2 || p.RuleFor(usdt("1000.5")).Approvers != 1 || p.RuleFor(usdt("1000.500001")).Approvers != 2 {
		t.Fatalf("%+v", p)
	}
	out, _ := json.Marshal(p.WithVersion(4))
	if string(out) != `{"version":4,"name":"tiers","rules":[{"name":"base","threshold":"0","approvers":1},{"name":"big","threshold":"1000.5","approvers":2}]}` {
		t.Fatalf("%s", out)
	}
	// What GET returns can be PUT back.
	if again, err := ParsePolicyJSON(out); err != nil || !again.SameRules(p) || again.Version != 0 {
		t.Fatalf("%v %v", again, err)
	}

	refused := []struct {
		name, doc, field string
	}{
		{"threshold as a number", `{"name":"p","rules":[{"name":"a","threshold":0,"approvers":1}]}`, "rules[0].threshold"},
		{"threshold with exponent", `{"name":"p","rules":[{"name":"a","threshold":"1e3","approvers":1}]}`, "rules[0].threshold"},
		{"threshold missing", `{"name":"p","rules":[{"name":"a","approvers":1}]}`, "rules[0].threshold"},
		{"approvers as a string", `{"name":"p","rules":[{"name":"a","threshold":"0","approvers":"1"}]}`, "rules[0].approvers"},
		{"approvers fractional", `{"name":"p","rules":[{"name":"a","threshold":"0","approvers":1.5}]}`, "rules[0].approvers"},
		{"approvers missing", `{"name":"p","rules":[{"name":"a","threshold":"0"}]}`, "rules[0].approvers"},
		{"no name", `{"rules":[{"name":"a","threshold":"0","approvers":1}]}`, "name"},
		{"no zero rule", `{"name":"p","rules":[{"name":"a","threshold":"1","approvers":1}]}`, "rules"},
		{"unknown member", `{"name":"p","rulez":[]}`, ""},
		{"unknown rule member", `{"name":"p","rules":[{"name":"a","threshold":"0","approvers":1,"x":1}]}`, "rules[0]"},
		{"trailing data", `{"name":"p","rules":[{"name":"a","threshold":"0","approvers":1}]} {}`, ""},
		{"not JSON", `name: p`, ""},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicyJSON([]byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidPolicy || e.Field != tc.field {
				t.Fatalf("want invalid_policy on %q, got %#v", tc.field, err)
			}
		})
	}
}

func TestPolicyChangesAreVersionedEvents(t *testing.T) {
	var s PolicyState
	evs, err := DecidePolicy(s, SetPolicy{Policy: DefaultPolicy(), By: "ops", At: t0})
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	s = EvolvePolicy(s, evs[0])
	if s.Policy.Version != 1 || s.ChangedBy != "ops" || !s.Policy.SameRules(DefaultPolicy()) {
		t.Fatalf("%+v", s)
	}
	if evs, err := DecidePolicy(s, SetPolicy{Policy: DefaultPolicy(), By: "other", At: at(1)}); err != nil || len(evs) != 0 {
		t.Fatal("the same policy again must be a replay", evs, err)
	}
	p2 := policyNeeding(t, 2, 0)
	evs, _ = DecidePolicy(s, SetPolicy{Policy: p2, By: "ops", At: at(2)})
	data, _ := json.Marshal(evs[0])
	back, err := DecodePolicyEvent(PolicyChangedType, data)
	if err != nil {
		t.Fatal(err)
	}
	s = FoldPolicy([]PolicyEvent{firstPolicyEvent(t, DefaultPolicy()), back})
	if s.Policy.Version != 2 || s.Policy.RuleFor(usdt("1")).Approvers != 2 || s.Events != 2 {
		t.Fatalf("%+v", s)
	}
	if _, err := DecidePolicy(s, SetPolicy{Policy: Policy{Name: "bad"}, By: "ops", At: t0}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatal(err)
	}
}

func firstPolicyEvent(t *testing.T, p Policy) PolicyEvent {
	evs, err := DecidePolicy(PolicyState{}, SetPolicy{Policy: p, By: "ops", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

func TestRoutesCannotBeBuiltInconsistent(t *testing.T) {
	if _, err := InternalRoute("", "custodied"); !errors.Is(err, ErrInvalidRoute) {
		t.Fatal("internal route without account")
	}
	if _, err := InternalRoute("acct-2", ""); !errors.Is(err, ErrInvalidRoute) {
		t.Fatal("route without reason")
	}
	if _, err := ExternalRoute(""); !errors.Is(err, ErrInvalidRoute) {
		t.Fatal("route without reason")
	}
	in, err := InternalRoute("acct-2", "custodied")
	if err != nil || in.Rail() != RailInternal || in.Account() != "acct-2" || !in.IsInternal() {
		t.Fatal(in, err)
	}
	ex, err := ExternalRoute("not custodied")
	if err != nil || ex.Rail() != RailExternal || ex.Account() != "" || !ex.IsExternal() {
		t.Fatal(ex, err)
	}
	for _, r := range []Route{in, ex, {}} {
		data, _ := json.Marshal(r)
		var back Route
		if err := json.Unmarshal(data, &back); err != nil || !back.Equal(r) {
			t.Fatalf("%s: %v %v", data, back, err)
		}
	}
	for _, doc := range []string{
		`{"rail":"internal","account":null,"reason":"x"}`,
		`{"rail":"internal","reason":"x"}`,
		`{"rail":"internal","account":"","reason":"x"}`,
		`{"rail":"external","account":"acct-2","reason":"x"}`,
		`{"rail":"external","account":null,"reason":""}`,
		`{"rail":"carrier-pigeon","account":null,"reason":"x"}`,
		`{"rail":"external","account":null,"reason":"x","extra":1}`,
	} {
		var r Route
		if err := json.Unmarshal([]byte(doc), &r); !errors.Is(err, ErrInvalidRoute) {
			t.Errorf("%s: accepted (%v)", doc, err)
		}
	}
}

func TestPolicyFixtures(t *testing.T) {
	cases := map[string]struct {
		ok       bool
		amount   string
		required int
	}{
		"four-eyes.json":                {true, "1000.000001", 2},
		"tiers.json":                    {true, "100000.5", 3},
		"invalid-number-threshold.json": {false, "", 0},
	}
	for file, want := range cases {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "policies", file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParsePolicyJSON(data)
		if (err == nil) != want.ok {
			t.Fatalf("%s: %v", file, err)
		}
		if want.ok && p.RuleFor(usdt(want.amount)).Approvers != want.required {
			t.Errorf("%s: %s needs %d", file, want.amount, p.RuleFor(usdt(want.amount)).Approvers)
		}
	}
	data, _ := os.ReadFile(filepath.Join("..", "testdata", "policies", "four-eyes.json"))
	if p, _ := ParsePolicyJSON(data); !p.SameRules(DefaultPolicy()) {
		t.Error("four-eyes.json is not the default policy")
	}
}
