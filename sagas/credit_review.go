package sagas

import (
	"context"

	"github.com/weir-payouts/weir/aggregate"
)

// SetCreditReviewAbove sets the amount above which an operator credit waits
// for a second operator (zero: none). Call it before the intake serves
// requests.
func (in *Intake) SetCreditReviewAbove(a aggregate.Amount) { in.reviewAbove = a }

// ApproveCredit is a second operator's approval of a credit waiting for
// review on account: it credits it. The operator who made the credit
// cannot approve it (self_approval); approving it again is a replay.
func (in *Intake) ApproveCredit(ctx context.Context, account, creditID, by string) (aggregate.AccountView, bool, error) {
	if err := aggregate.ValidateAccountID(account); err != nil {
		return aggregate.AccountView{}, false, err
	}
	a, events, err := in.repo.UpdateAccount(ctx, account, aggregate.ApproveCredit{
		Account: account, CreditID: creditID, By: by, At: in.now().UTC(),
	})
	if err != nil {
		return aggregate.AccountView{}, false, err
	}
	return a.View(), len(events) == 0, nil
}
