package api_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
)

func TestDeclineByAnApproverRejectsRecordsWhoAndWhyAndReleases(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(id, "acme", "30")), http.StatusCreated)

	// A requester without the approver role, and an operator, may not decline.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/decline", tokDave, map[string]string{"reason": "x"}), http.StatusForbidden, "forbidden", "")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/decline", tokOscar, map[string]string{"reason": "x"}), http.StatusForbidden, "forbidden", "")
	// A reason is required.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/decline", tokBob, map[string]string{"reason": ""}), http.StatusUnprocessableEntity, "invalid_command", "reason")

	r := e.do(t, "POST", "/v1/withdrawals/"+id+"/decline", tokBob, map[string]string{"reason": "destination not on file"})
	wantStatus(t, r, http.StatusOK)
	w := r.withdrawal(t)
	if w.State != aggregate.StateRejected || w.Reason == nil || *w.Reason != "declined" ||
		w.ResolvedBy == nil || *w.ResolvedBy != "bob" || w.Detail == nil || *w.Detail != "destination not on file" {
		t.Fatalf("declined %+v", w)
	}
	if a := account(t, e, "acme"); a.Available != "100" || a.Reserved != "0" {
		t.Fatalf("reservation not released: %+v", a)
	}
	// Declining again, or once it is no longer awaiting approval: 409.
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id+"/decline", tokCarol, map[string]string{"reason": "late"}), http.StatusConflict, "invalid_transition", "")
	id2 := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(id2, "acme", "5")), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals/"+id2+"/approve", tokBob, nil), http.StatusOK)
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+id2+"/decline", tokCarol, map[string]string{"reason": "late"}), http.StatusConflict, "invalid_transition", "")
	wantErr(t, e.do(t, "POST", "/v1/withdrawals/"+uuid.NewString()+"/decline", tokCarol, map[string]string{"reason": "x"}), http.StatusNotFound, "not_found", "")
}

func TestDeclineOverNATSMatchesHTTP(t *testing.T) {
	e := newEnv(t)
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokDave, withdrawalBody(id, "acme", "30")), http.StatusCreated)
	natsErr(t, e.natsReq(t, "weir.cmd.withdrawal.decline", tokDave, map[string]string{"id": id, "reason": "x"}), "403", "forbidden", "")
	natsErr(t, e.natsReq(t, "weir.cmd.withdrawal.decline", tokBob, map[string]string{"id": id, "reason": "x", "by": "carol"}), "400", "malformed_json", "by")
	var w aggregate.WithdrawalView
	natsOK(t, e.natsReq(t, "weir.cmd.withdrawal.decline", tokBob, map[string]string{"id": id, "reason": "risk"}), &w)
	if w.State != aggregate.StateRejected || *w.Reason != "declined" || *w.ResolvedBy != "bob" || *w.Detail != "risk" {
		t.Fatalf("declined over NATS %+v", w)
	}
	natsErr(t, e.natsReq(t, "weir.cmd.withdrawal.decline", tokCarol, map[string]string{"id": id, "reason": "again"}), "409", "invalid_transition", "")
}
