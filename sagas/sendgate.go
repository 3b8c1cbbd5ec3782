package sagas

import (
	"context"

	"github.com/weir-payouts/weir/aggregate"
)

// SendGate says whether the hot wallet can pay for a withdrawal's transfer
// now (*hotwallet.Monitor). The worker asks it before it claims an
// approved withdrawal and builds its first envelope; a refusal writes
// nothing, so the withdrawal stays approved and is asked about again at
// the next visit (the poll or a notification) — sending resumes by itself
// once the wallet can pay. A withdrawal whose envelope exists is followed
// to its outcome whatever the wallet holds; the gate is asked again only
// when that envelope failed on chain (OUT_OF_ENERGY, REVERT), before it is
// rebuilt (rebuildAfterReceipt), or was refused by the node for want of
// TRX for its bandwidth (BANDWITH_ERROR) and has expired, before it is
// rebuilt on its proof of death (whenExpired): the rebuild waits until
// the wallet can pay. A worker without a gate fails such a withdrawal
// instead.
type SendGate interface {
	MaySend(ctx context.Context, w aggregate.Withdrawal) (ok bool, reason string)
}

// paused reports whether the gate holds w back: an approved withdrawal
// paid on chain (internal routes move no chain funds) the wallet cannot
// pay for now.
func (wk *Worker) paused(ctx context.Context, w aggregate.Withdrawal) bool {
	if wk.cfg.Gate == nil || w.State != aggregate.StateApproved || w.Route.IsInternal() {
		return false
	}
	if _, custodied := wk.cfg.Custody(w.ToAddress); custodied {
		return false
	}
	ok, reason := wk.cfg.Gate.MaySend(ctx, w)
	if !ok {
		wk.log.Debug("sending paused: withdrawal stays approved", "withdrawal", w.ID, "reason", reason)
	}
	return !ok
}
