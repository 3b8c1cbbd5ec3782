package api_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
)

// Finding (issue 11), reproduced as found: two credits of 2^256−1 units
// left a balance no TRC-20 transfer can carry. The second is refused, and
// the credit records who made it.
func TestTwoCreditsOfTheMaximumNoLongerMintPastIt(t *testing.T) {
	e := newEnv(t)
	units := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	top, err := aggregate.FromUnits(aggregate.USDT, units)
	if err != nil {
		t.Fatal(err)
	}
	e.credit(t, "acme", "max-1", top.String())
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "max-2", "amount": top.String()}),
		http.StatusUnprocessableEntity, aggregate.CodeInvalidAmount, "amount")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "one-more", "amount": "0.000001"}),
		http.StatusUnprocessableEntity, aggregate.CodeInvalidAmount, "amount")
	if m := e.do(t, "GET", "/v1/accounts/acme", tokOlivia, nil).json(t); m["available"] != top.String() {
		t.Fatalf("balance %v", m)
	}
}

// Credits above --credit-review-above need a second operator: 202 with the
// pending credit and unchanged balances; its maker cannot approve it; another
// operator's approval credits it (201, again 200 replayed), over HTTP and NATS.
func TestACreditAboveTheReviewAmountNeedsASecondOperator(t *testing.T) {
	e := newEnv(t)
	e.intake.SetCreditReviewAbove(aggregate.MustParseAmount(aggregate.USDT, "10000"))
	e.credit(t, "acme", "small", "10000") // at the review amount: immediate

	r := e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "big", "amount": "50000"})
	wantStatus(t, r, http.StatusAccepted)
	var v api.CreditView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.PendingCredit == nil || v.PendingCredit.By != "olivia" || v.PendingCredit.Amount != "50000" || v.Available != "10000" {
		t.Fatalf("202 body: %s", r.body)
	}
	r = e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "big", "amount": "50000"})
	wantStatus(t, r, http.StatusAccepted)
	if r.header.Get(api.HeaderReplayed) != "true" {
		t.Fatal("the same pending credit again is not a replay")
	}
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits/big/approve", tokOlivia, nil), http.StatusForbidden, aggregate.CodeSelfApproval, "")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits/big/approve", tokBob, nil), http.StatusForbidden, api.CodeForbidden, "")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits/nope/approve", tokOscar, nil), http.StatusConflict, aggregate.CodeInvalidTransition, "credit_id")

	r = e.do(t, "POST", "/v1/accounts/acme/credits/big/approve", tokOscar, nil)
	wantStatus(t, r, http.StatusCreated)
	if m := r.json(t); m["available"] != "60000" {
		t.Fatalf("after approval: %s", r.body)
	}
	r = e.do(t, "POST", "/v1/accounts/acme/credits/big/approve", tokOscar, nil)
	wantStatus(t, r, http.StatusOK)

	// Over NATS.
	c := api.NewClient(e.client, tokOlivia)
	cr, err := c.Credit(t.Context(), api.CreditRequest{Account: "acme", CreditID: "big-2", Amount: "20000"})
	if err != nil || cr.Value.PendingCredit == nil || cr.Value.Available != "60000" {
		t.Fatalf("weir.cmd.account.credit above review: %+v %v", cr.Value, err)
	}
	var refused *api.Refusal
	if _, err := c.ApproveCredit(t.Context(), "acme", "big-2"); !errors.As(err, &refused) || refused.Code != aggregate.CodeSelfApproval {
		t.Fatalf("the maker approving over NATS: %v", err)
	}
	a, err := c.As(tokOscar).ApproveCredit(t.Context(), "acme", "big-2")
	if err != nil || a.Value.Available != "80000" {
		t.Fatalf("weir.cmd.account.credit.approve: %+v %v", a.Value, err)
	}
}
