package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	allowedAddr = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy" // toAddr
	otherAddr   = "TJRabPrwbZy45sbavfcjinPJC18kjpRTv8"
)

// rulesPolicy: one approver for every amount; for acme, destinations off
// the list refused; for ops-*, two more approvers off the list; every
// account one more approver once its 24 h sum passes 10000, two more past
// 50000.
func rulesPolicy(t testing.TB, version int) Policy {
	t.Helper()
	p, err := ParsePolicyJSON([]byte(`{"name":"rules","rules":[{"name":"single","threshold":"0","approvers":1}],
	 "destinations":[
	   {"name":"acme-payees","accounts":["acme"],"allow":["` + allowedAddr + `"],"unlisted":"refuse"},
	   {"name":"ops-payees","accounts":["ops-*"],"allow":["` + allowedAddr + `"],"unlisted":"extra_approvers","extra_approvers":2}],
	 "velocity":[
	   {"name":"busy","above":"10000","extra_approvers":1},
	   {"name":"very-busy","above":"50000","extra_approvers":2}]}`))
	if err != nil {
		t.Fatalf("ParsePolicyJSON: %v", err)
	}
	return p.WithVersion(version)
}

// amt is usdt allowing zero (sums may be zero, amounts may not).
func amt(s string) Amount {
	if s == "0" {
		return USDT.Zero()
	}
	return usdt(s)
}

func amountPtr(s string) *Amount { a := amt(s); return &a }

func TestAssessAppliesDestinationAndVelocityRules(t *testing.T) {
	p := rulesPolicy(t, 1)
	cases := []struct {
		name      string
		facts     RequestFacts
		refused   string
		approvers int
		applied   []string
	}{
		{"listed destination", RequestFacts{Account: "acme", ToAddress: allowedAddr, Amount: usdt("10"), WindowSum: amountPtr("0")}, "", 1, nil},
		{"unlisted destination refused", RequestFacts{Account: "acme", ToAddress: otherAddr, Amount: usdt("10"), WindowSum: amountPtr("0")}, "acme-payees", 0, nil},
		{"unlisted destination needs two more", RequestFacts{Account: "ops-eu", ToAddress: otherAddr, Amount: usdt("10"), WindowSum: amountPtr("0")}, "", 3, []string{"destination/ops-payees+2"}},
		{"account no destination rule names", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("10"), WindowSum: amountPtr("0")}, "", 1, nil},
		{"window sum plus amount at the tier is not above it", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("10"), WindowSum: amountPtr("9990")}, "", 1, nil},
		{"window sum plus amount above the tier", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("10.000001"), WindowSum: amountPtr("9990")}, "", 2, []string{"velocity/busy+1"}},
		{"one large amount alone passes the tier", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("20000"), WindowSum: amountPtr("0")}, "", 2, []string{"velocity/busy+1"}},
		{"an unmeasured window sum is judged as exceeding every tier", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("1")}, "", 3, []string{"velocity/very-busy+2"}},
		{"the highest tier exceeded applies", RequestFacts{Account: "zeta", ToAddress: otherAddr, Amount: usdt("1"), WindowSum: amountPtr("60000")}, "", 3, []string{"velocity/very-busy+2"}},
		{"destination and velocity add up", RequestFacts{Account: "ops-1", ToAddress: otherAddr, Amount: usdt("1"), WindowSum: amountPtr("60000")}, "", 5, []string{"destination/ops-payees+2", "velocity/very-busy+2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, err := p.Assess(tc.facts)
			if tc.refused != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeDestinationNotAllowed || e.Field != "to_address" || as.RefusedBy != tc.refused {
					t.Fatalf("want destination_not_allowed by %s, got %v (refused by %q)", tc.refused, err, as.RefusedBy)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range as.AppliedRules {
				got = append(got, r.Kind+"/"+r.Name+"+"+string(rune('0'+r.ExtraApprovers)))
			}
			if as.Approvers != tc.approvers || strings.Join(got, ",") != strings.Join(tc.applied, ",") {
				t.Fatalf("approvers %d applied %v, want %d %v", as.Approvers, got, tc.approvers, tc.applied)
			}
		})
	}
}

func TestPolicyRulesRefuseBadInputNamingTheField(t *testing.T) {
	base := `"name":"p","rules":[{"name":"single","threshold":"0","approvers":1}]`
	cases := []struct {
		name, doc, field string
	}{
		{"unknown member in a destination rule", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"refuse","colour":"red"}]`, "destinations[0]"},
		{"destination rule without accounts", `"destinations":[{"name":"d","accounts":[],"allow":[],"unlisted":"refuse"}]`, "destinations[0].accounts"},
		{"bad glob", `"destinations":[{"name":"d","accounts":["[a"],"allow":[],"unlisted":"refuse"}]`, "destinations[0].accounts[0]"},
		{"address with a space", `"destinations":[{"name":"d","accounts":["a"],"allow":["T x"],"unlisted":"refuse"}]`, "destinations[0].allow[0]"},
		{"duplicate address", `"destinations":[{"name":"d","accounts":["a"],"allow":["` + allowedAddr + `","` + allowedAddr + `"],"unlisted":"refuse"}]`, "destinations[0].allow[1]"},
		{"allow missing", `"destinations":[{"name":"d","accounts":["a"],"unlisted":"refuse"}]`, "destinations[0].allow"},
		{"unlisted missing", `"destinations":[{"name":"d","accounts":["a"],"allow":[]}]`, "destinations[0].unlisted"},
		{"unlisted unknown", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"maybe"}]`, "destinations[0].unlisted"},
		{"refuse with extra approvers", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"refuse","extra_approvers":1}]`, "destinations[0].extra_approvers"},
		{"negative extra approvers", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"extra_approvers","extra_approvers":-1}]`, "destinations[0].extra_approvers"},
		{"extra approvers as a string", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"extra_approvers","extra_approvers":"1"}]`, "destinations[0].extra_approvers"},
		{"duplicate destination rule", `"destinations":[{"name":"d","accounts":["a"],"allow":[],"unlisted":"refuse"},{"name":"d","accounts":["b"],"allow":[],"unlisted":"refuse"}]`, "destinations[1].name"},
		{"tier above as a number", `"velocity":[{"name":"v","above":10000,"extra_approvers":1}]`, "velocity[0].above"},
		{"tier above negative", `"velocity":[{"name":"v","above":"-1","extra_approvers":1}]`, "velocity[0].above"},
		{"tier without extra approvers", `"velocity":[{"name":"v","above":"1"}]`, "velocity[0].extra_approvers"},
		{"tier with zero extra approvers", `"velocity":[{"name":"v","above":"1","extra_approvers":0}]`, "velocity[0].extra_approvers"},
		{"tier with a window", `"velocity":[{"name":"v","above":"1","extra_approvers":1,"window":"48h"}]`, "velocity[0]"},
		{"duplicate tier", `"velocity":[{"name":"v","above":"1","extra_approvers":1},{"name":"v","above":"2","extra_approvers":1}]`, "velocity[1].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicyJSON([]byte("{" + base + "," + tc.doc + "}"))
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidPolicy || e.Field != tc.field {
				t.Fatalf("want invalid_policy on %s, got %v", tc.field, err)
			}
		})
	}
}

func TestPolicyWithoutNewRulesReadsAndWritesAsBefore(t *testing.T) {
	old := `{"version":3,"name":"four-eyes above 1000","rules":[{"name":"single","threshold":"0","approvers":1},{"name":"four-eyes","threshold":"1000","approvers":2}],"by":"olivia","at":"2026-01-01T00:00:00Z"}`
	e, err := DecodePolicyEvent(PolicyChangedType, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	p := e.(PolicyChanged).Policy()
	if len(p.Destinations) != 0 || len(p.Velocity) != 0 || !p.SameRules(DefaultPolicy()) {
		t.Fatalf("an old policy event reads as %+v", p)
	}
	out, _ := json.Marshal(e)
	if strings.Contains(string(out), "destinations") || strings.Contains(string(out), "velocity") {
		t.Fatalf("an old policy writes new members: %s", out)
	}
	// An old request reads with no rules applied and no window sum.
	req := `{"id":"` + opID + `","account":"acme","to_address":"` + otherAddr + `","amount":"5.000000","asset":"USDT-TRC20","requested_by":"alice","required_approvals":1,"rule":"single","policy_name":"p","policy_version":1,"at":"2026-01-01T00:00:00Z"}`
	ev, err := DecodeWithdrawalEvent(EventRequested, []byte(req))
	if err != nil {
		t.Fatal(err)
	}
	w := Evolve(Withdrawal{}, ev)
	if w.WindowSum != nil || len(w.AppliedRules) != 0 || w.View().AppliedRules == nil {
		t.Fatalf("old request: %+v", w)
	}
}

func TestPolicyStreamCarriesTheNewRules(t *testing.T) {
	p := rulesPolicy(t, 0)
	evs, err := DecidePolicy(PolicyState{}, SetPolicy{Policy: p, By: "olivia", Quorum: 2, At: t0})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	s := EvolvePolicy(PolicyState{}, roundTripPolicyEvent(t, evs[0]))
	evs, err = DecidePolicy(s, ApprovePolicy{Version: 1, By: "oscar", Quorum: 2, At: t0})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	s = EvolvePolicy(s, roundTripPolicyEvent(t, evs[0]))
	if s.Policy.Version != 1 || !s.Policy.SameRules(p) || len(s.Policy.Destinations) != 2 || len(s.Policy.Velocity) != 2 {
		t.Fatalf("in force: %+v", s.Policy)
	}
	// The same amount rules with another allow-list is another version.
	q := p.WithVersion(0)
	q.Destinations[0].Allow = []string{otherAddr}
	if q.SameRules(p) {
		t.Fatal("a changed allow-list reads as the same policy")
	}
	if evs, _ := DecidePolicy(s, SetPolicy{Policy: p, By: "olivia", Quorum: 1, At: t0}); len(evs) != 0 {
		t.Fatal("setting the policy in force again appended")
	}
}

func roundTripPolicyEvent(t *testing.T, e PolicyEvent) PolicyEvent {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodePolicyEvent(e.EventType(), b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

// requestUnder decides a request and returns its events.
func requestUnder(t *testing.T, p Policy, account, to, amount string, sum *Amount) ([]Event, error) {
	t.Helper()
	return Decide(Withdrawal{}, RequestWithdrawal{ID: opID, Account: account, ToAddress: to, Amount: usdt(amount),
		RequestedBy: requester, Policy: p, WindowSum: sum, At: t0})
}

func TestRequestRecordsTheRulesThatApplied(t *testing.T) {
	p := rulesPolicy(t, 1)
	if _, err := requestUnder(t, p, "acme", otherAddr, "10", amountPtr("0")); !errors.Is(err, ErrDestinationNotAllowed) {
		t.Fatalf("unlisted destination: %v", err)
	}
	log, err := requestUnder(t, p, "ops-eu", otherAddr, "10", amountPtr("10000"))
	if err != nil {
		t.Fatal(err)
	}
	w := Fold(log)
	if w.RequiredApprovals != 4 || len(w.AppliedRules) != 2 || w.AtRequest.Approvers != 4 || w.WindowSum == nil || !w.WindowSum.Equal(usdt("10000")) {
		t.Fatalf("requested: %+v", w)
	}
	v := w.View()
	if *v.WindowSum != "10000" || v.AppliedRules[1].Kind != RuleKindVelocity || !v.AppliedRules[1].WindowSum.Equal(usdt("10000")) {
		t.Fatalf("view: %+v", v)
	}
	// A retry of the same request after the destination is refused is
	// still a replay, not a refusal.
	strict := rulesPolicy(t, 2)
	strict.Destinations[1].Unlisted, strict.Destinations[1].ExtraApprovers = UnlistedRefuse, 0
	evs, err := Decide(w, RequestWithdrawal{ID: opID, Account: "ops-eu", ToAddress: otherAddr, Amount: usdt("10"), RequestedBy: requester, Policy: strict, At: t0})
	if err != nil || len(evs) != 0 {
		t.Fatalf("replay after tightening: %v %v", evs, err)
	}
}

func TestDestinationRefusedAfterApprovalSendsItBackAndBlocksApproval(t *testing.T) {
	loose := rulesPolicy(t, 1)
	log, err := requestUnder(t, loose, "ops-eu", otherAddr, "10", amountPtr("0"))
	if err != nil {
		t.Fatal(err)
	}
	decide := func(c Command) []Event {
		t.Helper()
		evs, err := Decide(Fold(log), c)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		log = append(log, evs...)
		return evs
	}
	for i, by := range []string{"bob", "carol", "dave"} {
		decide(Approve{By: by, Policy: loose, At: t0.Add(time.Duration(i+1) * time.Minute)})
	}
	if w := Fold(log); w.State != StateApproved || len(w.AppliedRules) != 1 {
		t.Fatalf("state %s applied %v", w.State, w.AppliedRules)
	}
	strict := rulesPolicy(t, 2)
	strict.Destinations[1].Unlisted, strict.Destinations[1].ExtraApprovers = UnlistedRefuse, 0
	if err := EnsureApproved(Fold(log), strict); !errors.Is(err, ErrDestinationNotAllowed) {
		t.Fatalf("pre-sign check under the tightened rule: %v", err)
	}
	evs := decide(RecheckApprovals{Policy: strict, At: t0.Add(time.Hour)})
	if len(evs) != 1 {
		t.Fatalf("recheck: %v", evs)
	}
	inv := evs[0].(ApprovalsInvalidated)
	if inv.Reason != ReasonDestinationNotAllowed || inv.RefusedBy != "ops-payees" || inv.PolicyVersion != 2 {
		t.Fatalf("invalidation: %+v", inv)
	}
	if _, err := Audit(log); err != nil {
		t.Fatalf("audit of the invalidation: %v", err)
	}
	w := Fold(log)
	if w.State != StateRequested || w.Reason != ReasonDestinationNotAllowed {
		t.Fatalf("after recheck: %s %s", w.State, w.Reason)
	}
	if _, err := Decide(w, Approve{By: "erin", Policy: strict, At: t0.Add(2 * time.Hour)}); !errors.Is(err, ErrDestinationNotAllowed) {
		t.Fatalf("approval while refused: %v", err)
	}
	// Rechecking again under the same version appends nothing.
	if evs := decide(RecheckApprovals{Policy: strict, At: t0.Add(3 * time.Hour)}); len(evs) != 0 {
		t.Fatalf("second recheck: %v", evs)
	}
	// Once a policy no longer refuses it, approvals count again.
	evs = decide(Approve{By: "erin", Policy: loose.WithVersion(3), At: t0.Add(4 * time.Hour)})
	if w := Fold(log); len(evs) != 1 || w.State != StateApproved {
		t.Fatalf("approval after loosening: %v, %s", evs, w.State)
	}
}

// A withdrawal requested under a policy with no velocity tier for its
// account has no window sum: nobody measured what the account had sent. A
// tier added later must not judge it on its amount alone (the account may
// have sent 50,000 that day): it fails closed, to the highest tier.
func TestVelocityTierAddedLaterRaisesWhatAQueuedWithdrawalNeeds(t *testing.T) {
	plain := policyNeeding(t, 1, 1)
	log, err := requestUnder(t, plain, "zeta", otherAddr, "5000", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := RequirementFor(Fold(log), rulesPolicy(t, 2))
	if req.Approvers != 3 || len(req.AppliedRules) != 1 || req.AppliedRules[0].Name != "very-busy" || req.AppliedRules[0].WindowSum != nil {
		t.Fatalf("requirement now: %+v", req)
	}
	evs, err := Decide(Fold(log), Approve{By: "bob", Policy: plain, At: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	approved := Fold(append(log, evs...))
	if approved.State != StateApproved {
		t.Fatalf("state %s after bob's approval under the plain policy", approved.State)
	}
	if err := EnsureApproved(approved, rulesPolicy(t, 2)); err == nil {
		t.Fatal("signable on one approval under the tier added since")
	}
	// Loosened back, the request's own requirement still binds.
	log, _ = requestUnder(t, rulesPolicy(t, 2), "zeta", otherAddr, "20000", amountPtr("0"))
	if req := RequirementFor(Fold(log), plain); req.Approvers != 2 || req.PolicyVersion != 2 {
		t.Fatalf("loosened: %+v", req)
	}
}

func TestAuditRefusesAppliedRulesThatDoNotAddUp(t *testing.T) {
	log, err := requestUnder(t, rulesPolicy(t, 1), "ops-eu", otherAddr, "10", amountPtr("0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(log); err != nil {
		t.Fatalf("the decided request fails its audit: %v", err)
	}
	r := log[0].(Requested)
	r.RequiredApprovals = 2 // the destination rule adds 2 to the amount rule's 1
	if _, err := Audit([]Event{r}); err == nil {
		t.Fatal("a requirement smaller than its applied rules passed")
	}
	r = log[0].(Requested)
	r.AppliedRules = []AppliedRule{{Kind: "colour", Name: "x", ExtraApprovers: 1}}
	if _, err := Audit([]Event{r}); err == nil {
		t.Fatal("an unknown rule kind passed")
	}
}

func TestAccountSumsWhatItSentInTheLast24Hours(t *testing.T) {
	const acct = "acme"
	ids := []string{
		"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002",
		"00000000-0000-4000-8000-000000000003", "00000000-0000-4000-8000-000000000004",
	}
	events := []AccountEvent{
		AccountCredited{Account: acct, CreditID: "c1", Amount: usdt("100000"), At: t0},
		AccountReserved{Account: acct, WithdrawalID: ids[0], Amount: usdt("1000"), Day: utcDay(t0), At: t0},
		AccountReserved{Account: acct, WithdrawalID: ids[1], Amount: usdt("200"), Day: utcDay(t0.Add(2 * time.Hour)), At: t0.Add(2 * time.Hour)},
		AccountSettled{Account: acct, WithdrawalID: ids[1], Amount: usdt("200"), At: t0.Add(3 * time.Hour)},
		AccountReserved{Account: acct, WithdrawalID: ids[2], Amount: usdt("30"), Day: utcDay(t0.Add(4 * time.Hour)), At: t0.Add(4 * time.Hour)},
		AccountReleased{Account: acct, WithdrawalID: ids[2], Amount: usdt("30"), Reason: "declined", At: t0.Add(5 * time.Hour)},
	}
	a := FoldAccount(events)
	cases := []struct {
		at   time.Time
		want string
	}{
		{t0.Add(6 * time.Hour), "1200"},             // held + settled; the released one never left
		{t0.Add(24 * time.Hour), "200"},             // the first is exactly a window old: out
		{t0.Add(26*time.Hour + time.Second), "0"},   // all out of the window
		{t0.Add(-time.Minute), "0"},                 // nothing before
		{t0.Add(2*time.Hour - time.Second), "1000"}, // the second not yet
	}
	// The live fold is compact (closed reservations forgotten): it sums
	// the same.
	compact := FoldAccountFrom(Account{}, events)
	for _, tc := range cases {
		for name, st := range map[string]Account{"full": a, "compact": compact} {
			if got := st.SentInWindow(tc.at); !got.Equal(amt(tc.want)) {
				t.Errorf("%s fold at +%s: %s, want %s", name, tc.at.Sub(t0), got, tc.want)
			}
		}
	}
	// The fold keeps only the last window (and slack) of reservations.
	later := t0.Add(3 * 24 * time.Hour)
	a = EvolveAccount(a, AccountReserved{Account: acct, WithdrawalID: ids[3], Amount: usdt("5"), Day: utcDay(later), At: later})
	if a.recent.len() != 1 || !a.SentInWindow(later).Equal(usdt("5")) {
		t.Fatalf("kept %d reservations, window sum %s", a.recent.len(), a.SentInWindow(later))
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A request is judged on a measured window sum whenever the policy's tiers
// name its account: without one it is refused, nothing decided.
func TestRequestWithoutItsWindowSumIsRefusedWhenATierNamesTheAccount(t *testing.T) {
	_, err := requestUnder(t, rulesPolicy(t, 1), "zeta", otherAddr, "10", nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidCommand || e.Field != "window_sum" {
		t.Fatalf("want invalid_command on window_sum, got %v", err)
	}
	if _, err := requestUnder(t, policyNeeding(t, 1, 1), "zeta", otherAddr, "10", nil); err != nil {
		t.Fatalf("no tier names the account, no sum needed: %v", err)
	}
}
