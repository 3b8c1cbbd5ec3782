package aggregate

import (
	"math/big"
	"testing"
)

// Finding (issue 11): two credits of 2^256−1 units left a balance no TRC-20
// transfer can carry. A credit that would push the money held past the
// asset's maximum is refused, and so is one that would after a reservation.
func TestACreditPastTheAssetMaximumIsRefused(t *testing.T) {
	top, err := FromUnits(USDT, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	a := accountStep(t, Account{}, Credit{Account: acct, CreditID: "max", Amount: top, By: "olivia", At: t0})
	accountErr(t, a, Credit{Account: acct, CreditID: "again", Amount: top, By: "olivia", At: at(1)}, ErrInvalidAmount)
	accountErr(t, a, Credit{Account: acct, CreditID: "one-more", Amount: usdt("0.000001"), By: "olivia", At: at(1)}, ErrInvalidAmount)
	a = accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("5"), At: at(2)})
	accountErr(t, a, Credit{Account: acct, CreditID: "one-more", Amount: usdt("0.000001"), By: "olivia", At: at(3)}, ErrInvalidAmount)
	a = accountStep(t, a, Settle{Account: acct, WithdrawalID: wd1, At: at(4)})
	a = accountStep(t, a, Credit{Account: acct, CreditID: "refill", Amount: usdt("5"), By: "olivia", At: at(5)}) // the money left: room again
	if !a.Available().Equal(top) {
		t.Fatalf("available %s", a.Available())
	}
	// A stored log holding such a credit does not pass the audit.
	forged := []AccountEvent{
		AccountCredited{Account: acct, CreditID: "max", Amount: top, By: "olivia", At: t0},
		AccountCredited{Account: acct, CreditID: "again", Amount: top, By: "olivia", At: at(1)},
	}
	if _, err := AuditAccount(forged); err == nil {
		t.Fatal("AuditAccount accepted a balance past the maximum")
	}
}

// A credit above the review amount waits for a second operator: it changes
// no balance, its maker cannot approve it, and another operator's approval
// credits it, recording both.
func TestACreditAboveTheReviewAmountNeedsASecondOperator(t *testing.T) {
	review := usdt("10000")
	c := Credit{Account: acct, CreditID: "big", Amount: usdt("50000"), By: "olivia", ReviewAbove: review, At: t0}
	evs, err := DecideAccount(Account{}, c)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	req, ok := evs[0].(AccountCreditRequested)
	if !ok || req.By != "olivia" || !req.ReviewAbove.Equal(review) {
		t.Fatalf("a credit above the review amount gave %#v", evs[0])
	}
	a := EvolveAccount(Account{}, req)
	if balances(a) != "0/0/0" || len(a.PendingCredits()) != 1 {
		t.Fatalf("a requested credit moved money: %s, pending %v", balances(a), a.PendingCredits())
	}
	accountNothing(t, a, c) // the same request again
	accountErr(t, a, Credit{Account: acct, CreditID: "big", Amount: usdt("1"), By: "olivia", ReviewAbove: review, At: at(1)}, ErrIdempotencyConflict)
	accountErr(t, a, ApproveCredit{Account: acct, CreditID: "big", By: "olivia", At: at(2)}, ErrSelfApproval)
	accountErr(t, a, ApproveCredit{Account: acct, CreditID: "nope", By: "oscar", At: at(2)}, ErrInvalidTransition)

	evs, err = DecideAccount(a, ApproveCredit{Account: acct, CreditID: "big", By: "oscar", At: at(3)})
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	cr, ok := evs[0].(AccountCredited)
	if !ok || cr.By != "olivia" || cr.ApprovedBy != "oscar" || !cr.Amount.Equal(usdt("50000")) {
		t.Fatalf("approval gave %#v", evs[0])
	}
	a = EvolveAccount(a, cr)
	if balances(a) != "50000/0/0" || len(a.PendingCredits()) != 0 {
		t.Fatalf("after approval: %s, pending %v", balances(a), a.PendingCredits())
	}
	accountNothing(t, a, ApproveCredit{Account: acct, CreditID: "big", By: "oscar", At: at(4)})
	accountErr(t, a, ApproveCredit{Account: acct, CreditID: "big", By: "carol", At: at(4)}, ErrInvalidTransition)
	accountNothing(t, a, c) // the original request, retried after the credit

	// At or below the review amount a credit is immediate.
	a = accountStep(t, a, Credit{Account: acct, CreditID: "small", Amount: review, By: "olivia", ReviewAbove: review, At: at(5)})
	if balances(a) != "60000/0/0" {
		t.Fatal(balances(a))
	}
}

// The audit refuses a reviewed credit approved by its maker, a credit of a
// requested one without an approver, and an approval of nothing requested.
func TestAuditRefusesAReviewedCreditWithoutASecondOperator(t *testing.T) {
	req := AccountCreditRequested{Account: acct, CreditID: "big", Amount: usdt("50000"), By: "olivia", ReviewAbove: usdt("10000"), At: t0}
	for name, bad := range map[string]AccountCredited{
		"approved by its maker": {Account: acct, CreditID: "big", Amount: usdt("50000"), By: "olivia", ApprovedBy: "olivia", At: at(1)},
		"no approver":           {Account: acct, CreditID: "big", Amount: usdt("50000"), By: "olivia", At: at(1)},
		"another amount":        {Account: acct, CreditID: "big", Amount: usdt("60000"), By: "olivia", ApprovedBy: "oscar", At: at(1)},
	} {
		if _, err := AuditAccount([]AccountEvent{req, bad}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := AuditAccount([]AccountEvent{AccountCredited{Account: acct, CreditID: "x", Amount: usdt("1"), By: "olivia", ApprovedBy: "oscar", At: t0}}); err == nil {
		t.Error("an approved credit that was never requested: accepted")
	}
	if _, err := AuditAccount([]AccountEvent{req, AccountCredited{Account: acct, CreditID: "big", Amount: usdt("50000"), By: "olivia", ApprovedBy: "oscar", At: at(1)}}); err != nil {
		t.Errorf("an honest review: %v", err)
	}
}
