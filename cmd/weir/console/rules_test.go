package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/console"
)

// rulesPolicy has an allow-list that asks one more approver for acme's
// unlisted destinations, one that refuses payroll's, and a velocity tier
// for every account.
const rulesPolicy = `{"name":"payees and pace",
 "rules":[{"name":"single","threshold":"0","approvers":1},{"name":"four-eyes","threshold":"1000","approvers":2}],
 "destinations":[
   {"name":"acme-payees","accounts":["acme"],"allow":["TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"],"unlisted":"extra_approvers","extra_approvers":1},
   {"name":"payroll-payees","accounts":["payroll-*","other"],"allow":["TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy","TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY"],"unlisted":"refuse"}],
 "velocity":[{"name":"busy day","above":"100","extra_approvers":1}]}`

// The policy page shows the destination rules (accounts, allow-list, what
// an unlisted destination meets) and the velocity tiers (accounts, the sum
// above which, extra approvers) of the policy in force and of each version
// in the history; a policy without them says so.
func TestPolicyPageShowsDestinationRulesAndVelocityTiers(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	b := newBrowser(t, srv)
	b.login(tokBob)
	mustContain(t, b.get("/console/policy"), "None: any destination, no extra approvers.", "None: the 24 h sum adds no approvers.")

	pol, err := aggregate.ParsePolicyJSON([]byte(rulesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.intake.SetPolicy(context.Background(), pol, "olivia"); err != nil {
		t.Fatal(err)
	}
	p := b.get("/console/policy")
	if p.status != http.StatusOK {
		t.Fatalf("policy: %d\n%s", p.status, p.body)
	}
	mustContain(t, p,
		"In force: payees and pace",
		// destination rules, both kinds of unlisted
		`<td>acme-payees</td>`, `<td>acme</td>`, `<li class="addr">TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy</li>`, "+1 approver(s)",
		`<td>payroll-payees</td>`, `<td>payroll-*, other</td>`, `<li class="addr">TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY</li>`,
		"<strong>refused</strong>", "destination_not_allowed",
		// velocity tier
		`<td>busy day</td>`, "every account", `<td class="num">100</td>`, "<td>+1</td>",
		// the history's version carries them too
		"Destination rules (2) and velocity tiers (1)",
	)
	mustNotContain(t, p, "None: any destination")

	// A proposal waiting for its quorum shows its own rules beside those
	// in force.
	s.intake.SetPolicyQuorum(2)
	next, err := aggregate.ParsePolicyJSON([]byte(`{"name":"tighter","rules":[{"name":"single","threshold":"0","approvers":1}],
	 "velocity":[{"name":"slow week","accounts":["acme","other"],"above":"2500.5","extra_approvers":3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.intake.ProposePolicy(context.Background(), next, "olivia"); err != nil || c.Proposal == nil {
		t.Fatalf("propose: %+v %v", c, err)
	}
	p = b.get("/console/policy")
	i := strings.Index(p.body, `id="proposal"`)
	if i < 0 {
		t.Fatalf("no proposal section:\n%s", p.body)
	}
	proposal := p.body[i:strings.Index(p.body, "<h2>History</h2>")]
	for _, want := range []string{"Proposed: tighter", "<td>slow week</td>", "<td>acme, other</td>", `<td class="num">2500.5</td>`, "<td>+3</td>", "None: any destination, no extra approvers."} {
		if !strings.Contains(proposal, want) {
			t.Fatalf("proposal section lacks %q:\n%s", want, proposal)
		}
	}
	if strings.Contains(proposal, "busy day") {
		t.Fatalf("the proposal shows the rules in force:\n%s", proposal)
	}
}

// The withdrawal page shows the rules that raised what it needs (kind,
// name, extra approvers, the 24 h sum a velocity tier judged) and the
// window sum measured at the request; before any receipt it says so.
func TestWithdrawalPageShowsAppliedRulesAndWindowSum(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	pol, err := aggregate.ParsePolicyJSON([]byte(rulesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.intake.SetPolicy(context.Background(), pol, "olivia"); err != nil {
		t.Fatal(err)
	}
	first := s.request(t, "acme", "60", "alice")
	id := s.request(t, "acme", "5000", "alice")
	b := newBrowser(t, srv)
	b.login(tokBob)

	p := b.get("/console/withdrawals/" + id)
	if p.status != http.StatusOK {
		t.Fatalf("withdrawal: %d\n%s", p.status, p.body)
	}
	// four-eyes (2) + acme-payees (1) + busy day (1: 60 + 5000 > 100)
	mustContain(t, p, "0 of 4",
		"destination rule “acme-payees”: +1 approver(s)",
		"velocity tier “busy day”: +1 approver(s) <span class=\"muted\">(24 h sum 60)</span>",
		`id="window-sum">60 USDT-TRC20`,
		"No receipt yet", `id="fee-burned"><span class="muted">none recorded`)

	// The first one: the window was empty, the tier judged 60 alone.
	p = b.get("/console/withdrawals/" + first)
	mustContain(t, p, "destination rule “acme-payees”", `id="window-sum">0 USDT-TRC20`)
	mustNotContain(t, p, "velocity tier")

	// dev is named by no destination rule; without a velocity tier in
	// force the sum is not measured.
	plain, err := aggregate.ParsePolicyJSON([]byte(`{"name":"plain","rules":[{"name":"single","threshold":"0","approvers":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.intake.SetPolicy(context.Background(), plain, "olivia"); err != nil {
		t.Fatal(err)
	}
	p = b.get("/console/withdrawals/" + s.request(t, "dev", "5", "alice"))
	mustContain(t, p, "the amount rule alone", "not measured (no velocity tier named the account then)")
}
