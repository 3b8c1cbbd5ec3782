package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
)

// Quarantined events keep /healthz at 200 with status "degraded" and the
// integrity_violation code naming them: weir serves correctly, and the
// append-only log keeps a forgery forever, so a 503 would let a load
// balancer turn a contained forgery into an outage. Anything else that is
// down is still a 503.
func TestHealthzIsDegradedNotDownWhileEventsAreQuarantined(t *testing.T) {
	e := newEnv(t)
	violation := fmt.Errorf("%w", &aggregate.Error{Code: sagas.CodeIntegrityViolation, Message: "1 event(s) … stream seq 7 (weir.evt.account.mallory, \"account.credited\")"})
	e.health.set(violation)
	r := e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusOK)
	var body struct {
		Status string `json:"status"`
		Error  struct{ Code, Message string }
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Status != "degraded" || body.Error.Code != sagas.CodeIntegrityViolation || !strings.Contains(body.Error.Message, "stream seq 7") {
		t.Fatalf("healthz body %s, want degraded naming seq 7", r.body)
	}
	e.health.set(fmt.Errorf("store down"))
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), http.StatusServiceUnavailable)
}
