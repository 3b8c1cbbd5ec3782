package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
)

// A policy change and a large credit each need a second operator; the CLI
// says what waits and how to approve it, and the approvals take effect.
func TestPolicyAndCreditApprovalsFromTheCLI(t *testing.T) {
	s := newStack(t, true)
	s.intake.SetPolicyQuorum(2)
	s.intake.SetCreditReviewAbove(aggregate.MustParseAmount(aggregate.USDT, "100"))

	file := filepath.Join(t.TempDir(), "solo.json")
	if err := os.WriteFile(file, []byte(`{"name":"solo","rules":[{"name":"one","threshold":"0","approvers":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := s.weir(t, "policy", "set", "--file", file, "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy set", out, "policy version 1 proposed by olivia: 1 of 2 approvals", "not yet in force", "weir policy approve 1")
	code, out, errOut = s.weir(t, "policy", "show", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy show", out, `"four-eyes above 1000" version 0`, "policy version 1 proposed by olivia")
	code, out, errOut = s.weir(t, "policy", "approve", "1", "--token", tokOlivia)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "self approval", errOut, "weir policy approve: self_approval: ")
	code, out, errOut = s.weir(t, "policy", "approve", "1", "--token", tokOscar)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy approve", out, "policy version 1 in force", `"solo" version 1`)
	code, out, errOut = s.weir(t, "policy", "approve", "one", "--token", tokOscar)
	wantCode(t, code, 2, out, errOut)

	code, out, errOut = s.weir(t, "credit", "--account", "acme", "--credit-id", "big", "--amount", "500", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "credit above review", out, "credit big of 500 by olivia waits for a second operator", "weir credit approve --account acme --credit-id big", "available  0")
	code, out, errOut = s.weir(t, "credit", "approve", "--account", "acme", "--credit-id", "big", "--token", tokOlivia)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "self approval", errOut, "weir credit approve: self_approval: ")
	code, out, errOut = s.weir(t, "credit", "approve", "--account", "acme", "--credit-id", "big", "--token", tokOscar)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "credit approve", out, "available  500")
}

func TestPolicyQuorumDefaultsToTwoOutsideDevMode(t *testing.T) {
	for _, tc := range []struct {
		flag int
		dev  bool
		want int
	}{{0, false, 2}, {0, true, 1}, {3, false, 3}, {1, false, 1}, {2, true, 2}} {
		if got, err := policyQuorum(tc.flag, tc.dev); err != nil || got != tc.want {
			t.Errorf("policyQuorum(%d, dev=%v) = %d, %v; want %d", tc.flag, tc.dev, got, err, tc.want)
		}
	}
	if _, err := policyQuorum(-1, false); err == nil {
		t.Error("a negative quorum was accepted")
	}
}
