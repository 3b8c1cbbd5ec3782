package api_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// requestJSON is a withdrawal request body with the members given raw, in
// order, so a test can repeat or re-case a key.
func requestJSON(id string, members ...string) string {
	body := `{"operation_id":"` + id + `","account":"acme","to_address":"` + testAddr + `"`
	for _, m := range members {
		body += "," + m
	}
	return body + "}"
}

// wantNothingAppended checks that the refused request created nothing.
func wantNothingAppended(t *testing.T, e *env, id string) {
	t.Helper()
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+id, tokAlice, nil), http.StatusNotFound, api.CodeNotFound, "")
}

// Finding "duplicate keys: last wins": {"amount":"1","amount":"3"} must not
// create a withdrawal of 3 (nor of 1): another parser on the path would
// read the other value. 400 malformed_json names the key, on HTTP and NATS.
func TestDuplicateKeysAreRefusedNotLastWins(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")

	id := uuid.NewString()
	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, requestJSON(id, `"amount":"1"`, `"amount":"3"`))
	wantErr(t, r, http.StatusBadRequest, api.CodeMalformedJSON, "amount")
	wantNothingAppended(t, e, id)
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, requestJSON(id, `"amount":"1"`, `"amount":"3"`)),
		"400", api.CodeMalformedJSON, "amount")
	wantNothingAppended(t, e, id)

	// At any depth, and in every body: a credit, an id, a page, a policy.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, requestJSON(id, `"amount":{"v":"1","v":"3"}`)),
		http.StatusBadRequest, api.CodeMalformedJSON, "v")
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"credit_id":"c2","amount":"1","amount":"1000"}`),
		http.StatusBadRequest, api.CodeMalformedJSON, "amount")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalGet, tokAlice, `{"id":"x","id":"`+id+`"}`), "400", api.CodeMalformedJSON, "id")
	natsErr(t, e.natsReq(t, api.SubjectQueueApprovals, tokAlice, `{"limit":1,"limit":1000}`), "400", api.CodeMalformedJSON, "limit")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, `{"name":"p","rules":[{"name":"r","threshold":"0","approvers":1,"approvers":0}]}`),
		http.StatusBadRequest, api.CodeMalformedJSON, "approvers")
	if r := e.do(t, "GET", "/v1/accounts/acme", tokOlivia, nil); r.json(t)["available"] != "100" {
		t.Fatalf("a refused credit moved the balance: %s", r.body)
	}
}

// Finding "keys match case-insensitively with Unicode folding":
// {"amount":"1","AMOUNT":"3"} created a withdrawal of 3 and "aſſet" (long
// s) was taken for "asset". A key that equals a field only when case is
// ignored is 400 malformed_json naming the key, on HTTP and NATS.
func TestKeysDifferingFromTheSchemaOnlyInCaseAreRefused(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")

	for _, c := range []struct {
		members []string
		key     string
	}{
		{[]string{`"amount":"1"`, `"AMOUNT":"3"`}, "AMOUNT"},
		{[]string{`"Amount":"3"`}, "Amount"},
		{[]string{`"amount":"1"`, `"aſſet":"USDT-TRC20"`}, "aſſet"}, // U+017F folds to s
	} {
		id := uuid.NewString()
		body := requestJSON(id, c.members...)
		r := e.do(t, "POST", "/v1/withdrawals", tokAlice, body)
		wantErr(t, r, http.StatusBadRequest, api.CodeMalformedJSON, c.key)
		natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, body), "400", api.CodeMalformedJSON, c.key)
		wantNothingAppended(t, e, id)
	}
	wantErr(t, e.do(t, "POST", "/v1/accounts/acme/credits", tokOlivia, `{"CREDIT_ID":"c3","amount":"1"}`),
		http.StatusBadRequest, api.CodeMalformedJSON, "CREDIT_ID")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalApprove, tokBob, `{"ID":"`+uuid.NewString()+`"}`), "400", api.CodeMalformedJSON, "ID")
	natsErr(t, e.natsReq(t, api.SubjectQueueReady, tokBob, `{"Limit":5}`), "400", api.CodeMalformedJSON, "Limit")
	wantErr(t, e.do(t, "PUT", "/v1/policy", tokOlivia, `{"name":"p","rules":[{"name":"r","threshold":"0","Approvers":1}]}`),
		http.StatusBadRequest, api.CodeMalformedJSON, "Approvers")

	// The exact keys still work.
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, requestJSON(uuid.NewString(), `"amount":"1"`, `"asset":"USDT-TRC20"`)),
		http.StatusCreated)
}

// Found by `make fuzz` in CI: a form feed before the object was trimmed as
// whitespace and the body accepted, though JSON allows only space, tab, line
// feed and carriage return around a value and every JSON parser refuses it.
// Such a body is 400 malformed_json and creates nothing; JSON's own
// whitespace is still accepted.
func TestWhitespaceThatJSONDoesNotAllowIsRefused(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")

	for _, pad := range []string{"\f", "\v", "\u00a0", "\u0085", "\u2028"} {
		id := uuid.NewString()
		body := pad + requestJSON(id, `"amount":"1"`) + pad
		wantErr(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, body), http.StatusBadRequest, api.CodeMalformedJSON, "")
		natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, body), "400", api.CodeMalformedJSON, "")
		wantNothingAppended(t, e, id)
	}
	// A page request whose body is only a form feed is not an empty body.
	natsErr(t, e.natsReq(t, api.SubjectQueueReady, tokBob, "\f"), "400", api.CodeMalformedJSON, "")

	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, " \t\r\n"+requestJSON(uuid.NewString(), `"amount":"1"`)+"\n"),
		http.StatusCreated)
}
