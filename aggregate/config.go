package aggregate

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// The configuration stream: what was in force — principals and their roles,
// the hot wallet(s), the custody map and the limits — as versioned
// snapshots in the log (issue 17 item 1), so that every process on one log
// routes, limits and re-checks the same way, and the audit judges each
// event against what was in force at its position in the log instead of
// against what the event says about itself.
//
// Tokens and token hashes are never part of it: the log says who may do
// what, never how they log in.

// ConfigChangedType is the one event type of the configuration stream.
const ConfigChangedType = "config.changed"

// Roles the configuration names (the transports own their meaning; these
// are the names the audit checks against). An operator is also an auditor.
const (
	RoleRequester = "requester"
	RoleApprover  = "approver"
	RoleOperator  = "operator"
	RoleAuditor   = "auditor"
)

// SystemActor is the name weir itself records for what a `weir serve`
// process does on its own at start: the --policy file, the dev funding
// credit, a configuration it publishes.
const SystemActor = "weir-serve"

// ConfigPrincipal is one principal as the log knows it: a name, its roles
// and the accounts it is scoped to (empty: every account). Never a token.
type ConfigPrincipal struct {
	Name     string   `json:"name"`
	Roles    []string `json:"roles"`
	Accounts []string `json:"accounts,omitempty"`
}

// Has reports whether p holds role r (an operator is also an auditor).
func (p ConfigPrincipal) Has(r string) bool {
	if r == RoleAuditor && slices.Contains(p.Roles, RoleOperator) {
		return true
	}
	return slices.Contains(p.Roles, r)
}

// MayAct reports whether p may act on account (its scope, as globs).
func (p ConfigPrincipal) MayAct(account string) bool {
	if len(p.Accounts) == 0 {
		return true
	}
	for _, pat := range p.Accounts {
		if ok, _ := path.Match(pat, account); ok {
			return true
		}
	}
	return false
}

// CustodyEntry is a destination we custody and the account it credits.
type CustodyEntry struct {
	Address string `json:"address"`
	Account string `json:"account"`
}

// Config is one snapshot of the configuration in force. Addresses are
// base58 (validated by the caller, which knows the rail); a zero
// DailyLimit or CreditReviewAbove means none.
type Config struct {
	Principals        []ConfigPrincipal `json:"principals"`
	HotWallets        []string          `json:"hot_wallets"`
	Custody           []CustodyEntry    `json:"custody"`
	DailyLimit        Amount            `json:"daily_limit"`
	CreditReviewAbove Amount            `json:"credit_review_above"`
	PolicyQuorum      int               `json:"policy_quorum"`
	// ChainGenesis is the id of block 0 of the chain weir pays on (64 hex
	// digits, lower case), read from the node when `weir serve` starts.
	// A start against a node of another chain is refused, and the audit
	// checks its node against it. Empty: unknown (a configuration recorded
	// before weir recorded it, or published by a process that did not
	// read it).
	ChainGenesis string `json:"chain_genesis,omitempty"`
}

// Normalized returns c in canonical order (principals by name, their roles
// and accounts sorted, wallets and custody sorted), so that two snapshots
// saying the same compare equal.
func (c Config) Normalized() Config {
	out := Config{DailyLimit: c.DailyLimit, CreditReviewAbove: c.CreditReviewAbove, PolicyQuorum: c.PolicyQuorum, ChainGenesis: strings.ToLower(c.ChainGenesis)}
	for _, p := range c.Principals {
		q := ConfigPrincipal{Name: p.Name, Roles: slices.Clone(p.Roles), Accounts: slices.Clone(p.Accounts)}
		slices.Sort(q.Roles)
		slices.Sort(q.Accounts)
		if len(q.Accounts) == 0 {
			q.Accounts = nil
		}
		out.Principals = append(out.Principals, q)
	}
	slices.SortFunc(out.Principals, func(a, b ConfigPrincipal) int { return cmp.Compare(a.Name, b.Name) })
	out.HotWallets = slices.Clone(c.HotWallets)
	slices.Sort(out.HotWallets)
	out.Custody = slices.Clone(c.Custody)
	slices.SortFunc(out.Custody, func(a, b CustodyEntry) int { return cmp.Compare(a.Address, b.Address) })
	if out.Principals == nil {
		out.Principals = []ConfigPrincipal{}
	}
	if out.HotWallets == nil {
		out.HotWallets = []string{}
	}
	if out.Custody == nil {
		out.Custody = []CustodyEntry{}
	}
	return out
}

// Same reports whether c and o say the same (amounts compared by value).
func (c Config) Same(o Config) bool { return len(c.Diff(o)) == 0 }

// Diff lists, for a person, what o changes from c ("custody TX…: treasury
// → ops", "daily_limit: 0 → 1000"); empty when they say the same.
func (c Config) Diff(o Config) []string {
	a, b := c.Normalized(), o.Normalized()
	var out []string
	pa, pb := map[string]ConfigPrincipal{}, map[string]ConfigPrincipal{}
	for _, p := range a.Principals {
		pa[p.Name] = p
	}
	for _, p := range b.Principals {
		pb[p.Name] = p
	}
	for _, p := range a.Principals {
		q, ok := pb[p.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("principal %s: removed", p.Name))
		case !slices.Equal(p.Roles, q.Roles) || !slices.Equal(p.Accounts, q.Accounts):
			out = append(out, fmt.Sprintf("principal %s: roles %v accounts %v → roles %v accounts %v", p.Name, p.Roles, p.Accounts, q.Roles, q.Accounts))
		}
	}
	for _, q := range b.Principals {
		if _, ok := pa[q.Name]; !ok {
			out = append(out, fmt.Sprintf("principal %s: added with roles %v", q.Name, q.Roles))
		}
	}
	if !slices.Equal(a.HotWallets, b.HotWallets) {
		out = append(out, fmt.Sprintf("hot wallets: %v → %v", a.HotWallets, b.HotWallets))
	}
	ca, cb := map[string]string{}, map[string]string{}
	for _, e := range a.Custody {
		ca[e.Address] = e.Account
	}
	for _, e := range b.Custody {
		cb[e.Address] = e.Account
	}
	for _, e := range a.Custody {
		switch acc, ok := cb[e.Address]; {
		case !ok:
			out = append(out, fmt.Sprintf("custody %s: %s → not custodied", e.Address, e.Account))
		case acc != e.Account:
			out = append(out, fmt.Sprintf("custody %s: %s → %s", e.Address, e.Account, acc))
		}
	}
	for _, e := range b.Custody {
		if _, ok := ca[e.Address]; !ok {
			out = append(out, fmt.Sprintf("custody %s: not custodied → %s", e.Address, e.Account))
		}
	}
	if !a.DailyLimit.Equal(b.DailyLimit) {
		out = append(out, fmt.Sprintf("daily_limit: %s → %s", a.DailyLimit, b.DailyLimit))
	}
	if !a.CreditReviewAbove.Equal(b.CreditReviewAbove) {
		out = append(out, fmt.Sprintf("credit_review_above: %s → %s", a.CreditReviewAbove, b.CreditReviewAbove))
	}
	if a.PolicyQuorum != b.PolicyQuorum {
		out = append(out, fmt.Sprintf("policy_quorum: %d → %d", a.PolicyQuorum, b.PolicyQuorum))
	}
	if a.ChainGenesis != b.ChainGenesis {
		out = append(out, fmt.Sprintf("chain_genesis: %s → %s", cmp.Or(a.ChainGenesis, "unknown"), cmp.Or(b.ChainGenesis, "unknown")))
	}
	return out
}

// Validate checks what the domain can: principal names present and
// unique, roles known, custody accounts valid and addresses unique, limits
// not negative, a quorum of at least 1.
func (c Config) Validate() error {
	names := map[string]bool{}
	for i, p := range c.Principals {
		if strings.TrimSpace(p.Name) == "" {
			return newError(CodeInvalidCommand, "principals", "principal %d: name is empty", i)
		}
		if names[p.Name] {
			return newError(CodeInvalidCommand, "principals", "principal %q: duplicate name", p.Name)
		}
		names[p.Name] = true
		for _, r := range p.Roles {
			if r != RoleRequester && r != RoleApprover && r != RoleOperator && r != RoleAuditor {
				return newError(CodeInvalidCommand, "principals", "principal %q: unknown role %q", p.Name, r)
			}
		}
	}
	seen := map[string]bool{}
	for i, e := range c.Custody {
		if e.Address == "" || seen[e.Address] {
			return newError(CodeInvalidCommand, "custody", "custody entry %d: address empty or repeated", i)
		}
		seen[e.Address] = true
		if err := ValidateAccountID(e.Account); err != nil {
			return newError(CodeInvalidCommand, "custody", "custody entry %d: %v", i, err)
		}
	}
	for _, w := range c.HotWallets {
		if strings.TrimSpace(w) == "" {
			return newError(CodeInvalidCommand, "hot_wallets", "an empty hot-wallet address")
		}
	}
	if c.DailyLimit.Sign() < 0 || c.CreditReviewAbove.Sign() < 0 {
		return newError(CodeInvalidCommand, "daily_limit", "limits cannot be negative")
	}
	if c.PolicyQuorum < 1 {
		return newError(CodeInvalidCommand, "policy_quorum", "at least 1")
	}
	if c.ChainGenesis != "" {
		if b, err := hex.DecodeString(c.ChainGenesis); err != nil || len(b) != 32 {
			return newError(CodeInvalidCommand, "chain_genesis", "%q is not a block id (64 hex digits)", c.ChainGenesis)
		}
	}
	return nil
}

// Principal finds a principal by name.
func (c Config) Principal(name string) (ConfigPrincipal, bool) {
	for _, p := range c.Principals {
		if p.Name == name {
			return p, true
		}
	}
	return ConfigPrincipal{}, false
}

// CustodyAccount is the account a custodied destination credits.
func (c Config) CustodyAccount(address string) (string, bool) {
	for _, e := range c.Custody {
		if e.Address == address {
			return e.Account, true
		}
	}
	return "", false
}

// IsHotWallet reports whether address is one of the hot wallets in force.
func (c Config) IsHotWallet(address string) bool { return slices.Contains(c.HotWallets, address) }

// ConfigChanged records a new version of the configuration in force: the
// full snapshot, who published it and when.
type ConfigChanged struct {
	Version int    `json:"version"`
	Config  Config `json:"config"`
	By      string `json:"by"`
	// Process names the weir process that published it (host, pid,
	// listeners), so a change made at runtime says where it came from.
	Process string    `json:"process,omitempty"`
	At      time.Time `json:"at"`
}

// EventType names the event.
func (ConfigChanged) EventType() string { return ConfigChangedType }

// ConfigState is the fold of the configuration stream; Version 0 means no
// configuration was ever published (a log older than the stream).
type ConfigState struct {
	Config    Config    `json:"config"`
	Version   int       `json:"version"`
	ChangedBy string    `json:"changed_by"`
	ChangedAt time.Time `json:"changed_at"`
}

// SetConfig publishes a configuration snapshot on behalf of By.
type SetConfig struct {
	Config  Config
	By      string
	Process string
	At      time.Time
}

// DecideConfig decides a SetConfig: a snapshot that says what is already in
// force is a replay (no events); anything else is the next version.
func DecideConfig(s ConfigState, c SetConfig) ([]ConfigChanged, error) {
	if err := c.Config.Validate(); err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if s.Version > 0 && s.Config.Same(c.Config) {
		return nil, nil
	}
	return []ConfigChanged{{Version: s.Version + 1, Config: c.Config.Normalized(), By: c.By, Process: c.Process, At: at}}, nil
}

// EvolveConfig applies one configuration event.
func EvolveConfig(s ConfigState, e ConfigChanged) ConfigState {
	return ConfigState{Config: e.Config.Normalized(), Version: e.Version, ChangedBy: e.By, ChangedAt: e.At}
}
