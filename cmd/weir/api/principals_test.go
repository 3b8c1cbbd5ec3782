package api

import (
	"slices"
	"strings"
	"testing"
)

func TestAuthenticateBearerSchemeIsCaseInsensitive(t *testing.T) {
	ps := DevPrincipals()
	for _, h := range []string{"Bearer dev-bob-token", "bearer dev-bob-token", "BEARER  dev-bob-token", " Bearer dev-bob-token "} {
		if p, ok := ps.Authenticate(h); !ok || p.Name != "bob" {
			t.Errorf("%q: got %v %v, want bob", h, p, ok)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic dev-bob-token", "dev-bob-token", "Bearer dev-bob-tokenX", "Bearerdev-bob-token"} {
		if p, ok := ps.Authenticate(h); ok {
			t.Errorf("%q: authenticated as %v", h, p)
		}
	}
}

// TestPrincipalsFileTokensHashedOrLongEnough: a token_sha256 entry logs in
// with its token; a plaintext token shorter than 8 characters, both forms
// at once, neither, or a malformed hash are refused; two entries with one
// token (one hashed, one plain) are refused.
func TestPrincipalsFileTokensHashedOrLongEnough(t *testing.T) {
	ok := []Principal{
		{Name: "dana", TokenSHA256: HashToken("dana-secret-token"), Roles: []Role{RoleApprover}},
		{Name: "erin", Token: "erin-plain-token", Roles: []Role{RoleAuditor}},
	}
	ps, err := NewPrincipals(ok)
	if err != nil {
		t.Fatal(err)
	}
	if p, found := ps.ByToken("dana-secret-token"); !found || p.Name != "dana" {
		t.Fatalf("hashed token: %v %v", p, found)
	}
	if p, found := ps.Authenticate("Bearer erin-plain-token"); !found || p.Name != "erin" {
		t.Fatalf("plain token: %v %v", p, found)
	}
	for _, tok := range []string{"", HashToken("dana-secret-token"), "dana-secret-tokenX"} {
		if p, found := ps.ByToken(tok); found {
			t.Errorf("%q logged in as %v", tok, p)
		}
	}
	if got := ps.Plaintext(); len(got) != 1 || got[0] != "erin" {
		t.Errorf("Plaintext() = %v, want [erin]", got)
	}
	for name, bad := range map[string]Principal{
		"7 characters": {Name: "x", Token: "1234567", Roles: []Role{RoleApprover}},
		"both":         {Name: "x", Token: "long-enough-token", TokenSHA256: HashToken("long-enough-token"), Roles: []Role{RoleApprover}},
		"neither":      {Name: "x", Roles: []Role{RoleApprover}},
		"not hex":      {Name: "x", TokenSHA256: strings.Repeat("z", 64), Roles: []Role{RoleApprover}},
		"short hash":   {Name: "x", TokenSHA256: "abcd", Roles: []Role{RoleApprover}},
		"shared token": {Name: "x", Token: "dana-secret-token", Roles: []Role{RoleApprover}},
		"unknown role": {Name: "x", Token: "long-enough-token", Roles: []Role{"root"}},
	} {
		if _, err := NewPrincipals(append(slices.Clone(ok), bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
