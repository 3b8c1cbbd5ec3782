package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
)

// Finding "no account scoping: any requester can withdraw from any account
// and read every balance and withdrawal". A principal with "accounts" acts
// and reads only there (403 forbidden elsewhere), per role, on HTTP and
// NATS; an unscoped principal keeps acting everywhere.
func TestScopedPrincipalsActAndReadOnlyOnTheirAccounts(t *testing.T) {
	now := time.Now().UTC()
	e := newEnv(t, envOpts{queues: fixedQueues{approvals: []aggregate.Withdrawal{
		{ID: "11111111-2222-4333-8444-000000000001", Account: "acme", RequestedAt: now},
		{ID: "11111111-2222-4333-8444-000000000002", Account: "globex", RequestedAt: now.Add(time.Second)},
	}}})
	for _, acct := range []string{"acme", "globex", "ops-east"} {
		e.credit(t, acct, "seed", "1000")
	}
	const (
		acmeW   = "5e0b7c1a-1111-4222-8333-00000000a001"
		globexW = "5e0b7c1a-1111-4222-8333-00000000a002"
		opsW    = "5e0b7c1a-1111-4222-8333-00000000a003"
	)
	// requester: acme yes, globex no (nothing appended).
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokRia, withdrawalBody(acmeW, "acme", "10")), http.StatusCreated)
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokRia, withdrawalBody(globexW, "globex", "10")), http.StatusForbidden, "forbidden", "account")
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+globexW, tokAlice, nil), http.StatusNotFound, "not_found", "")
	// Unscoped principals are unchanged.
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(globexW, "globex", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(opsW, "ops-east", "10")), http.StatusCreated)

	// reads: the withdrawal, its events, the account.
	wantStatus(t, e.do(t, "GET", "/v1/withdrawals/"+acmeW, tokRia, nil), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/v1/accounts/acme", tokRia, nil), http.StatusOK)
	for _, path := range []string{"/v1/withdrawals/" + globexW, "/v1/withdrawals/" + globexW + "/events", "/v1/accounts/globex"} {
		wantErr(t, e.do(t, "GET", path, tokRia, nil), http.StatusForbidden, "forbidden", "account")
	}

	// approver on ops-*: ops-east yes, acme no; ria may not cancel globex.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+acmeW+"/approve", tokAbe, nil), http.StatusForbidden, "forbidden", "account")
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+opsW+"/approve", tokAbe, nil), http.StatusOK)
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+globexW+"/cancel", tokRia, nil), http.StatusForbidden, "forbidden", "account")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+globexW+"/decline", tokRia, reqBody{"reason": "not mine"}), http.StatusForbidden, "forbidden", "account")

	// operator on acme: credits there only.
	wantStatus(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOli, reqBody{"credit_id": "c-oli", "amount": "1"}), http.StatusCreated)
	wantErr(t, e.do(t, "POST", "/v1/accounts/globex/credits", tokOli, reqBody{"credit_id": "c-oli", "amount": "1"}), http.StatusForbidden, "forbidden", "account")

	// queues list only the principal's accounts.
	queue := func(token string) []api.QueueItem {
		r := e.do(t, "GET", "/v1/queues/approvals", token, nil)
		wantStatus(t, r, http.StatusOK)
		var q api.ItemsBody
		if err := json.Unmarshal(r.body, &q); err != nil {
			t.Fatal(err)
		}
		return q.Items
	}
	if items := queue(tokRia); len(items) != 1 || items[0].Account != "acme" {
		t.Fatalf("ria's approvals queue: %+v", items)
	}
	if items := queue(tokBob); len(items) != 2 {
		t.Fatalf("bob (unscoped) sees %d items, want 2", len(items))
	}

	// The same refusal over NATS.
	m := e.natsReq(t, api.SubjectWithdrawalRequest, tokRia, withdrawalBody("5e0b7c1a-1111-4222-8333-00000000a004", "globex", "1"))
	if got := m.Header.Get(micro.ErrorHeader); got != "forbidden" {
		t.Fatalf("NATS request on globex by ria: error %q (%s)", got, m.Data)
	}
}
