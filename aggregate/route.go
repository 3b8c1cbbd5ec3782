package aggregate

import (
	"encoding/json"
)

// Rail is how a withdrawal's money travels.
type Rail string

const (
	// RailInternal: the destination is custodied by us; the payout is a
	// ledger transfer to Account, with no chain, no fee, no confirmations.
	RailInternal Rail = "internal"
	// RailExternal: the payout is a transaction on the chain.
	RailExternal Rail = "external"
)

// Route is a routing decision. Its fields are unexported so that the only
// ways to make one are InternalRoute and ExternalRoute (and UnmarshalJSON,
// which applies the same checks): an internal route always names the account
// that receives the money, an external route never does, and every decision
// says why. The zero value means "not routed yet".
type Route struct {
	rail    Rail
	account string
	reason  string
}

// InternalRoute decides a ledger transfer to account.
func InternalRoute(account, reason string) (Route, error) {
	if account == "" {
		return Route{}, newError(CodeInvalidRoute, "route.account", "an internal route needs the receiving account")
	}
	if err := ValidateAccountID(account); err != nil {
		return Route{}, newError(CodeInvalidRoute, "route.account", "%s", err.(*Error).Message)
	}
	if err := checkReason("route.reason", reason); err != nil {
		return Route{}, err
	}
	return Route{rail: RailInternal, account: account, reason: reason}, nil
}

// ExternalRoute decides an on-chain payout.
func ExternalRoute(reason string) (Route, error) {
	if err := checkReason("route.reason", reason); err != nil {
		return Route{}, err
	}
	return Route{rail: RailExternal, reason: reason}, nil
}

func checkReason(field, reason string) error {
	if reason == "" {
		return newError(CodeInvalidRoute, field, "a routing decision must say why")
	}
	if len(reason) > 256 {
		return newError(CodeInvalidRoute, field, "longer than 256 characters")
	}
	for _, c := range reason {
		if c < ' ' || c == 0x7f {
			return newError(CodeInvalidRoute, field, "control characters are not allowed")
		}
	}
	return nil
}

func (r Route) Rail() Rail         { return r.rail }
func (r Route) Account() string    { return r.account }
func (r Route) Reason() string     { return r.reason }
func (r Route) IsZero() bool       { return r.rail == "" }
func (r Route) IsInternal() bool   { return r.rail == RailInternal }
func (r Route) IsExternal() bool   { return r.rail == RailExternal }
func (r Route) Equal(o Route) bool { return r == o }

type routeJSON struct {
	Rail    Rail    `json:"rail"`
	Account *string `json:"account"`
	Reason  string  `json:"reason"`
}

// MarshalJSON writes {"rail","account","reason"} with account null on an
// external route; the zero Route is null.
func (r Route) MarshalJSON() ([]byte, error) {
	if r.IsZero() {
		return []byte("null"), nil
	}
	j := routeJSON{Rail: r.rail, Reason: r.reason}
	if r.rail == RailInternal {
		j.Account = &r.account
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes and refuses what the
// constructors refuse; null is the zero Route.
func (r *Route) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*r = Route{}
		return nil
	}
	var j routeJSON
	if err := strictDecode(data, &j); err != nil {
		return newError(CodeInvalidRoute, "route", "malformed: %v", err)
	}
	var (
		out Route
		err error
	)
	switch j.Rail {
	case RailInternal:
		if j.Account == nil {
			return newError(CodeInvalidRoute, "route.account", "an internal route needs the receiving account")
		}
		out, err = InternalRoute(*j.Account, j.Reason)
	case RailExternal:
		if j.Account != nil && *j.Account != "" {
			return newError(CodeInvalidRoute, "route.account", "an external route has no account")
		}
		out, err = ExternalRoute(j.Reason)
	default:
		return newError(CodeInvalidRoute, "route.rail", "unknown rail %q", j.Rail)
	}
	if err != nil {
		return err
	}
	*r = out
	return nil
}
