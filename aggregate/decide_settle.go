package aggregate

// Deciders for the steps between approval and the chain: reserving funds,
// claiming the withdrawal, choosing its route, settling internally.

func decideReservation(w Withdrawal, c RecordReservation) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.Reserved {
		return nil, nil
	}
	return FundsReserved{Account: w.Account, Amount: w.Amount, At: at}, nil
}

func decideClaim(w Withdrawal, c ClaimWithdrawal) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "worker", c.Worker); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if !c.LeaseUntil.After(at) {
		return nil, newError(CodeInvalidCommand, "lease_until", "must be after at")
	}
	if err := CheckTransition(w.State, EventClaimed); err != nil {
		return nil, err
	}
	if w.Claim.Worker == c.Worker && w.Claim.LeaseUntil.Equal(c.LeaseUntil) {
		return nil, nil
	}
	return Claimed{Worker: c.Worker, LeaseUntil: c.LeaseUntil.UTC(), At: at}, nil
}

func decideRoute(w Withdrawal, c ChooseRoute) (Event, error) {
	if c.Route.IsZero() {
		return nil, newError(CodeInvalidRoute, "route", "required")
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if !w.Route.IsZero() {
		if w.Route.Equal(c.Route) {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "route", "already routed %s (%s)", w.Route.Rail(), w.Route.Reason())
	}
	return Routed{Route: c.Route, At: at}, nil
}

func decideSettleInternally(w Withdrawal, c SettleInternally) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if w.State == StateConfirmed && w.Route.IsInternal() {
		return nil, nil
	}
	if err := CheckTransition(w.State, EventSettledInternally); err != nil {
		return nil, err
	}
	if err := checkPrincipals("revoked", c.Revoked); err != nil {
		return nil, err
	}
	if err := EnsureApprovedBy(w, c.Policy, c.Revoked); err != nil {
		return nil, err
	}
	return SettledInternally{Account: w.Route.Account(), Amount: w.Amount, PolicyVersion: c.Policy.Version, At: at}, nil
}
