package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Role is what a principal may do. Reads need any authenticated principal.
type Role string

const (
	RoleRequester Role = "requester"
	RoleApprover  Role = "approver"
	RoleOperator  Role = "operator"
	// RoleAuditor may read the event log itself over NATS (what `weir
	// audit` needs) and nothing more; operator implies it.
	RoleAuditor Role = "auditor"
)

// Principal is an authenticated caller: its name is the identity recorded
// in events (requested_by, approvals[].by), never a field of a request body.
type Principal struct {
	Name  string `json:"name"`
	Token string `json:"token"`
	Roles []Role `json:"roles"`
}

// Has reports whether p holds role r. An operator is also an auditor.
func (p Principal) Has(r Role) bool {
	if r == RoleAuditor && slices.Contains(p.Roles, RoleOperator) {
		return true
	}
	return slices.Contains(p.Roles, r)
}

// String never shows the token.
func (p Principal) String() string { return p.Name }

// Principals resolves bearer tokens to principals.
type Principals struct {
	byToken map[string]Principal
	list    []Principal
}

// NewPrincipals validates a principal list: names and tokens non-empty and
// unique, roles known.
func NewPrincipals(list []Principal) (*Principals, error) {
	ps := &Principals{byToken: map[string]Principal{}}
	names := map[string]bool{}
	for i, p := range list {
		switch {
		case strings.TrimSpace(p.Name) == "":
			return nil, fmt.Errorf("principal %d: name is empty", i)
		case names[p.Name]:
			return nil, fmt.Errorf("principal %q: duplicate name", p.Name)
		case len(p.Token) < 8:
			return nil, fmt.Errorf("principal %q: token must be at least 8 characters", p.Name)
		case ps.byToken[p.Token].Name != "":
			return nil, fmt.Errorf("principal %q: token shared with %q", p.Name, ps.byToken[p.Token].Name)
		case len(p.Roles) == 0:
			return nil, fmt.Errorf("principal %q: no roles", p.Name)
		}
		for _, r := range p.Roles {
			if r != RoleRequester && r != RoleApprover && r != RoleOperator && r != RoleAuditor {
				return nil, fmt.Errorf("principal %q: unknown role %q (want requester, approver, operator or auditor)", p.Name, r)
			}
		}
		names[p.Name] = true
		ps.byToken[p.Token] = p
		ps.list = append(ps.list, p)
	}
	if len(ps.list) == 0 {
		return nil, errors.New("no principals")
	}
	return ps, nil
}

// LoadPrincipals reads the JSON file given to --principals.
func LoadPrincipals(path string) (*Principals, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	var list []Principal
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("principals %s: %w", path, err)
	}
	ps, err := NewPrincipals(list)
	if err != nil {
		return nil, fmt.Errorf("principals %s: %w", path, err)
	}
	return ps, nil
}

// DevPrincipals are the well-known principals `weir serve` uses when no
// --principals file is given, so a newcomer can try the API at once. Their
// tokens are public: never use them outside a developer machine.
func DevPrincipals() *Principals {
	ps, err := NewPrincipals([]Principal{
		{Name: "alice", Token: "dev-alice-token", Roles: []Role{RoleRequester, RoleApprover}},
		{Name: "bob", Token: "dev-bob-token", Roles: []Role{RoleApprover}},
		{Name: "carol", Token: "dev-carol-token", Roles: []Role{RoleApprover}},
		{Name: "olivia", Token: "dev-olivia-token", Roles: []Role{RoleOperator, RoleRequester}},
	})
	if err != nil {
		panic(err) // the literal above is valid
	}
	return ps
}

// All lists the principals in file order.
func (ps *Principals) All() []Principal { return slices.Clone(ps.list) }

// Authenticate resolves an Authorization header value ("Bearer <token>").
func (ps *Principals) Authenticate(header string) (Principal, bool) {
	// The scheme name is case-insensitive (RFC 7235 §2.1).
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, false
	}
	return ps.ByToken(strings.TrimSpace(token))
}

// ByToken resolves a bare token (the NATS connect's auth_token or
// password).
func (ps *Principals) ByToken(token string) (Principal, bool) {
	p, ok := ps.byToken[token]
	return p, ok
}
