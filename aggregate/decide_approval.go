package aggregate

// Deciders for the request and approval steps: request, approve,
// re-check against a changed policy, cancel, decline, reject.

import "strings"

func decideRequest(w Withdrawal, c RequestWithdrawal) (Event, error) {
	id, err := ParseOperationID(c.ID)
	if err != nil {
		return nil, err
	}
	if err := ValidateAccountID(c.Account); err != nil {
		return nil, err
	}
	if err := checkAddress(c.ToAddress); err != nil {
		return nil, err
	}
	code := c.Asset
	if code == "" {
		code = USDT.Code
	}
	as, err := LookupAsset(code)
	if err != nil {
		return nil, err
	}
	amount, err := as.admit("amount", c.Amount)
	if err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "requested_by", c.RequestedBy); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if c.WindowSum != nil && c.WindowSum.Sign() < 0 {
		return nil, newError(CodeInvalidCommand, "window_sum", "negative")
	}
	if w.Exists() {
		// A second create on the same operation id is a replay only if it
		// means the same thing — including who asked.
		if w.ID == id && w.Account == c.Account && w.ToAddress == c.ToAddress &&
			w.Amount.Equal(amount) && w.Asset == as.Code && w.RequestedBy == c.RequestedBy {
			return nil, nil
		}
		return nil, newError(CodeIdempotencyConflict, "operation_id", "operation %s already exists with a different request", id)
	}
	// Judged after the replay check: a retry of a request accepted before
	// the policy tightened is still a replay.
	if c.WindowSum == nil && c.Policy.MeasuresVelocity(c.Account) {
		// Judged without it, the tiers would fail closed and ask for the
		// highest tier's approvers: measure, never guess.
		return nil, newError(CodeInvalidCommand, "window_sum", "the policy's velocity tiers name account %s: its 24 h sum must be measured", c.Account)
	}
	var sum *Amount
	if c.WindowSum != nil {
		s := c.WindowSum.pin()
		sum = &s
	}
	req, err := c.Policy.Assess(RequestFacts{Account: c.Account, ToAddress: c.ToAddress, Amount: amount, WindowSum: sum})
	if err != nil {
		return nil, err
	}
	return Requested{
		ID: id, Account: c.Account, ToAddress: c.ToAddress, Amount: amount, Asset: as.Code,
		RequestedBy: c.RequestedBy, RequiredApprovals: req.Approvers, Rule: req.Rule.Name,
		PolicyName: c.Policy.Name, PolicyVersion: c.Policy.Version,
		AppliedRules: req.AppliedRules, WindowSum: sum, At: at,
	}, nil
}

// checkAddress is only a plausibility check; the rail (tron/) validates the
// address for real before the command is built.
func checkAddress(s string) error {
	if s == "" {
		return newError(CodeInvalidAddress, "to_address", "required")
	}
	if len(s) > maxTokenLen {
		return newError(CodeInvalidAddress, "to_address", "longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return newError(CodeInvalidAddress, "to_address", "only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

func decideApprove(w Withdrawal, c Approve) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.Exists() && c.By == w.RequestedBy {
		return nil, newError(CodeSelfApproval, "", "%s requested this withdrawal and cannot approve it", c.By)
	}
	if w.HasApproval(c.By) {
		return nil, nil // the same approver twice counts once
	}
	if err := CheckTransition(w.State, EventApproved); err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	// The stricter of the policy at request time and the policy in force:
	// a policy loosened after the request never lowers what it needs.
	req := RequirementFor(w, c.Policy)
	if err := req.Refusal(); err != nil {
		return nil, err // no number of approvals lets this destination through now
	}
	ap := Approval{By: c.By, At: at, Rule: req.Rule, PolicyVersion: req.PolicyVersion}
	if len(w.Approvals)+1 >= req.Approvers {
		return Approved{Approval: ap, RequiredApprovals: req.Approvers, AppliedRules: req.AppliedRules, At: at}, nil
	}
	return ApprovalRecorded{Approval: ap, RequiredApprovals: req.Approvers, AppliedRules: req.AppliedRules, At: at}, nil
}

func decideRecheck(w Withdrawal, c RecheckApprovals) (Event, error) {
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err
	}
	if w.State == StateRequested && w.Invalidation != nil && w.Invalidation.PolicyVersion == c.Policy.Version &&
		w.Invalidation.PolicyName == c.Policy.Name {
		return nil, nil // this policy version already sent it back
	}
	if err := CheckTransition(w.State, EventApprovalsInvalidated); err != nil {
		return nil, err
	}
	if err := checkPrincipals("revoked", c.Revoked); err != nil {
		return nil, err
	}
	if EnsureApprovedBy(w, c.Policy, c.Revoked) == nil {
		return nil, nil
	}
	req := RequirementFor(w, c.Policy)
	kept, discounted := countApprovals(w, c.Revoked)
	reason := ReasonPolicyTightened
	switch {
	case req.RefusedBy != "":
		reason = ReasonDestinationNotAllowed
	case len(discounted) > 0 && len(w.Approvals) >= req.Approvers:
		reason = ReasonApproverRevoked // enough before the discount: the role change is the cause
	}
	ev := ApprovalsInvalidated{
		Reason: reason, Discounted: discounted, PolicyName: req.PolicyName, PolicyVersion: req.PolicyVersion,
		Rule: req.Rule, RequiredApprovals: req.Approvers, Given: kept,
		AppliedRules: req.AppliedRules, RefusedBy: req.RefusedBy, At: at,
	}
	if w.State == StateSigning {
		ev.RetiredTxID = w.Envelope.TxID // never signed: it can never land
	}
	return ev, nil
}

// checkPrincipals checks a list of principal names from a command.
func checkPrincipals(field string, names []string) error {
	for _, n := range names {
		if err := checkToken(CodeInvalidCommand, field, n); err != nil {
			return err
		}
	}
	return nil
}

func decideCancel(w Withdrawal, c Cancel) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.State == StateRejected && w.Reason == ReasonCancelled {
		return nil, nil // already cancelled, whoever did it
	}
	if !w.Exists() {
		return nil, newError(CodeInvalidTransition, "", "no such withdrawal")
	}
	if !w.State.IsCancellable() {
		return nil, newError(CodeNotCancellable, "", "a withdrawal in state %s can no longer be cancelled", w.State)
	}
	return Rejected{Reason: ReasonCancelled, By: c.By, At: at}, nil
}

// decideDecline: an approver declines a withdrawal still awaiting
// approval. The same decline again (same decliner, same reason) is a
// replay; anything else once the withdrawal left requested is
// invalid_transition.
func decideDecline(w Withdrawal, c Decline) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.Reason) == "" {
		return nil, newError(CodeInvalidCommand, "reason", "required")
	}
	if err := checkText("reason", c.Reason); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if !w.Exists() {
		return nil, newError(CodeInvalidTransition, "", "no such withdrawal")
	}
	if w.State == StateRejected && w.Reason == ReasonDeclined && w.ResolvedBy == c.By && w.Detail == c.Reason {
		return nil, nil
	}
	if w.State != StateRequested {
		return nil, newError(CodeInvalidTransition, "", "only a withdrawal awaiting approval can be declined; this one is %s", w.State)
	}
	return Rejected{Reason: ReasonDeclined, By: c.By, Detail: c.Reason, At: at}, nil
}

func decideReject(w Withdrawal, c Reject) (Event, error) {
	if err := checkToken(CodeInvalidCommand, "reason", c.Reason); err != nil {
		return nil, err
	}
	if c.Reason == ReasonCancelled || c.Reason == ReasonDeclined {
		return nil, newError(CodeInvalidCommand, "reason", "a cancellation is a Cancel and a decline a Decline, which record who")
	}
	if err := checkText("detail", c.Detail); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	if w.State == StateRejected {
		if w.Reason == c.Reason {
			return nil, nil
		}
		return nil, newError(CodeInvalidTransition, "", "already rejected (%s)", w.Reason)
	}
	return Rejected{Reason: c.Reason, Detail: c.Detail, At: at}, nil
}
