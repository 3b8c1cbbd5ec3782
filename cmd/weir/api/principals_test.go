package api

import "testing"

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
