package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
)

// TestStatusTableCoversContract: every code of CONTRACT.md maps to its
// status.
func TestStatusTableCoversContract(t *testing.T) {
	want := map[string]int{
		"idempotency_conflict": 409, "invalid_transition": 409, "not_cancellable": 409, "approvals_insufficient": 409,
		"invalid_operation_id": 422, "invalid_amount": 422, "invalid_address": 422, "unsupported_asset": 422,
		"invalid_account": 422, "invalid_policy": 422, "invalid_command": 422,
		"malformed_json": 400, "too_large": 413, "unsupported_media_type": 415,
		"unauthenticated": 401, "forbidden": 403, "self_approval": 403, "not_found": 404,
		"unavailable": 503, "internal": 500,
	}
	for code, st := range want {
		if got := StatusOf(code); got != st {
			t.Errorf("%s → %d, want %d", code, got, st)
		}
	}
	if StatusOf(sagas.ErrNotFound.Code) != 404 || StatusOf(sagas.ErrForbidden.Code) != 403 {
		t.Error("sagas errors unmapped")
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err      error
		status   int
		code     string
		internal bool
	}{
		{&aggregate.Error{Code: "invalid_amount", Field: "amount", Message: "m"}, 422, "invalid_amount", false},
		{fmt.Errorf("wrapped: %w", &aggregate.Error{Code: "not_cancellable"}), 409, "not_cancellable", false},
		{fmt.Errorf("w: %w", &sagas.UnavailableError{Message: "retry", Err: sagas.ErrTooMuchContention}), 503, "unavailable", true},
		{&sagas.UnavailableError{Message: "retry the same request", Err: errors.New("timeout")}, 503, "unavailable", true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), 503, "unavailable", true},
		{errors.New("secret database password in text"), 500, "internal", true},
		{&aggregate.Error{Code: "invalid_event", Message: "stored junk"}, 500, "internal", true},
		{&aggregate.Error{Code: "some_new_code", Message: "m"}, 500, "internal", true},
	}
	for _, c := range cases {
		st, body, internal := classify(c.err)
		if st != c.status || body.Error.Code != c.code || internal != c.internal {
			t.Errorf("%v → %d %+v %v", c.err, st, body, internal)
		}
		if st >= 500 && (body.Error.Message == "" || body.Error.Message == c.err.Error()) {
			t.Errorf("%v: 5xx message %q", c.err, body.Error.Message)
		}
	}
	if st, _, _ := classify(sagas.ErrNotFound); st != http.StatusNotFound {
		t.Error("not found")
	}
}
