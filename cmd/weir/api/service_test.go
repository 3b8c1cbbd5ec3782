package api_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
)

// TestServiceDiscovery: `nats micro ls` finds the service by PING and
// INFO on the control subjects.
func TestServiceDiscovery(t *testing.T) {
	e := newEnv(t)
	subj, err := micro.ControlSubject(micro.PingVerb, "", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.client.Request(subj, nil, 10e9)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(m.Data, &ping); err != nil || ping.Name != "weir" || ping.Version != "1.2.3" {
		t.Fatalf("ping %v %s", err, m.Data)
	}
	subj, _ = micro.ControlSubject(micro.InfoVerb, api.ServiceName, "")
	m, err = e.client.Request(subj, nil, 10e9)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil || info.Name != "weir" {
		t.Fatalf("info %v %s", err, m.Data)
	}
	var subjects []string
	for _, ep := range info.Endpoints {
		subjects = append(subjects, ep.Subject)
	}
	for _, want := range []string{
		"weir.cmd.withdrawal.request", "weir.cmd.withdrawal.approve", "weir.cmd.withdrawal.cancel",
		"weir.cmd.withdrawal.get", "weir.cmd.withdrawal.events", "weir.cmd.account.credit",
		"weir.cmd.account.get", "weir.cmd.policy.get", "weir.cmd.policy.set",
		"weir.cmd.queue.approvals", "weir.cmd.queue.ready", "weir.cmd.queue.in-flight",
	} {
		if !slices.Contains(subjects, want) {
			t.Errorf("endpoint %s missing from %v", want, subjects)
		}
	}
}

// TestServiceEndpoints drives every endpoint once through a real
// connection, with the error mapping on the way.
func TestServiceEndpoints(t *testing.T) {
	e := newEnv(t)

	// credit: created, then replayed with the header.
	var acct aggregate.AccountView
	m := e.natsReq(t, api.SubjectAccountCredit, tokOlivia, reqBody{"account": "acme", "credit_id": "dep-1", "amount": "100"})
	natsOK(t, m, &acct)
	if acct != (aggregate.AccountView{ID: "acme", Available: "100", Reserved: "0", Settled: "0"}) || m.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("credit %+v %v", acct, m.Header)
	}
	m = e.natsReq(t, api.SubjectAccountCredit, tokOlivia, reqBody{"account": "acme", "credit_id": "dep-1", "amount": "100.0"})
	natsOK(t, m, &acct)
	if m.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("credit replay header missing: %v", m.Header)
	}
	natsErr(t, e.natsReq(t, api.SubjectAccountCredit, tokOlivia, reqBody{"account": "acme", "credit_id": "dep-1", "amount": "5"}), "409", "idempotency_conflict", "credit_id")
	natsErr(t, e.natsReq(t, api.SubjectAccountCredit, tokAlice, reqBody{"account": "acme", "credit_id": "dep-2", "amount": "5"}), "403", "forbidden", "")

	// account.get
	natsOK(t, e.natsReq(t, api.SubjectAccountGet, tokDave, reqBody{"id": "acme"}), &acct)
	if acct.Available != "100" {
		t.Fatalf("account %+v", acct)
	}
	natsErr(t, e.natsReq(t, api.SubjectAccountGet, tokDave, reqBody{"id": "nobody"}), "404", "not_found", "")

	// request: created, replayed, conflict, 422 for a JSON number, 401, 400.
	id := uuid.NewString()
	var w aggregate.WithdrawalView
	m = e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, withdrawalBody(id, "acme", "12.5"))
	natsOK(t, m, &w)
	if w.ID != id || w.State != aggregate.StateRequested || w.RequestedBy != "alice" || !w.Reserved || m.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("request %+v %v", w, m.Header)
	}
	m = e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, withdrawalBody(id, "acme", "12.50"))
	natsOK(t, m, &w)
	if m.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay header missing: %v", m.Header)
	}
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, withdrawalBody(id, "acme", "13")), "409", "idempotency_conflict", "operation_id")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice,
		`{"operation_id":"`+uuid.NewString()+`","account":"acme","to_address":"`+testAddr+`","amount":12.5}`), "422", "invalid_amount", "amount")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, "", withdrawalBody(uuid.NewString(), "acme", "1")), "401", "unauthenticated", "")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, "wrong-token-xyz", withdrawalBody(uuid.NewString(), "acme", "1")), "401", "unauthenticated", "")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, `{"operation_id":`), "400", "malformed_json", "")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, `{"operation_id":"x","requested_by":"mallory"}`), "400", "malformed_json", "requested_by")
	big := make([]byte, api.MaxBodyBytes+1)
	for i := range big {
		big[i] = ' '
	}
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, string(big)), "413", "too_large", "")

	// get and events.
	natsOK(t, e.natsReq(t, api.SubjectWithdrawalGet, tokBob, reqBody{"id": id}), &w)
	if w.ID != id || w.Amount != "12.5" {
		t.Fatalf("get %+v", w)
	}
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalGet, tokBob, reqBody{"id": uuid.NewString()}), "404", "not_found", "")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalGet, tokBob, reqBody{"ID": id, "x": 1}), "400", "malformed_json", "x")

	// approve: self-approval, then bob.
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalApprove, tokAlice, reqBody{"id": id}), "403", "self_approval", "")
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalApprove, tokDave, reqBody{"id": id}), "403", "forbidden", "")
	natsOK(t, e.natsReq(t, api.SubjectWithdrawalApprove, tokBob, reqBody{"id": id}), &w)
	if w.State != aggregate.StateApproved {
		t.Fatalf("approve %+v", w)
	}
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalApprove, tokCarol, reqBody{"id": id}), "409", "invalid_transition", "")

	var evs struct {
		Events []sagas.EventView `json:"events"`
	}
	natsOK(t, e.natsReq(t, api.SubjectWithdrawalEvents, tokDave, reqBody{"id": id}), &evs)
	if len(evs.Events) < 3 || evs.Events[0].Type != aggregate.EventRequested || evs.Events[len(evs.Events)-1].State != aggregate.StateApproved {
		t.Fatalf("events %+v", evs)
	}

	// cancel: another requester may not; the requester may.
	natsErr(t, e.natsReq(t, api.SubjectWithdrawalCancel, tokDave, reqBody{"id": id}), "403", "forbidden", "")
	natsOK(t, e.natsReq(t, api.SubjectWithdrawalCancel, tokAlice, reqBody{"id": id}), &w)
	if w.State != aggregate.StateRejected || w.Reason == nil || *w.Reason != "cancelled" {
		t.Fatalf("cancel %+v", w)
	}

	// policy.get ({} or empty) and policy.set.
	var p api.PolicyView
	natsOK(t, e.natsReq(t, api.SubjectPolicyGet, tokDave, reqBody{}), &p)
	if p.Name != "four-eyes above 1000" || len(p.Rules) != 2 {
		t.Fatalf("policy %+v", p)
	}
	natsOK(t, e.natsReq(t, api.SubjectPolicyGet, tokDave, nil), &p)
	doc := `{"name":"solo","rules":[{"name":"one","threshold":"0","approvers":1}]}`
	natsErr(t, e.natsReq(t, api.SubjectPolicySet, tokAlice, doc), "403", "forbidden", "")
	natsErr(t, e.natsReq(t, api.SubjectPolicySet, tokOlivia, `{"name":"x","rules":[]}`), "422", "invalid_policy", "rules")
	natsOK(t, e.natsReq(t, api.SubjectPolicySet, tokOlivia, doc), &p)
	if p.Version != 1 || p.Name != "solo" || p.Rules[0].Threshold != "0" {
		t.Fatalf("set policy %+v", p)
	}
	natsOK(t, e.natsReq(t, api.SubjectPolicyGet, tokDave, `{}`), &p)
	if p.Version != 1 || p.Name != "solo" {
		t.Fatalf("policy after set %+v", p)
	}

	// Queues (no read models in this environment: empty, never null).
	for _, subj := range []string{api.SubjectQueueApprovals, api.SubjectQueueReady, api.SubjectQueueInFlight} {
		m := e.natsReq(t, subj, tokBob, nil)
		if string(m.Data) != `{"items":[],"next_cursor":null}` || m.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("%s: %v %s", subj, m.Header, m.Data)
		}
		natsErr(t, e.natsReq(t, subj, "", nil), "401", "unauthenticated", "")
	}

	// Both transports answer the same JSON.
	r := e.do(t, "GET", "/v1/policy", tokDave, nil)
	m = e.natsReq(t, api.SubjectPolicyGet, tokDave, nil)
	if string(r.body) != string(m.Data)+"\n" {
		t.Fatalf("HTTP %s vs NATS %s", r.body, m.Data)
	}
}

// TestServiceConcurrentRequests: commands on one subject are handled
// concurrently and all answered; identical ones still create one
// withdrawal.
func TestServiceConcurrentRequests(t *testing.T) {
	e := newEnv(t)
	natsOK(t, e.natsReq(t, api.SubjectAccountCredit, tokOlivia, reqBody{"account": "acme", "credit_id": "d", "amount": "1000"}), &aggregate.AccountView{})
	id := uuid.NewString()
	const n = 32
	var wg sync.WaitGroup
	replayed := make([]bool, n)
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			m := e.natsReq(t, api.SubjectWithdrawalRequest, tokAlice, withdrawalBody(id, "acme", "1"))
			if c := m.Header.Get(micro.ErrorCodeHeader); c != "" {
				errs <- c + " " + string(m.Data)
				return
			}
			replayed[i] = m.Header.Get("Idempotent-Replayed") == "true"
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	fresh := 0
	for _, r := range replayed {
		if !r {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d non-replayed answers", fresh)
	}
	if c := countType(eventsOf(t, e, id), aggregate.EventRequested); c != 1 {
		t.Fatalf("%d requested events", c)
	}
}
