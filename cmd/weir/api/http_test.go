package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/sagas"
)

func TestRequestCreatedReplayedAndConflict(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()

	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "1.5"))
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first request marked replayed")
	}
	w := r.withdrawal(t)
	if w.ID != id || w.State != aggregate.StateRequested || w.Amount != "1.5" || w.AmountUnits != "1500000" ||
		w.RequestedBy != "alice" || !w.Reserved || w.RequiredApprovals != 1 {
		t.Fatalf("created %+v", w)
	}
	// The contract's fields, absent values as null.
	m := r.json(t)
	for _, k := range []string{"id", "state", "version", "account", "to_address", "amount", "amount_units", "asset",
		"requested_by", "required_approvals", "approvals", "route", "txid", "attempt", "reason", "terminal"} {
		if _, ok := m[k]; !ok {
			t.Errorf("withdrawal JSON lacks %q", k)
		}
	}
	if m["txid"] != nil || m["reason"] != nil {
		t.Errorf("txid/reason should be null: %s", r.body)
	}

	// Identical retry, and "1.50" means the same as "1.5": replays.
	for _, amount := range []string{"1.5", "1.50", "1.500000"} {
		r = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", amount))
		wantStatus(t, r, http.StatusOK)
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of %s without Idempotent-Replayed: %v", amount, r.header)
		}
		if got := r.withdrawal(t); got.Version != w.Version || got.Amount != "1.5" {
			t.Fatalf("replay changed the withdrawal: %+v", got)
		}
	}

	// The same id meaning something else: 409, original untouched.
	for _, b := range []reqBody{
		withdrawalBody(id, "acme", "1.51"),
		withdrawalBody(id, "other", "1.5"),
	} {
		wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, b), http.StatusConflict, "idempotency_conflict", "operation_id")
	}
	// Another requester with the same id is a different request too.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(id, "acme", "1.5")), http.StatusConflict, "idempotency_conflict", "operation_id")

	r = e.do(t, "GET", "/v1/withdrawals/"+id, tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	if got := r.withdrawal(t); got.Amount != "1.5" || got.Account != "acme" || got.Version != w.Version {
		t.Fatalf("original changed: %+v", got)
	}
	evs := eventsOf(t, e, id)
	if n := countType(evs, aggregate.EventRequested); n != 1 {
		t.Fatalf("%d requested events", n)
	}
}

func TestValidationIs422WithField(t *testing.T) {
	e := newEnv(t)
	id := uuid.NewString()
	cases := []struct {
		name        string
		body        string
		code, field string
	}{
		{"operation id", `{"operation_id":"not-a-uuid","account":"acme","to_address":"` + testAddr + `","amount":"1"}`, "invalid_operation_id", "operation_id"},
		{"missing operation id", `{"account":"acme","to_address":"` + testAddr + `","amount":"1"}`, "invalid_operation_id", "operation_id"},
		{"amount garbage", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"abc"}`, "invalid_amount", "amount"},
		{"amount JSON number", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":12.5}`, "invalid_amount", "amount"},
		{"amount zero", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"0"}`, "invalid_amount", "amount"},
		{"amount too precise", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"1.0000001"}`, "invalid_amount", "amount"},
		{"amount missing", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `"}`, "invalid_amount", "amount"},
		{"address", `{"operation_id":"` + id + `","account":"acme","to_address":"TNotAnAddress","amount":"1"}`, "invalid_address", "to_address"},
		{"asset", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"1","asset":"BTC"}`, "unsupported_asset", "asset"},
		{"account", `{"operation_id":"` + id + `","account":"no spaces","to_address":"` + testAddr + `","amount":"1"}`, "invalid_account", "account"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, c.body), http.StatusUnprocessableEntity, c.code, c.field)
		})
	}
	// Nothing was created by any of them.
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+id, tokAlice, nil), http.StatusNotFound, "not_found", "")

	// Credits: 422 too, and invalid_command for a missing credit id.
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"credit_id":"c1","amount":100}`), 422, "invalid_amount", "amount")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"credit_id":"c1","amount":"-1"}`), 422, "invalid_amount", "amount")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"amount":"1"}`), 422, "invalid_command", "credit_id")
	wantErr(t, e.do(t, "POST", "/v1/accounts/bad.acct/credits", tokOlivia, `{"credit_id":"c1","amount":"1"}`), 422, "invalid_account", "account")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"account":"other","credit_id":"c1","amount":"1"}`), 422, "invalid_account", "account")
}

func TestMalformedTooLargeAndMediaType(t *testing.T) {
	e := newEnv(t)
	id := uuid.NewString()
	good := `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"1"}`
	malformed := []struct{ name, body, field string }{
		{"syntax", `{"operation_id":`, ""},
		{"syntax 2", `{"operation_id":"x",}`, ""},
		{"trailing data", good + `{}`, ""},
		{"trailing garbage", good + ` x`, ""},
		{"not an object", `["a"]`, ""},
		{"string", `"hello"`, ""},
		{"empty", ``, ""},
		{"wrong type", `{"operation_id":"` + id + `","account":42,"to_address":"` + testAddr + `","amount":"1"}`, "account"},
		{"wrong type bool", `{"operation_id":true}`, "operation_id"},
		{"unknown field", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","ammount":"1"}`, "ammount"},
		{"requested_by is not a body field", `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `","amount":"1","requested_by":"mallory"}`, "requested_by"},
	}
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, c.body), http.StatusBadRequest, "malformed_json", c.field)
		})
	}
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"credit_id":"c1","amount":"1"`), 400, "malformed_json", "")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"credit_id":7,"amount":"1"}`), 400, "malformed_json", "credit_id")

	// 413 above 64 KiB, whatever the content.
	big := `{"operation_id":"` + id + `","account":"` + strings.Repeat("a", 64<<10) + `"}`
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, big), http.StatusRequestEntityTooLarge, "too_large", "")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, big), http.StatusRequestEntityTooLarge, "too_large", "")

	// 415 unless application/json (a utf-8 charset is fine).
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "", "application/jsonx"} {
		wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, good, "Content-Type", ct), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	}
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, `{}`, "Content-Type", "text/plain"), 415, "unsupported_media_type", "")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{}`, "Content-Type", "text/json"), 415, "unsupported_media_type", "")
	e.credit(t, "acme", "seed", "10")
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, good, "Content-Type", "application/json; charset=UTF-8"), http.StatusCreated)
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	id := uuid.NewString()
	calls := []struct{ method, path string }{
		{"POST", "/v1/withdrawals"},
		{"GET", "/v1/withdrawals/" + id},
		{"GET", "/v1/withdrawals/" + id + "/events"},
		{"POST", "/v1/withdrawals/" + id + "/approve"},
		{"POST", "/v1/withdrawals/" + id + "/cancel"},
		{"POST", "/v1/accounts/acme/credits"},
		{"GET", "/v1/accounts/acme"},
		{"GET", "/v1/queues/approvals"},
		{"GET", "/v1/queues/ready"},
		{"GET", "/v1/queues/in-flight"},
		{"GET", "/v1/policy"},
		{"PUT", "/v1/policy"},
	}
	for _, c := range calls {
		for _, auth := range []string{"", "Bearer nope-not-a-token", "Basic " + tokAlice, tokAlice, "Bearer"} {
			r := e.do(t, c.method, c.path, "", `{}`, "Authorization", auth)
			wantErr(t, r, http.StatusUnauthorized, "unauthenticated", "")
		}
	}
	// /healthz and /metrics need no token.
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), http.StatusOK)
	if r := e.do(t, "GET", "/metrics", "", nil); r.status != http.StatusOK {
		t.Fatalf("metrics %d", r.status)
	}
}

func TestRolesForbidden(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	// bob is an approver only: he may not request.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokBob, withdrawalBody(id, "acme", "1")), http.StatusForbidden, "forbidden", "")
	// The role is checked before the body is even read.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokBob, `not json`), http.StatusForbidden, "forbidden", "")
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "1")), http.StatusCreated)
	// dave is a requester only: he may not approve, credit or set the policy.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokDave, nil), http.StatusForbidden, "forbidden", "")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokDave, reqBody{"credit_id": "x", "amount": "1"}), http.StatusForbidden, "forbidden", "")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokAlice, `{"name":"p","rules":[{"name":"r","threshold":"0","approvers":1}]}`), http.StatusForbidden, "forbidden", "")
	// Anyone authenticated may read.
	for _, tok := range []string{tokAlice, tokBob, tokDave, tokOlivia} {
		wantStatus(t, e.do(t, "GET", "/v1/withdrawals/"+id, tok, nil), http.StatusOK)
		wantStatus(t, e.do(t, "GET", "/v1/accounts/acme", tok, nil), http.StatusOK)
		wantStatus(t, e.do(t, "GET", "/v1/policy", tok, nil), http.StatusOK)
	}
}

func TestApprove(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "5000")

	// Single approval below the four-eyes threshold.
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "10")), http.StatusCreated)
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokAlice, nil), http.StatusForbidden, "self_approval", "")
	r := e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	w := r.withdrawal(t)
	if w.State != aggregate.StateApproved || len(w.Approvals) != 1 || w.Approvals[0].By != "bob" || w.Approvals[0].Rule != "single" {
		t.Fatalf("approved %+v", w)
	}
	// The same approver again: 200, nothing changes.
	r = e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	if again := r.withdrawal(t); again.Version != w.Version || len(again.Approvals) != 1 {
		t.Fatalf("repeat approval changed it: %+v", again)
	}
	// Another approver after it is approved: wrong state.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokCarol, nil), http.StatusConflict, "invalid_transition", "")

	// Four eyes above 1000: two distinct approvers.
	big := uuid.NewString()
	r = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(big, "acme", "2000"))
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); w.RequiredApprovals != 2 {
		t.Fatalf("required %d", w.RequiredApprovals)
	}
	r = e.do(t, "POST", "/v1/withdrawals/"+big+"/approve", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	one := r.withdrawal(t)
	if one.State != aggregate.StateRequested || len(one.Approvals) != 1 {
		t.Fatalf("after one approval %+v", one)
	}
	r = e.do(t, "POST", "/v1/withdrawals/"+big+"/approve", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	if again := r.withdrawal(t); again.Version != one.Version {
		t.Fatalf("repeat approval changed it: %+v", again)
	}
	r = e.do(t, "POST", "/v1/withdrawals/"+big+"/approve", tokCarol, nil)
	wantStatus(t, r, http.StatusOK)
	if two := r.withdrawal(t); two.State != aggregate.StateApproved || len(two.Approvals) != 2 {
		t.Fatalf("after two approvals %+v", two)
	}

	// Unknown and malformed ids: 404.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+uuid.NewString()+"/approve", tokBob, nil), http.StatusNotFound, "not_found", "")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/nope/approve", tokBob, nil), http.StatusNotFound, "not_found", "")
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "30")), http.StatusCreated)
	if a := account(t, e, "acme"); a.Available != "70" || a.Reserved != "30" {
		t.Fatalf("after request %+v", a)
	}
	// Another requester may not cancel it; neither may an approver.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/cancel", tokDave, nil), http.StatusForbidden, "forbidden", "")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/cancel", tokBob, nil), http.StatusForbidden, "forbidden", "")
	// Its requester may.
	r := e.do(t, "POST", "/v1/withdrawals/"+id+"/cancel", tokAlice, nil)
	wantStatus(t, r, http.StatusOK)
	w := r.withdrawal(t)
	if w.State != aggregate.StateRejected || w.Reason == nil || *w.Reason != "cancelled" || !w.Terminal {
		t.Fatalf("cancelled %+v", w)
	}
	if a := account(t, e, "acme"); a.Available != "100" || a.Reserved != "0" {
		t.Fatalf("reservation not released: %+v", a)
	}
	// Again: the domain treats it as a replay (200, unchanged).
	r = e.do(t, "POST", "/v1/withdrawals/"+id+"/cancel", tokAlice, nil)
	wantStatus(t, r, http.StatusOK)
	if again := r.withdrawal(t); again.Version != w.Version {
		t.Fatalf("second cancel changed it: %+v", again)
	}

	// An operator may cancel anyone's, approved included.
	id2 := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(id2, "acme", "5")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+id2+"/approve", tokBob, nil), http.StatusOK)
	r = e.do(t, "POST", "/v1/withdrawals/"+id2+"/cancel", tokOlivia, nil)
	wantStatus(t, r, http.StatusOK)
	if w := r.withdrawal(t); w.State != aggregate.StateRejected || *w.Reason != "cancelled" {
		t.Fatalf("operator cancel %+v", w)
	}

	// Rejected for another reason: not cancellable.
	id3 := uuid.NewString()
	r = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id3, "acme", "1000"))
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); w.State != aggregate.StateRejected || *w.Reason != "insufficient_funds" {
		t.Fatalf("want insufficient_funds: %+v", w)
	}
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id3+"/cancel", tokAlice, nil), http.StatusConflict, "not_cancellable", "")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+uuid.NewString()+"/cancel", tokOlivia, nil), http.StatusNotFound, "not_found", "")
}

func TestInsufficientFundsRejectsAndLeavesBalance(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "5")
	before := account(t, e, "acme")
	id := uuid.NewString()
	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "10"))
	wantStatus(t, r, http.StatusCreated)
	w := r.withdrawal(t)
	if w.State != aggregate.StateRejected || w.Reason == nil || *w.Reason != "insufficient_funds" || w.Reserved {
		t.Fatalf("want rejected insufficient_funds: %+v", w)
	}
	// It exists, and the balance is untouched.
	r = e.do(t, "GET", "/v1/withdrawals/"+id, tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	if got := r.withdrawal(t); got.State != aggregate.StateRejected {
		t.Fatalf("stored %+v", got)
	}
	if after := account(t, e, "acme"); after != before {
		t.Fatalf("balance moved: %+v → %+v", before, after)
	}
	// A retry replays the rejected withdrawal.
	r = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "10"))
	wantStatus(t, r, http.StatusOK)
	if r.header.Get("Idempotent-Replayed") != "true" || r.withdrawal(t).State != aggregate.StateRejected {
		t.Fatalf("replay: %v %s", r.header, r.body)
	}
	// An account never credited: every request is rejected, the account
	// still does not exist as far as reads go.
	id2 := uuid.NewString()
	r = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id2, "empty", "1"))
	wantStatus(t, r, http.StatusCreated)
	if w := r.withdrawal(t); *w.Reason != "insufficient_funds" {
		t.Fatalf("%+v", w)
	}
}

func TestAccountsAndCredits(t *testing.T) {
	e := newEnv(t)
	wantErr(t, e.do(t, "GET", "/v1/accounts/acme", tokAlice, nil), http.StatusNotFound, "not_found", "")
	wantErr(t, e.do(t, "GET", "/v1/accounts/bad.id", tokAlice, nil), http.StatusNotFound, "not_found", "")

	r := e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "dep-1", "amount": "100.5"})
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first credit marked replayed")
	}
	want := aggregate.AccountView{ID: "acme", Available: "100.5", Reserved: "0", Settled: "0"}
	if got := decodeAccount(t, r); got != want {
		t.Fatalf("credit reply %+v", got)
	}
	// Identical retry ("100.50" is the same amount).
	r = e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "dep-1", "amount": "100.50"})
	wantStatus(t, r, http.StatusOK)
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay header missing: %v", r.header)
	}
	if got := decodeAccount(t, r); got != want {
		t.Fatalf("replay reply %+v", got)
	}
	// The body may repeat the path's account.
	r = e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"account": "acme", "credit_id": "dep-1", "amount": "100.5"})
	wantStatus(t, r, http.StatusOK)
	// Same credit id, other amount: conflict, nothing changes.
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, reqBody{"credit_id": "dep-1", "amount": "7"}), http.StatusConflict, "idempotency_conflict", "credit_id")
	if got := account(t, e, "acme"); got != want {
		t.Fatalf("account %+v", got)
	}
	m := e.do(t, "GET", "/v1/accounts/acme", tokDave, nil).json(t)
	if len(m) != 4 || m["id"] != "acme" || m["available"] != "100.5" || m["reserved"] != "0" || m["settled"] != "0" {
		t.Fatalf("account JSON %v", m)
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/approve", tokBob, nil), http.StatusOK)
	r := e.do(t, "GET", "/v1/withdrawals/"+id+"/events", tokDave, nil)
	wantStatus(t, r, http.StatusOK)
	var raw struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Events) < 3 {
		t.Fatalf("events %s", r.body)
	}
	for i, ev := range raw.Events {
		for _, k := range []string{"version", "type", "at", "state", "data"} {
			if _, ok := ev[k]; !ok {
				t.Fatalf("event %d lacks %q: %s", i, k, r.body)
			}
		}
		var v uint64
		_ = json.Unmarshal(ev["version"], &v)
		if v != uint64(i+1) {
			t.Fatalf("event %d has version %d", i, v)
		}
	}
	evs := eventsOf(t, e, id)
	if evs[0].Type != aggregate.EventRequested || evs[0].State != aggregate.StateRequested {
		t.Fatalf("first event %+v", evs[0])
	}
	last := evs[len(evs)-1]
	if last.State != aggregate.StateApproved {
		t.Fatalf("last event %+v", last)
	}
	if !slices.ContainsFunc(evs, func(ev sagas.EventView) bool { return ev.Type == aggregate.EventFundsReserved }) {
		t.Fatalf("no reservation event: %+v", evs)
	}
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+uuid.NewString()+"/events", tokAlice, nil), http.StatusNotFound, "not_found", "")
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+uuid.NewString(), tokAlice, nil), http.StatusNotFound, "not_found", "")
}

func TestQueues(t *testing.T) {
	w := aggregate.Withdrawal{ID: uuid.NewString(), State: aggregate.StateRequested, Account: "acme",
		Amount: aggregate.MustParseAmount(aggregate.USDT, "3"), Asset: aggregate.USDT.Code, RequiredApprovals: 1}
	e := newEnv(t, envOpts{queues: fixedQueues{approvals: []aggregate.Withdrawal{w}}})
	r := e.do(t, "GET", "/v1/queues/approvals", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	var q struct {
		Items []aggregate.WithdrawalView `json:"items"`
	}
	if err := json.Unmarshal(r.body, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Items) != 1 || q.Items[0].ID != w.ID || q.Items[0].Amount != "3" {
		t.Fatalf("approvals %s", r.body)
	}
	// The NATS service serves the same queue, byte for byte.
	if m := e.natsReq(t, api.SubjectQueueApprovals, tokBob, `{}`); string(m.Data)+"\n" != string(r.body) {
		t.Fatalf("NATS %s vs HTTP %s", m.Data, r.body)
	}
	for _, name := range []string{"ready", "in-flight"} {
		r := e.do(t, "GET", "/v1/queues/"+name, tokBob, nil)
		wantStatus(t, r, http.StatusOK)
		if strings.TrimSpace(string(r.body)) != `{"items":[],"next_cursor":null}` {
			t.Fatalf("%s: %s", name, r.body)
		}
	}
	// No queues at all: empty lists, never null.
	e2 := newEnv(t)
	for _, name := range []string{"approvals", "ready", "in-flight"} {
		r := e2.do(t, "GET", "/v1/queues/"+name, tokBob, nil)
		wantStatus(t, r, http.StatusOK)
		if strings.TrimSpace(string(r.body)) != `{"items":[],"next_cursor":null}` {
			t.Fatalf("%s: %s", name, r.body)
		}
	}
	wantErr(t, e.do(t, "GET", "/v1/queues/other", tokBob, nil), http.StatusNotFound, "not_found", "")

	// The in-flight queue adds what an operator needs to judge each item.
	sending := w
	sending.State = aggregate.StateBroadcasting
	e3 := newEnv(t, envOpts{queues: fixedQueues{inFlight: []projections.InFlightItem{{
		Withdrawal: sending, ID: sending.ID, State: sending.State, Sends: 2, Age: 90 * time.Second,
		Unacknowledged: true, LeaseLapsed: true, Ambiguous: true,
	}}}})
	r = e3.do(t, "GET", "/v1/queues/in-flight", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	var inFlight struct {
		Items []struct {
			ID       string `json:"id"`
			State    string `json:"state"`
			InFlight struct {
				AgeSeconds float64 `json:"age_seconds"`
				Sends      int     `json:"sends"`
				ClaimedBy  *string `json:"claimed_by"`
				Ambiguous  bool    `json:"ambiguous"`
			} `json:"in_flight"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.body, &inFlight); err != nil {
		t.Fatal(err)
	}
	if len(inFlight.Items) != 1 || inFlight.Items[0].ID != w.ID || inFlight.Items[0].State != "broadcasting" ||
		inFlight.Items[0].InFlight.AgeSeconds != 90 || inFlight.Items[0].InFlight.Sends != 2 ||
		!inFlight.Items[0].InFlight.Ambiguous || inFlight.Items[0].InFlight.ClaimedBy != nil {
		t.Fatalf("in-flight %s", r.body)
	}
}

func TestPolicy(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", "/v1/policy", tokDave, nil)
	wantStatus(t, r, http.StatusOK)
	checkPolicyShape(t, r.body)
	m := r.json(t)
	if m["name"] != "four-eyes above 1000" {
		t.Fatalf("default policy %s", r.body)
	}

	doc := `{"name":"tiers","rules":[{"name":"big","threshold":"5000.5","approvers":3},{"name":"small","threshold":"0","approvers":1}]}`
	r = e.do(t, "PUT", "/v1/policy", tokOlivia, doc)
	wantStatus(t, r, http.StatusOK)
	checkPolicyShape(t, r.body)
	var p struct {
		Version int    `json:"version"`
		Name    string `json:"name"`
		Rules   []struct {
			Name      string `json:"name"`
			Threshold string `json:"threshold"`
			Approvers int    `json:"approvers"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Version != 1 || p.Name != "tiers" || len(p.Rules) != 2 || p.Rules[0].Threshold != "0" || p.Rules[1].Threshold != "5000.5" || p.Rules[1].Approvers != 3 {
		t.Fatalf("set policy %s", r.body)
	}
	// GET shows it; its output can be PUT back unchanged (no new version).
	r = e.do(t, "GET", "/v1/policy", tokAlice, nil)
	wantStatus(t, r, http.StatusOK)
	got := r.body
	r = e.do(t, "PUT", "/v1/policy", tokOlivia, got)
	wantStatus(t, r, http.StatusOK)
	if string(r.body) != string(got) {
		t.Fatalf("round trip: %s vs %s", r.body, got)
	}

	invalid := []struct{ body, field string }{
		{`{"name":"x","rules":[]}`, "rules"},
		{`{"name":"x","rules":[{"name":"a","threshold":"10","approvers":1}]}`, "rules"},
		{`{"name":"x","rules":[{"name":"a","threshold":0,"approvers":1}]}`, "rules[0].threshold"},
		{`{"name":"x","rules":[{"name":"a","threshold":"0","approvers":0}]}`, "rules[0].approvers"},
		{`{"rules":[{"name":"a","threshold":"0","approvers":1}]}`, "name"},
		{`{"name":"x","rules":[{"name":"a","threshold":"0","approvers":1}],"extra":1}`, ""},
	}
	for _, c := range invalid {
		wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, c.body), http.StatusUnprocessableEntity, "invalid_policy", c.field)
	}
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, `{"name":`), http.StatusBadRequest, "malformed_json", "")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, `[1]`), http.StatusBadRequest, "malformed_json", "")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokBob, doc), http.StatusForbidden, "forbidden", "")
	// Still version 1.
	if m := e.do(t, "GET", "/v1/policy", tokAlice, nil).json(t); m["version"] != float64(1) {
		t.Fatalf("version %v", m["version"])
	}
}

// checkPolicyShape: exactly {"version","name","rules":[{"name","threshold","approvers"}]}.
func checkPolicyShape(t *testing.T, body []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["version"] == nil || m["name"] == nil || m["rules"] == nil {
		t.Fatalf("policy keys: %s", body)
	}
	var rules []map[string]json.RawMessage
	if err := json.Unmarshal(m["rules"], &rules); err != nil || len(rules) == 0 {
		t.Fatalf("rules: %v %s", err, body)
	}
	for _, r := range rules {
		var th string
		if len(r) != 3 || r["name"] == nil || r["approvers"] == nil || json.Unmarshal(r["threshold"], &th) != nil {
			t.Fatalf("rule shape: %s", body)
		}
	}
}

func TestHealthzMetricsAndRouting(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusOK)
	e.health.set(errors.New("store down"))
	r = e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusServiceUnavailable)
	e.health.set(nil)
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), http.StatusOK)

	wantStatus(t, e.do(t, "GET", "/v1/policy", tokAlice, nil), http.StatusOK)
	r = e.do(t, "GET", "/metrics", "", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics %d %q", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		`weir_api_requests_total{route="GET /v1/policy",status="200",transport="http"} 1`,
		`weir_api_requests_total{route="GET /healthz",status="503",transport="http"} 1`,
		`weir_api_command_duration_seconds_bucket{command="policy.get",transport="http",le="+Inf"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// Unknown routes and wrong methods answer JSON too.
	wantErr(t, e.do(t, "GET", "/v2/nothing", tokAlice, nil), http.StatusNotFound, "not_found", "")
	r = e.do(t, "DELETE", "/v1/policy", tokOlivia, nil)
	wantErr(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
	if allow := r.header.Get("Allow"); allow != "GET, PUT" {
		t.Fatalf("Allow %q", allow)
	}
	wantErr(t, e.do(t, "PUT", "/v1/withdrawals", tokAlice, nil), http.StatusMethodNotAllowed, "method_not_allowed", "")
}

// TestConcurrentIdenticalRequests: 32 identical POSTs at once create one
// withdrawal with one creation event; every other answer is a replay.
func TestConcurrentIdenticalRequests(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	const n = 32
	var wg sync.WaitGroup
	results := make([]resp, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "2.5"))
		})
	}
	close(start)
	wg.Wait()
	created, replayed := 0, 0
	for _, r := range results {
		switch {
		case r.status == http.StatusCreated && r.header.Get("Idempotent-Replayed") == "":
			created++
		case r.status == http.StatusOK && r.header.Get("Idempotent-Replayed") == "true":
			replayed++
		default:
			t.Fatalf("unexpected answer %d %v %s", r.status, r.header, r.body)
		}
		if w := r.withdrawal(t); w.ID != id || w.Amount != "2.5" {
			t.Fatalf("answer %+v", w)
		}
	}
	if created != 1 || replayed != n-1 {
		t.Fatalf("created %d, replayed %d", created, replayed)
	}
	evs := eventsOf(t, e, id)
	if c := countType(evs, aggregate.EventRequested); c != 1 {
		t.Fatalf("%d withdrawal.requested events", c)
	}
	if c := countType(evs, aggregate.EventFundsReserved); c != 1 {
		t.Fatalf("%d funds_reserved events", c)
	}
	if a := account(t, e, "acme"); a.Reserved != "2.5" || a.Available != "97.5" {
		t.Fatalf("account %+v", a)
	}
}

// TestConcurrentReservations: 100 requests against a balance that covers
// 10 → exactly 10 reserved, 90 rejected insufficient_funds, no overdraft.
func TestConcurrentReservations(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "70") // covers 10 × 7
	const n = 100
	var wg sync.WaitGroup
	results := make([]aggregate.WithdrawalView, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r := e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(uuid.NewString(), "acme", "7"))
			if r.status != http.StatusCreated {
				t.Errorf("status %d: %s", r.status, r.body)
				return
			}
			results[i] = r.withdrawal(t)
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	reserved, rejected := 0, 0
	for _, w := range results {
		switch {
		case w.State == aggregate.StateRequested && w.Reserved:
			reserved++
		case w.State == aggregate.StateRejected && w.Reason != nil && *w.Reason == "insufficient_funds" && !w.Reserved:
			rejected++
		default:
			t.Fatalf("unexpected withdrawal %+v", w)
		}
	}
	if reserved != 10 || rejected != 90 {
		t.Fatalf("reserved %d, rejected %d", reserved, rejected)
	}
	a := account(t, e, "acme")
	if a.Reserved != "70" || a.Available != "0" || strings.HasPrefix(a.Available, "-") {
		t.Fatalf("account %+v", a)
	}
	// The stored states agree with the replies.
	for _, w := range results {
		r := e.do(t, "GET", "/v1/withdrawals/"+w.ID, tokBob, nil)
		if got := r.withdrawal(t); got.State != w.State || got.Reserved != w.Reserved {
			t.Fatalf("stored %+v, replied %+v", got, w)
		}
	}
}

func account(t *testing.T, e *env, id string) aggregate.AccountView {
	t.Helper()
	r := e.do(t, "GET", "/v1/accounts/"+id, tokOlivia, nil)
	wantStatus(t, r, http.StatusOK)
	return decodeAccount(t, r)
}

func decodeAccount(t *testing.T, r resp) aggregate.AccountView {
	t.Helper()
	var a aggregate.AccountView
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return a
}

func eventsOf(t *testing.T, e *env, id string) []sagas.EventView {
	t.Helper()
	r := e.do(t, "GET", "/v1/withdrawals/"+id+"/events", tokAlice, nil)
	wantStatus(t, r, http.StatusOK)
	var b struct {
		Events []sagas.EventView `json:"events"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatal(err)
	}
	return b.Events
}

func countType(evs []sagas.EventView, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestStoreDownIs503: with the NATS server gone, reads and writes answer
// 503 unavailable (never 500, never a leaked error text).
func TestStoreDownIs503(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "10")
	e.emb.Shutdown()
	for _, r := range []resp{
		e.do(t, "GET", "/v1/accounts/acme", tokAlice, nil),
		e.do(t, "GET", "/v1/policy", tokAlice, nil),
		e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(uuid.NewString(), "acme", "1")),
	} {
		wantErr(t, r, http.StatusServiceUnavailable, "unavailable", "")
		if strings.Contains(string(r.body), "nats:") {
			t.Fatalf("leaks the cause: %s", r.body)
		}
	}
}
