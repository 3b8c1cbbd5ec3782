package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
)

// The typed client drives every service call and decodes each reply into
// the view type the service encoded; a refusal is a *api.Refusal carrying
// the status, the error document and the raw body.
func TestClientDecodesEveryReplyIntoTheViewTypes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := api.NewClient(e.client, tokOlivia)

	acct, err := c.Credit(ctx, api.CreditRequest{Account: "acme", CreditID: "dep-1", Amount: "100"})
	if err != nil || acct.Value.Available != "100" || acct.Replayed {
		t.Fatalf("credit: %+v, %v", acct, err)
	}
	again, err := c.Credit(ctx, api.CreditRequest{Account: "acme", CreditID: "dep-1", Amount: "100"})
	if err != nil || !again.Replayed {
		t.Fatalf("credit replay: replayed %v, %v", again.Replayed, err)
	}

	id := uuid.NewString()
	req := api.WithdrawalRequest{OperationID: id, Account: "acme", ToAddress: testAddr, Amount: "12.5", Asset: "USDT-TRC20"}
	w, err := c.As(tokAlice).Request(ctx, req)
	if err != nil || w.Value.ID != id || w.Value.State != aggregate.StateRequested || w.Value.Amount != "12.5" {
		t.Fatalf("request: %+v, %v", w.Value, err)
	}
	if !strings.Contains(string(w.Data), `"id":"`+id+`"`) {
		t.Fatalf("Data is not the service's body: %s", w.Data)
	}

	_, err = c.As(tokAlice).Approve(ctx, id)
	var refused *api.Refusal
	if !errors.As(err, &refused) || refused.Status != http.StatusForbidden || refused.Code != aggregate.CodeSelfApproval ||
		!strings.Contains(string(refused.Data), aggregate.CodeSelfApproval) {
		t.Fatalf("self approval: %v (%+v)", err, refused)
	}

	w, err = c.As(tokBob).Approve(ctx, id)
	if err != nil || w.Value.State != aggregate.StateApproved || len(w.Value.Approvals) != 1 || w.Value.Approvals[0].By != "bob" {
		t.Fatalf("approve: %+v, %v", w.Value, err)
	}
	got, err := c.Withdrawal(ctx, id)
	if err != nil || got.Value.Version != w.Value.Version {
		t.Fatalf("get: %+v, %v", got.Value, err)
	}
	evs, err := c.Events(ctx, id)
	if err != nil || len(evs.Value.Events) < 2 || evs.Value.Events[0].Type != aggregate.EventRequested {
		t.Fatalf("events: %+v, %v", evs.Value, err)
	}
	a, err := c.Account(ctx, "acme")
	if err != nil || a.Value.Reserved != "12.5" {
		t.Fatalf("account: %+v, %v", a.Value, err)
	}
	pol, err := c.Policy(ctx)
	if err != nil || len(pol.Value.Rules) == 0 {
		t.Fatalf("policy: %+v, %v", pol.Value, err)
	}
	q, err := c.Queue(ctx, "approvals", api.Page{})
	if err != nil || q.Value.Items == nil {
		t.Fatalf("queue: %+v, %v", q.Value, err)
	}
	if _, err := c.Queue(ctx, "nope", api.Page{}); err == nil {
		t.Fatal("an unknown queue is not refused")
	}
	w, err = c.As(tokAlice).Cancel(ctx, id)
	if err != nil || w.Value.State != aggregate.StateRejected {
		t.Fatalf("cancel: %+v, %v", w.Value, err)
	}
	_, err = c.Withdrawal(ctx, uuid.NewString())
	if !errors.As(err, &refused) || refused.Status != http.StatusNotFound || refused.Code != api.CodeNotFound {
		t.Fatalf("unknown withdrawal: %v", err)
	}
}

// Without a service on the subject the client says so instead of waiting.
func TestClientNamesAMissingService(t *testing.T) {
	e := newEnv(t)
	_, err := api.Call[api.PolicyView](t.Context(), api.NewClient(e.client, tokOlivia), "weir.cmd.nobody", []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "no weir service") {
		t.Fatalf("err %v, want no weir service", err)
	}
}
