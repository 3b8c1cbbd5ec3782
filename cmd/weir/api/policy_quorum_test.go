package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
)

const onePolicy = `{"name":"one for all","rules":[{"name":"one","threshold":"0","approvers":1}]}`

// Finding (issue 11), reproduced as found: olivia (operator + requester)
// requested 50,000 (two approvals needed), PUT a one-approver policy, and
// bob's single approval moved the withdrawal to approved. Under a quorum of
// 2 her PUT is a 202 proposal; she cannot approve it herself; once oscar
// approves it, it is in force, and bob's single approval still does not
// suffice for the withdrawal requested before.
func TestOliviaLoosensThePolicyAloneAndBobsSingleApprovalNoLongerSuffices(t *testing.T) {
	e := newEnv(t)
	e.intake.SetPolicyQuorum(2)
	e.credit(t, "acme", "c-1", "100000")
	const id = "9a1c7a52-4b43-4c55-9a2e-7b0f3b0c1d51"
	r := e.do(t, "POST", "/v1/withdrawals", tokOlivia, withdrawalBody(id, "acme", "50000"))
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); w.RequiredApprovals != 2 {
		t.Fatalf("required %d", w.RequiredApprovals)
	}

	r = e.do(t, "PUT", "/v1/policy", tokOlivia, onePolicy)
	wantStatus(t, r, http.StatusAccepted)
	var prop api.PolicyProposalBody
	if err := json.Unmarshal(r.body, &prop); err != nil {
		t.Fatal(err)
	}
	if prop.ApprovalsNeeded != 2 || prop.Proposal.Version != 1 || prop.Proposal.ProposedBy != "olivia" ||
		len(prop.Proposal.Approvals) != 1 || prop.Proposal.Approvals[0].By != "olivia" || prop.Proposal.Approvals[0].At.IsZero() {
		t.Fatalf("202 body: %s", r.body)
	}
	for _, k := range []string{"proposal", "approvals_needed"} {
		if _, ok := r.json(t)[k]; !ok {
			t.Fatalf("202 body lacks %q: %s", k, r.body)
		}
	}
	if m := e.do(t, "GET", "/v1/policy", tokBob, nil).json(t); m["version"] != float64(0) {
		t.Fatalf("a proposal is in force: %v", m)
	}
	wantErr(t, e.do(t, "POST", "/v1/policy/proposals/1/approve", tokOlivia, nil), http.StatusForbidden, aggregate.CodeSelfApproval, "")
	wantErr(t, e.do(t, "POST", "/v1/policy/proposals/1/approve", tokBob, nil), http.StatusForbidden, api.CodeForbidden, "")

	r = e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	if w := r.withdrawal(t); w.State != aggregate.StateRequested {
		t.Fatalf("bob's single approval: %s", w.State)
	}

	r = e.do(t, "POST", "/v1/policy/proposals/1/approve", tokOscar, nil)
	wantStatus(t, r, http.StatusOK)
	if m := r.json(t); m["version"] != float64(1) || m["name"] != "one for all" {
		t.Fatalf("oscar's approval: %s", r.body)
	}
	wantStatus(t, e.do(t, "POST", "/v1/policy/proposals/1/approve", tokOscar, nil), http.StatusOK) // twice counts once

	// The looser policy is in force; what the queued withdrawal needs is not lowered.
	if w := e.do(t, "GET", "/v1/withdrawals/"+id, tokOlivia, nil).withdrawal(t); w.State != aggregate.StateRequested {
		t.Fatalf("after the policy change: %s", w.State)
	}
	r = e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokCarol, nil)
	if w := r.withdrawal(t); w.State != aggregate.StateApproved || w.RequiredApprovals != 2 {
		t.Fatalf("second approval: %s, %d required", w.State, w.RequiredApprovals)
	}
}

func TestPolicyProposalsOverNATS(t *testing.T) {
	e := newEnv(t)
	e.intake.SetPolicyQuorum(2)
	c := api.NewClient(e.client, tokOlivia)
	r, err := c.SetPolicy(t.Context(), []byte(onePolicy))
	if err != nil || r.Value.Proposal == nil || r.Value.ApprovalsNeeded != 2 || r.Value.Proposal.Version != 1 {
		t.Fatalf("weir.cmd.policy.set under a quorum: %+v %v", r.Value, err)
	}
	var refused *api.Refusal
	if _, err := c.ApprovePolicy(t.Context(), 1); !errors.As(err, &refused) || refused.Code != aggregate.CodeSelfApproval {
		t.Fatalf("the proposer approving: %v", err)
	}
	if _, err := c.As(tokOscar).ApprovePolicy(t.Context(), 7); !errors.As(err, &refused) || refused.Status != http.StatusConflict {
		t.Fatalf("approving a version never proposed: %v", err)
	}
	r, err = c.As(tokOscar).ApprovePolicy(t.Context(), 1)
	if err != nil || r.Value.Proposal != nil || r.Value.Version != 1 {
		t.Fatalf("weir.cmd.policy.approve: %+v %v", r.Value, err)
	}
	m := e.natsReq(t, api.SubjectPolicyApprove, tokOscar, `{"version":"1"}`)
	if m.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Fatalf("a string version: %v %s", m.Header, m.Data)
	}
}

// With a quorum of 1 (dev mode, and the default of the library) a PUT is
// in force at once, as before quorums existed.
func TestQuorumOfOneKeepsPutInForceAtOnce(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "PUT", "/v1/policy", tokOlivia, onePolicy)
	wantStatus(t, r, http.StatusOK)
	if m := r.json(t); m["version"] != float64(1) {
		t.Fatalf("%s", r.body)
	}
}

// GET /v1/policy shows the open proposal beside the policy in force, so a
// second operator can find what to approve.
func TestGetPolicyShowsTheOpenProposal(t *testing.T) {
	e := newEnv(t)
	e.intake.SetPolicyQuorum(2)
	if m := e.do(t, "GET", "/v1/policy", tokBob, nil).json(t); m["proposal"] != nil {
		t.Fatalf("no proposal open, yet: %v", m)
	}
	wantStatus(t, e.do(t, "PUT", "/v1/policy", tokOlivia, onePolicy), http.StatusAccepted)
	r, err := api.NewClient(e.client, tokBob).Policy(t.Context())
	if err != nil || r.Value.Version != 0 || r.Value.Proposal == nil || r.Value.Proposal.Version != 1 ||
		r.Value.Proposal.ProposedBy != "olivia" || r.Value.ApprovalsNeeded != 2 {
		t.Fatalf("policy with an open proposal: %+v %v", r.Value, err)
	}
}
