package main

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
)

// An approver declines from the CLI with a reason; a request whose
// withdrawal ends rejected prints it and exits 3 (human and --json).
func TestDeclineFromTheCLIAndRejectedRequestsExitThree(t *testing.T) {
	s := newStack(t, true)
	code, out, errOut := s.weir(t, "credit", "--account", "acme", "--credit-id", "seed", "--amount", "100", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)

	id := uuid.NewString()
	code, out, errOut = s.weir(t, "request", "--id", id, "--account", "acme", "--to", cliTestAddr, "--amount", "30", "--token", tokAlice)
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "decline", id, "--token", tokBob)
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "decline without reason", errOut, "--reason required")
	code, out, errOut = s.weir(t, "decline", id, "--reason", "not on file", "--token", tokOlivia)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "decline by an operator", errOut, "weir decline: forbidden: ")
	code, out, errOut = s.weir(t, "decline", id, "--reason", "destination not on file", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "decline", out, "rejected (terminal)", "declined", "resolved by   bob", "destination not on file")
	// The audit replays the decline through the same rules and finds the
	// reservation released: nothing to report.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "")
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "audit", id, "--tron-node", "")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit of the declined withdrawal", out, "withdrawal.rejected")

	// Insufficient funds: the request is printed, then exit 3.
	big := uuid.NewString()
	code, out, errOut = s.weir(t, "request", "--id", big, "--account", "acme", "--to", cliTestAddr, "--amount", "5000", "--token", tokAlice)
	wantCode(t, code, ExitRejected, out, errOut)
	wantContains(t, "rejected request", out, big, "insufficient_funds")
	wantContains(t, "rejected request", errOut, "is rejected (insufficient_funds)")
	code, out, errOut = s.weir(t, "request", "--id", big, "--account", "acme", "--to", cliTestAddr, "--amount", "5000", "--token", tokAlice, "--json")
	wantCode(t, code, ExitRejected, out, errOut)
	var w struct{ State string }
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.State != "rejected" {
		t.Fatalf("--json output %q: %v", out, err)
	}
}

func TestVersionAndDashDashVersionPrintTheBuild(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runWeir(t, args...)
		wantCode(t, code, 0, out, errOut)
		wantContains(t, args[0], out, "weir ", "go1.")
	}
	code, out, errOut := runWeir(t, "version", "extra")
	wantCode(t, code, 2, out, errOut)
}
