package sagas

import (
	"context"

	"github.com/weir-payouts/weir/aggregate"
)

// ReserveFor holds a withdrawal's amount on its account (cmd), unless the
// withdrawal wid no longer waits for it. It is UpdateAccount with one more
// question, asked of the withdrawal's own stream: the live account state
// forgets a reservation once it is released or settled
// (aggregate.FoldAccountFrom), so only the withdrawal can say "already
// reserved" once its reservation is closed.
//
// Why that answer is never stale: the decision is made on the account at
// position p and appended at p (a conflict decides again), and the
// withdrawal is read from the stream leader after p is known. A
// reservation closed at or before p was closed by the ledger after the
// withdrawal's terminal event was in the log (Settle follows confirmed,
// Release follows rejected or failed), and a withdrawal is recorded
// reserved only after its reservation exists; so a reservation this state
// no longer shows is always visible on the withdrawal by then, as
// reserved or terminal, and a reserving path that read the withdrawal
// long before (paused, redelivered) reserves nothing. A reservation still
// held is in the state, and a Reserve for it is a replay. The common case
// skips the read: a withdrawal requested after every one whose reservation
// the state dropped (cmd.RequestedAt, recorded on each reservation) cannot
// have a dropped reservation (aggregate.Account.MayHaveForgotten).
//
// It returns nil both when it reserved and when there was nothing to
// reserve (the reservation is held already, or the withdrawal is reserved
// or ended) and does not say which: the caller goes on to record the
// reservation on the withdrawal, whose own decision tells the two apart.
func (r *Repo) ReserveFor(ctx context.Context, wid string, cmd aggregate.Reserve) error {
	_, _, _, err := update(ctx, r, accountKind, cmd.Account, nil, func(a aggregate.Account) ([]aggregate.AccountEvent, error) {
		events, err := aggregate.DecideAccount(a, cmd)
		if err != nil || len(events) == 0 || !a.MayHaveForgotten(cmd.RequestedAt) {
			// Refused, a replay of the reservation it holds, or one the
			// state cannot have forgotten: the account answers alone.
			return events, err
		}
		w, _, err := load(ctx, r, withdrawalKind, wid, true)
		if err != nil {
			return nil, err
		}
		if w.Reserved || w.Terminal() {
			return nil, nil
		}
		return events, nil
	})
	return err
}
