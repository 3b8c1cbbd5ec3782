package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
)

func list(t *testing.T, e *env, token string, q url.Values) api.ListBody {
	t.Helper()
	r := e.do(t, "GET", "/v1/withdrawals?"+q.Encode(), token, nil)
	wantStatus(t, r, http.StatusOK)
	var b api.ListBody
	r.decode(t, &b)
	return b
}

func listIDs(b api.ListBody) []string {
	out := make([]string, len(b.Withdrawals))
	for i, w := range b.Withdrawals {
		out[i] = w.ID
	}
	return out
}

func TestListFiltersByStateAndAccountNewestFirstWithCursorsAndTerminalOnes(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	a1, a2, z1, a3 := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(a1, "acme", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(a2, "acme", "20")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(z1, "zeta", "5")), http.StatusCreated) // rejected: no funds
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(a3, "acme", "30")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+a2+"/decline", tokBob, map[string]string{"reason": "no"}), http.StatusOK)

	all := list(t, e, tokBob, nil)
	if got, want := listIDs(all), []string{a3, z1, a2, a1}; !equal(got, want) || all.NextCursor != nil {
		t.Fatalf("all: %v (next %v), want %v", got, all.NextCursor, want)
	}
	if got := listIDs(list(t, e, tokBob, url.Values{"state": {"rejected"}})); !equal(got, []string{z1, a2}) {
		t.Fatalf("rejected: %v", got)
	}
	if got := listIDs(list(t, e, tokBob, url.Values{"account": {"acme"}, "state": {"requested"}})); !equal(got, []string{a3, a1}) {
		t.Fatalf("acme requested: %v", got)
	}
	// Pages of one: every withdrawal once, in order, then no cursor.
	var paged []string
	cursor := ""
	for range 10 {
		q := url.Values{"account": {"acme"}, "limit": {"1"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		b := list(t, e, tokOlivia, q)
		paged = append(paged, listIDs(b)...)
		if b.NextCursor == nil {
			break
		}
		cursor = *b.NextCursor
	}
	if !equal(paged, []string{a3, a2, a1}) {
		t.Fatalf("acme paged: %v", paged)
	}
	// A requester sees only its own.
	if got := listIDs(list(t, e, tokDave, nil)); !equal(got, []string{z1, a2}) {
		t.Fatalf("dave's own: %v", got)
	}
	wantErr(t, e.do(t, "GET", "/v1/withdrawals?state=nope", tokBob, nil), http.StatusUnprocessableEntity, "invalid_command", "state")
	wantErr(t, e.do(t, "GET", "/v1/withdrawals?cursor=x", tokBob, nil), http.StatusUnprocessableEntity, "invalid_command", "cursor")
	wantErr(t, e.do(t, "GET", "/v1/withdrawals?limit=1001", tokBob, nil), http.StatusUnprocessableEntity, "invalid_command", "limit")
	wantErr(t, e.do(t, "GET", "/v1/withdrawals", "", nil), http.StatusUnauthorized, "unauthenticated", "")

	// NATS answers the same document.
	var b api.ListBody
	natsOK(t, e.natsReq(t, "weir.cmd.withdrawal.list", tokBob, map[string]any{"state": "rejected"}), &b)
	if !equal(listIDs(b), []string{z1, a2}) {
		t.Fatalf("NATS list: %v", listIDs(b))
	}
	natsErr(t, e.natsReq(t, "weir.cmd.withdrawal.list", tokBob, map[string]any{"stat": "rejected"}), "400", "malformed_json", "stat")
}

func TestStatementShowsEveryMovementWithWhoAndWhichWithdrawal(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	w1, w2 := uuid.NewString(), uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(w1, "acme", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(w2, "acme", "20")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+w2+"/decline", tokBob, map[string]string{"reason": "no"}), http.StatusOK)

	r := e.do(t, "GET", "/v1/accounts/acme/statement", tokBob, nil)
	wantStatus(t, r, http.StatusOK)
	var st api.StatementBody
	r.decode(t, &st)
	type row struct{ kind, amount, wid, cid, by string }
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	var got []row
	for _, en := range st.Entries {
		got = append(got, row{en.Kind, en.Amount, s(en.WithdrawalID), s(en.CreditID), s(en.By)})
		if en.Seq == 0 || en.At.IsZero() {
			t.Fatalf("entry without seq or time: %+v", en)
		}
	}
	want := []row{
		{"released", "20", w2, "", ""},
		{"reserved", "20", w2, "", ""},
		{"reserved", "10", w1, "", ""},
		{"credited", "100", "", "seed", "olivia"},
	}
	if len(got) != len(want) {
		t.Fatalf("statement %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// Paging by seq.
	r = e.do(t, "GET", "/v1/accounts/acme/statement?limit=3", tokBob, nil)
	var p1 api.StatementBody
	r.decode(t, &p1)
	if len(p1.Entries) != 3 || p1.NextCursor == nil {
		t.Fatalf("page 1: %+v", p1)
	}
	r = e.do(t, "GET", "/v1/accounts/acme/statement?limit=3&cursor="+*p1.NextCursor, tokBob, nil)
	var p2 api.StatementBody
	r.decode(t, &p2)
	if len(p2.Entries) != 1 || p2.Entries[0].Kind != "credited" || p2.NextCursor != nil {
		t.Fatalf("page 2: %+v", p2)
	}
	// A requester sees its own withdrawals' movements only.
	r = e.do(t, "GET", "/v1/accounts/acme/statement", tokDave, nil)
	var mine api.StatementBody
	r.decode(t, &mine)
	if len(mine.Entries) != 2 || *mine.Entries[0].WithdrawalID != w2 || *mine.Entries[1].WithdrawalID != w2 {
		t.Fatalf("dave's statement: %+v", mine.Entries)
	}
	wantErr(t, e.do(t, "GET", "/v1/accounts/nobody/statement", tokBob, nil), http.StatusNotFound, "not_found", "")
	var nb api.StatementBody
	natsOK(t, e.natsReq(t, "weir.cmd.account.statement", tokBob, map[string]any{"account": "acme", "limit": 1}), &nb)
	if len(nb.Entries) != 1 || nb.Entries[0].Kind != sagas.EntryReleased {
		t.Fatalf("NATS statement: %+v", nb)
	}
}

// decode reads the body into v.
func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d: %v: %s", r.status, err, r.body)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A principal scoped to accounts lists and reads statements of those only.
func TestScopedPrincipalsListAndReadStatementsOfTheirAccountsOnly(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	e.credit(t, "zeta", "seed", "100")
	a, z := uuid.NewString(), uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(a, "acme", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(z, "zeta", "10")), http.StatusCreated)
	if got := listIDs(list(t, e, tokOli, nil)); !equal(got, []string{a}) {
		t.Fatalf("oli (acme only) lists %v", got)
	}
	if got := listIDs(list(t, e, tokBob, nil)); !equal(got, []string{z, a}) {
		t.Fatalf("bob (unscoped) lists %v", got)
	}
	wantErr(t, e.do(t, "GET", "/v1/withdrawals?account=zeta", tokOli, nil), http.StatusForbidden, "forbidden", "account")
	wantErr(t, e.do(t, "GET", "/v1/accounts/zeta/statement", tokOli, nil), http.StatusForbidden, "forbidden", "account")
	wantStatus(t, e.do(t, "GET", "/v1/accounts/acme/statement", tokOli, nil), http.StatusOK)
	natsErr(t, e.natsReq(t, "weir.cmd.account.statement", tokOli, map[string]any{"account": "zeta"}), "403", "forbidden", "account")
}
