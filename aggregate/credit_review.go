package aggregate

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Credits bounded and attributed (issue 11): an operator credit may not push
// an account's balance (available + reserved) past the asset's maximum, and
// a credit above a configured amount (Credit.ReviewAbove) waits for a second
// operator: it is recorded as requested, changes no balance, and is
// credited when another operator approves it (ApproveCredit). Every credit
// records who made it (By) and, after a review, who approved it.

// EventAccountCreditRequested is a credit waiting for a second operator.
const EventAccountCreditRequested = "account.credit_requested"

// AccountCreditRequested records an operator credit above the review
// amount. It changes no balance; an AccountCredited naming ApprovedBy
// completes it.
type AccountCreditRequested struct {
	Account     string    `json:"account"`
	CreditID    string    `json:"credit_id"`
	Amount      Amount    `json:"amount"`
	By          string    `json:"by"`
	ReviewAbove Amount    `json:"review_above"`
	At          time.Time `json:"at"`
}

func (AccountCreditRequested) EventType() string       { return EventAccountCreditRequested }
func (e AccountCreditRequested) OccurredAt() time.Time { return e.At }
func (AccountCreditRequested) isAccountEvent()         {}

// ApproveCredit is a second operator's approval of a credit waiting for
// review. Idempotent for the approver who credited it.
type ApproveCredit struct {
	Account  string
	CreditID string
	By       string
	At       time.Time
}

func (ApproveCredit) isAccountCommand() {}

// PendingCredit is a credit waiting for a second operator.
type PendingCredit struct {
	CreditID string    `json:"credit_id"`
	Amount   Amount    `json:"amount"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// PendingCredits lists the credits waiting for a second operator, oldest
// first.
func (a Account) PendingCredits() []PendingCredit {
	out := slices.Collect(maps.Values(a.pending))
	slices.SortFunc(out, func(x, y PendingCredit) int {
		if c := x.At.Compare(y.At); c != 0 {
			return c
		}
		return cmp.Compare(x.CreditID, y.CreditID)
	})
	return out
}

// PendingCredit returns the credit id waiting for review, if any.
func (a Account) PendingCredit(creditID string) (PendingCredit, bool) {
	p, ok := a.pending[creditID]
	return p, ok
}

// checkCeiling refuses a credit that would push the money held on the
// account (available + reserved) past the account asset's maximum: beyond
// it no transfer could carry the balance.
func (a Account) checkCeiling(amount Amount) error {
	if AccountAsset.Max.IsZero() {
		return nil
	}
	if after := a.available.Add(a.reserved).Add(amount); after.Cmp(AccountAsset.Max) > 0 {
		return newError(CodeInvalidAmount, "amount", "the credit would bring account %s to %s, above the maximum of %s %s",
			a.ID, after.pin(), AccountAsset.Max, AccountAsset.Code)
	}
	return nil
}

func decideApproveCredit(a Account, c ApproveCredit) (AccountEvent, error) {
	if err := checkAccountID(a, c.Account); err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "credit_id", c.CreditID); err != nil {
		return nil, err
	}
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	at, err := checkAt(c.At)
	if err != nil {
		return nil, err
	}
	p, ok := a.pending[c.CreditID]
	if !ok {
		if a.approvedBy[c.CreditID] == c.By {
			return nil, nil // this approver already credited it
		}
		if _, done := a.credits[c.CreditID]; done {
			return nil, newError(CodeInvalidTransition, "credit_id", "credit %s is not waiting for review (already credited)", c.CreditID)
		}
		return nil, newError(CodeInvalidTransition, "credit_id", "no credit %s waiting for review on account %s", c.CreditID, c.Account)
	}
	if c.By == p.By {
		return nil, newError(CodeSelfApproval, "", "%s made credit %s and cannot approve it; another operator must", c.By, c.CreditID)
	}
	if err := a.checkCeiling(p.Amount); err != nil {
		return nil, err
	}
	return AccountCredited{Account: c.Account, CreditID: c.CreditID, Amount: p.Amount, At: at, By: p.By, ApprovedBy: c.By}, nil
}

// checkReviewedCredit is checkAccountEvent's part for the review: a
// requested credit is new and attributed; a credit that names an approver
// completes a requested one, with its amount and maker, approved by someone
// else; a credit waiting for review cannot be credited without one.
func checkReviewedCredit(a Account, e AccountEvent) error {
	switch ev := e.(type) {
	case AccountCreditRequested:
		if _, ok := a.credits[ev.CreditID]; ok || ev.CreditID == "" {
			return newError(CodeIdempotencyConflict, "credit_id", "credit %q already recorded", ev.CreditID)
		}
		if _, ok := a.pending[ev.CreditID]; ok {
			return newError(CodeIdempotencyConflict, "credit_id", "credit %q already waits for review", ev.CreditID)
		}
		if ev.Amount.Sign() <= 0 {
			return newError(CodeInvalidAmount, "amount", "must be greater than zero")
		}
		if ev.By == "" {
			return newError(CodeInvalidEvent, "by", "a credit records who made it")
		}
	case AccountCredited:
		p, pending := a.pending[ev.CreditID]
		switch {
		case ev.ApprovedBy == "" && pending:
			return newError(CodeInvalidEvent, "approved_by", "credit %s waits for a second operator", ev.CreditID)
		case ev.ApprovedBy == "":
		case !pending:
			return newError(CodeInvalidEvent, "approved_by", "credit %s was not waiting for review", ev.CreditID)
		case ev.ApprovedBy == p.By || ev.By != p.By || !ev.Amount.Equal(p.Amount):
			return newError(CodeInvalidEvent, "approved_by", "credit %s must be approved by someone other than %s, for %s", ev.CreditID, p.By, p.Amount)
		}
		if ev.WithdrawalID == "" {
			return a.checkCeiling(ev.Amount)
		}
	}
	return nil
}
