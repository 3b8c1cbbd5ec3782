package main

import (
	"path/filepath"
	"testing"

	"github.com/google/uuid"
)

// The sample policy's destination and velocity rules, set and shown from
// the CLI; a request the rules refuse exits 1 with destination_not_allowed,
// and one they raise shows the rule applied and the 24 h sum.
func TestPolicyCommandsShowDestinationAndVelocityRules(t *testing.T) {
	s := newStack(t, true)
	t.Setenv("WEIR_TOKEN", tokOlivia)
	sample := filepath.Join("..", "..", "testdata", "samples", "policy.json")
	code, out, errOut := s.weir(t, "policy", "set", "--file", sample)
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "policy", "show")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy show", out, "DESTINATION RULE", "payroll-payees", "payroll-*", "refuse", "new-payees", "+1 approvers",
		"VELOCITY TIER (24 h)", "busy-day", "50000")

	code, out, errOut = s.weir(t, "request", "--id", uuid.NewString(), "--account", "payroll-eu", "--to", "TJRabPrwbZy45sbavfcjinPJC18kjpRTv8", "--amount", "10", "--token", tokAlice)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "refused request", errOut, "weir request: destination_not_allowed: ", "payroll-payees")

	code, out, errOut = s.weir(t, "credit", "--account", "acme", "--credit-id", "dep-1", "--amount", "100", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "request", "--id", uuid.NewString(), "--account", "acme", "--to", "TJRabPrwbZy45sbavfcjinPJC18kjpRTv8", "--amount", "10", "--token", tokAlice)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "raised request", out, "2 required", `destination "new-payees" +1`, "24 h sum", "0 sent before the request")
}
