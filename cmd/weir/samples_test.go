package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
)

// The sample files the README points to load as serve loads them, and
// their documented tokens log in with the roles described.
func TestSampleConfigurationFilesLoad(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "samples")
	ps, err := api.LoadPrincipals(filepath.Join(dir, "principals.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]api.Role{"alice": api.RoleRequester, "bob": api.RoleApprover, "carol": api.RoleApprover,
		"olivia": api.RoleOperator, "oscar": api.RoleOperator, "audrey": api.RoleAuditor} {
		p, ok := ps.ByToken("sample-" + name + "-token")
		if !ok || p.Name != name || !p.Has(role) {
			t.Errorf("sample token of %s: %+v %v", name, p, ok)
		}
	}
	if len(ps.Plaintext()) != 0 {
		t.Errorf("the sample principals hold plaintext tokens: %v", ps.Plaintext())
	}
	b, err := os.ReadFile(filepath.Join(dir, "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := aggregate.ParsePolicyJSON(b)
	if err == nil {
		err = sagas.CheckPolicy(p)
	}
	if err != nil || len(p.Rules) != 3 || len(p.Destinations) != 2 || len(p.Velocity) != 1 {
		t.Fatalf("sample policy: %+v %v", p, err)
	}
	c, err := loadCustody(filepath.Join(dir, "custody.json"))
	if err != nil || len(c) != 1 {
		t.Fatalf("sample custody: %v %v", c, err)
	}
}
