package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
)

// listed is on acme's allow-list in these tests; testAddr is not.
const listed = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"

// rulesDoc: one approver for every amount; for acme, destinations off the
// list are handled as unlisted says; ops-* needs one more approver once its
// 24 h sum passes 100.
func rulesDoc(unlisted string) string {
	extra := ""
	if unlisted == aggregate.UnlistedExtraApprovers {
		extra = `,"extra_approvers":2`
	}
	return `{"name":"payees and pace","rules":[{"name":"single","threshold":"0","approvers":1}],
	 "destinations":[{"name":"acme-payees","accounts":["acme"],"allow":["` + listed + `"],"unlisted":"` + unlisted + `"` + extra + `}],
	 "velocity":[{"name":"busy","accounts":["ops-*"],"above":"100","extra_approvers":1}]}`
}

func (e *env) putPolicy(t *testing.T, doc string) api.PolicyView {
	t.Helper()
	r := e.do(t, "PUT", "/v1/policy", tokOlivia, doc)
	wantStatus(t, r, http.StatusOK)
	var v api.PolicyView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (e *env) request(t *testing.T, token, account, to, amount string) resp {
	t.Helper()
	return e.do(t, "POST", "/v1/withdrawals", token,
		reqBody{"operation_id": uuid.NewString(), "account": account, "to_address": to, "amount": amount, "asset": "USDT-TRC20"})
}

func TestPolicyWithDestinationAndVelocityRulesIsShownAndKeptByVersion(t *testing.T) {
	e := newEnv(t)
	v1 := e.putPolicy(t, rulesDoc(aggregate.UnlistedExtraApprovers))
	if v1.Version != 1 || len(v1.Destinations) != 1 || len(v1.Velocity) != 1 || v1.Velocity[0].Above.String() != "100" {
		t.Fatalf("PUT: %+v", v1)
	}
	got := e.do(t, "GET", "/v1/policy", tokBob, nil).json(t)
	d := got["destinations"].([]any)[0].(map[string]any)
	vt := got["velocity"].([]any)[0].(map[string]any)
	if d["unlisted"] != "extra_approvers" || d["extra_approvers"] != float64(2) || d["allow"].([]any)[0] != listed || vt["above"] != "100" {
		t.Fatalf("GET /v1/policy: %v", got)
	}
	// The document GET answers can be PUT back: it is the policy in force.
	back, _ := json.Marshal(got)
	if v := e.putPolicy(t, string(back)); v.Version != 1 {
		t.Fatalf("PUT of the policy in force made version %d", v.Version)
	}
	if v := e.putPolicy(t, rulesDoc(aggregate.UnlistedRefuse)); v.Version != 2 || v.Destinations[0].Unlisted != "refuse" {
		t.Fatalf("v2: %+v", v)
	}
	// Each version on the policy stream keeps its own rules.
	recs, _, err := e.store.Load(t.Context(), eventstore.Key{Type: eventlog.TypePolicy, ID: eventlog.PolicyStreamID})
	if err != nil || len(recs) != 2 {
		t.Fatalf("policy stream: %d records, %v", len(recs), err)
	}
	var unlisted []string
	for _, r := range recs {
		ev, err := aggregate.DecodePolicyEvent(r.Type, r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		p := ev.(aggregate.PolicyChanged).Policy()
		unlisted = append(unlisted, p.Destinations[0].Unlisted)
	}
	if strings.Join(unlisted, ",") != "extra_approvers,refuse" {
		t.Fatalf("versions say %v", unlisted)
	}
	// The policy history (the console's) lists both versions with theirs.
	hist, err := e.intake.PolicyHistory(t.Context())
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	if hist[0].Destinations[0].Unlisted != "extra_approvers" || hist[1].Destinations[0].Unlisted != "refuse" || hist[1].Velocity[0].Name != "busy" {
		t.Fatalf("history: %+v", hist)
	}
}

func TestBadDestinationOrVelocityRulesAreRefusedAndNothingChanges(t *testing.T) {
	e := newEnv(t)
	e.putPolicy(t, rulesDoc(aggregate.UnlistedRefuse))
	base := `"name":"p","rules":[{"name":"single","threshold":"0","approvers":1}]`
	cases := []struct{ name, doc, field string }{
		{"checksum", `"destinations":[{"name":"d","accounts":["acme"],"allow":["TLsV52sRDL79HXGGm9yzwKibb6BeruhUzz"],"unlisted":"refuse"}]`, "destinations[0].allow[0]"},
		{"hex form", `"destinations":[{"name":"d","accounts":["acme"],"allow":["41` + strings.Repeat("ab", 20) + `"],"unlisted":"refuse"}]`, "destinations[0].allow[0]"},
		{"negative extra approvers", `"destinations":[{"name":"d","accounts":["acme"],"allow":[],"unlisted":"extra_approvers","extra_approvers":-2}]`, "destinations[0].extra_approvers"},
		{"unknown unlisted", `"destinations":[{"name":"d","accounts":["acme"],"allow":[],"unlisted":"warn"}]`, "destinations[0].unlisted"},
		{"tier above as a number", `"velocity":[{"name":"v","above":100,"extra_approvers":1}]`, "velocity[0].above"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, "{"+base+","+tc.doc+"}"), http.StatusUnprocessableEntity, aggregate.CodeInvalidPolicy, tc.field)
		})
	}
	// An unknown member anywhere in the document is refused before parsing.
	r := e.do(t, "PUT", "/v1/policy", tokOlivia, "{"+base+`,"velocity":[{"name":"v","above":"1","extra_approvers":1,"window":"48h"}]}`)
	if r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown member: %d %s", r.status, r.body)
	}
	if m := e.do(t, "GET", "/v1/policy", tokBob, nil).json(t); m["version"] != float64(1) || m["name"] != "payees and pace" {
		t.Fatalf("a refused policy changed the one in force: %v", m)
	}
}

func TestUnlistedDestinationIsRefusedOrNeedsMoreApprovers(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "c-1", "1000")
	e.putPolicy(t, rulesDoc(aggregate.UnlistedRefuse))

	id := uuid.NewString()
	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, reqBody{"operation_id": id, "account": "acme", "to_address": testAddr, "amount": "5", "asset": "USDT-TRC20"})
	wantErr(t, r, http.StatusUnprocessableEntity, aggregate.CodeDestinationNotAllowed, "to_address")
	if !strings.Contains(string(r.body), "acme-payees") {
		t.Fatalf("the refusal does not name the rule: %s", r.body)
	}
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+id, tokAlice, nil), http.StatusNotFound, "not_found", "")
	if m := e.do(t, "GET", "/v1/accounts/acme", tokAlice, nil).json(t); m["reserved"] != "0" {
		t.Fatalf("a refused request reserved money: %v", m)
	}
	// Over NATS the same code.
	m := e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, reqBody{"operation_id": uuid.NewString(), "account": "acme", "to_address": testAddr, "amount": "5"})
	natsErr(t, m, "422", aggregate.CodeDestinationNotAllowed, "to_address")
	// A listed destination goes through with the amount rule alone.
	r = e.request(t, tokAlice, "acme", listed, "5")
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); w.RequiredApprovals != 1 || len(w.AppliedRules) != 0 || w.WindowSum != nil {
		t.Fatalf("listed: %+v", w)
	}

	// Unlisted needs two more approvers instead.
	e.putPolicy(t, rulesDoc(aggregate.UnlistedExtraApprovers))
	r = e.request(t, tokAlice, "acme", testAddr, "5")
	wantStatus(t, r, http.StatusCreated)
	w := r.withdrawal(t)
	if w.RequiredApprovals != 3 || len(w.AppliedRules) != 1 || w.AppliedRules[0].Name != "acme-payees" || w.AppliedRules[0].ExtraApprovers != 2 {
		t.Fatalf("unlisted: %s", r.body)
	}
	for i, tok := range []string{tokBob, tokCarol} {
		r = e.do(t, "POST", "/v1/withdrawals/"+w.ID+"/approve", tok, nil)
		wantStatus(t, r, http.StatusOK)
		if got := r.withdrawal(t); got.State != aggregate.StateRequested || len(got.Approvals) != i+1 {
			t.Fatalf("approval %d: %s", i+1, r.body)
		}
	}
	// Refused again: the third approval is refused, nothing appended.
	e.putPolicy(t, rulesDoc(aggregate.UnlistedRefuse))
	before := e.do(t, "GET", "/v1/withdrawals/"+w.ID, tokBob, nil).withdrawal(t).Version
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+w.ID+"/approve", tokOlivia, nil), http.StatusForbidden, api.CodeForbidden, "")
	ria := e.do(t, "POST", "/v1/withdrawals/"+w.ID+"/approve", tokRia, nil)
	wantErr(t, ria, http.StatusUnprocessableEntity, aggregate.CodeDestinationNotAllowed, "to_address")
	if after := e.do(t, "GET", "/v1/withdrawals/"+w.ID, tokBob, nil).withdrawal(t).Version; after != before {
		t.Fatalf("a refused approval appended (version %d → %d)", before, after)
	}
}

func TestVelocityTierRaisesApproversOnceEnoughWasSent(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "ops-eu", "c-1", "1000")
	e.putPolicy(t, rulesDoc(aggregate.UnlistedRefuse))
	need := func(amount string, wantApprovers int, wantSum string) aggregate.WithdrawalView {
		t.Helper()
		r := e.request(t, tokAlice, "ops-eu", testAddr, amount)
		wantStatus(t, r, http.StatusCreated)
		w := r.withdrawal(t)
		if w.RequiredApprovals != wantApprovers || w.WindowSum == nil || *w.WindowSum != wantSum {
			t.Fatalf("%s after %s sent: %s", amount, wantSum, r.body)
		}
		return w
	}
	// Under the tier no rule applies: the one approver is the policy's own.
	if first := need("60", 1, "0"); len(first.AppliedRules) != 0 {
		t.Fatalf("first, under the tier: applied %+v", first.AppliedRules)
	}
	second := need("50", 2, "60") // 60 + 50 > 100
	if a := second.AppliedRules; len(a) != 1 || a[0].Kind != aggregate.RuleKindVelocity || a[0].Name != "busy" || a[0].WindowSum.String() != "60" {
		t.Fatalf("applied: %+v", a)
	}
	raw := e.do(t, "GET", "/v1/withdrawals/"+second.ID, tokAlice, nil)
	if !strings.Contains(string(raw.body), `"applied_rules":[{"kind":"velocity","name":"busy","extra_approvers":1,"window_sum":"60"}]`) ||
		!strings.Contains(string(raw.body), `"window_sum":"60"`) {
		t.Fatalf("withdrawal JSON: %s", raw.body)
	}
	// Released money never left: cancelling the second takes it out of the
	// window; the first, held, still counts.
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+second.ID+"/cancel", tokAlice, nil), http.StatusOK)
	need("30", 1, "60")
	need("11", 2, "90") // 60 + 30 + 11 > 100
	// Another account's sum is its own (and no tier names acme).
	e.credit(t, "acme", "c-2", "1000")
	r := e.request(t, tokAlice, "acme", listed, "500")
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); w.RequiredApprovals != 1 || w.WindowSum != nil {
		t.Fatalf("acme: %s", r.body)
	}
}
