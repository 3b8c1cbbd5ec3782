package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/weir-payouts/weir/aggregate"
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
// In the principals file a principal gives either its token (plaintext,
// still accepted) or, better, TokenSHA256: the hex SHA-256 of the token,
// so the file holds nothing a reader could log in with.
type Principal struct {
	Name        string `json:"name"`
	Token       string `json:"token,omitempty"`
	TokenSHA256 string `json:"token_sha256,omitempty"`
	Roles       []Role `json:"roles"`
	// Accounts scopes the principal: it acts and reads only on accounts
	// matching one of these names or globs ("acme", "ops-*"). Empty: every
	// account (the behaviour before scoping existed).
	Accounts []string `json:"accounts,omitempty"`
}

// MayAct reports whether p may act on and read account.
// The rule is the one the audit judges the log by
// (aggregate.ConfigPrincipal.MayAct).
func (p Principal) MayAct(account string) bool {
	return aggregate.ConfigPrincipal{Accounts: p.Accounts}.MayAct(account)
}

// Scoped reports whether p is limited to some accounts.
func (p Principal) Scoped() bool { return len(p.Accounts) > 0 }

// MinTokenLength is the shortest plaintext token accepted.
const MinTokenLength = 8

// HashToken is the SHA-256 of a token, as token_sha256 stores it (hex).
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
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

// Principals resolves bearer tokens to principals. It keeps only the
// tokens' hashes for the lookup: a token is hashed and the hash compared
// in constant time, so neither the map nor the comparison times the
// secret itself.
type Principals struct {
	byHash    map[[sha256.Size]byte]int // → index in list
	list      []Principal
	plaintext []string // names whose file entry has a plaintext token
}

// NewPrincipals validates a principal list: names non-empty and unique,
// exactly one of token (at least MinTokenLength characters) or
// token_sha256 (64 hex digits), tokens unique, roles known.
func NewPrincipals(list []Principal) (*Principals, error) {
	ps := &Principals{byHash: map[[sha256.Size]byte]int{}}
	names := map[string]bool{}
	for i, p := range list {
		switch {
		case strings.TrimSpace(p.Name) == "":
			return nil, fmt.Errorf("principal %d: name is empty", i)
		case names[p.Name]:
			return nil, fmt.Errorf("principal %q: duplicate name", p.Name)
		case p.Token != "" && p.TokenSHA256 != "":
			return nil, fmt.Errorf("principal %q: give token or token_sha256, not both", p.Name)
		case p.Token == "" && p.TokenSHA256 == "":
			return nil, fmt.Errorf("principal %q: no token or token_sha256", p.Name)
		case p.Token != "" && len(p.Token) < MinTokenLength:
			return nil, fmt.Errorf("principal %q: token must be at least %d characters", p.Name, MinTokenLength)
		case len(p.Roles) == 0:
			return nil, fmt.Errorf("principal %q: no roles", p.Name)
		}
		var h [sha256.Size]byte
		if p.Token != "" {
			h = sha256.Sum256([]byte(p.Token))
			ps.plaintext = append(ps.plaintext, p.Name)
		} else if b, err := hex.DecodeString(p.TokenSHA256); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("principal %q: token_sha256 must be 64 hex digits", p.Name)
		} else {
			copy(h[:], b)
		}
		if j, dup := ps.byHash[h]; dup {
			return nil, fmt.Errorf("principal %q: token shared with %q", p.Name, ps.list[j].Name)
		}
		for _, pat := range p.Accounts {
			if _, err := path.Match(pat, ""); err != nil || strings.TrimSpace(pat) == "" || strings.Contains(pat, "/") {
				return nil, fmt.Errorf("principal %q: accounts entry %q is not an account name or glob", p.Name, pat)
			}
		}
		for _, r := range p.Roles {
			if r != RoleRequester && r != RoleApprover && r != RoleOperator && r != RoleAuditor {
				return nil, fmt.Errorf("principal %q: unknown role %q (want requester, approver, operator or auditor)", p.Name, r)
			}
		}
		names[p.Name] = true
		ps.byHash[h] = len(ps.list)
		ps.list = append(ps.list, p)
	}
	if len(ps.list) == 0 {
		return nil, errors.New("no principals")
	}
	return ps, nil
}

// Plaintext names the principals whose token the file holds in plaintext
// (serve warns about them outside dev mode).
func (ps *Principals) Plaintext() []string { return slices.Clone(ps.plaintext) }

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
	// A "roles" given twice, or a "Roles" beside "roles", would grant what
	// a reader of the file does not see.
	if err := checkKeys(b, jsonNames(reflect.TypeFor[[]Principal]())); err != nil {
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
	if token == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(token))
	i, ok := ps.byHash[h]
	if !ok {
		return Principal{}, false
	}
	p := ps.list[i]
	want := sha256.Sum256([]byte(p.Token))
	if p.Token == "" {
		b, _ := hex.DecodeString(p.TokenSHA256)
		copy(want[:], b)
	}
	if subtle.ConstantTimeCompare(h[:], want[:]) != 1 {
		return Principal{}, false
	}
	return p, true
}
