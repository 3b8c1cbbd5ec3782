package sagas

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// ReserveWithdrawal holds w's amount on its account and records it on w
// in one atomic append to both streams, each fenced by its own position:
// the account's (so the balance it was decided on still stands) and the
// withdrawal's, wpos (so it was still waiting for its reservation). A
// writer holding a stale view of either loses the whole append, so a
// withdrawal is reserved at most once whatever ran meanwhile; that is what
// lets the account forget a reservation once it is released or settled
// (aggregate.FoldAccountFrom) instead of keeping every one it ever made.
//
// reserve is the account command; when the account refuses it with a
// business reason (insufficient funds, daily limit), refuse gives the
// withdrawal command recording that (a rejection), appended alone. A
// reservation already held on the account for w (an older process
// reserved in two steps and died between them) is recorded on w alone.
// A withdrawal found already reserved or terminal is returned as is.
func (r *Repo) ReserveWithdrawal(ctx context.Context, w aggregate.Withdrawal, wpos eventstore.Position, reserve aggregate.Reserve, record aggregate.Command, refuse func(error) aggregate.Command) (aggregate.Withdrawal, eventstore.Position, error) {
	unlockA := r.locks.lock(accountKind.typ + "." + reserve.Account)
	defer unlockA()
	unlockW := r.locks.lock(withdrawalKind.typ + "." + w.ID)
	defer unlockW()
	for attempt := range MaxDecideAttempts {
		if attempt > 0 {
			var err error
			if w, wpos, err = load(ctx, r, withdrawalKind, w.ID, false); err != nil {
				return w, wpos, err
			}
		}
		if !w.Exists() || w.Reserved || w.Terminal() {
			return w, wpos, nil
		}
		a, apos, err := r.accountForDecision(ctx, reserve.Account, attempt)
		if err != nil {
			return w, wpos, err
		}
		events, err := aggregate.DecideAccount(a, reserve)
		if err != nil || len(events) == 0 {
			// A refusal or a replay appends nothing to the account, so no
			// expectation fences it there: confirm it on the leader's view.
			latest, lpos, lerr := load(ctx, r, accountKind, reserve.Account, true)
			if lerr != nil {
				return w, wpos, lerr
			}
			if lpos.Sequence != apos.Sequence {
				a, apos = latest, lpos
				events, err = aggregate.DecideAccount(a, reserve)
			}
		}
		var wcmd aggregate.Command
		switch {
		case err != nil && refuse != nil && (errors.Is(err, aggregate.ErrInsufficientFunds) || errors.Is(err, aggregate.ErrDailyLimit)):
			wcmd = refuse(err)
		case err != nil:
			return w, wpos, fmt.Errorf("reserve %s on %s: %w", w.ID, reserve.Account, err)
		default:
			wcmd = record
		}
		wevents, err := aggregate.Decide(w, wcmd)
		if err != nil {
			return w, wpos, err
		}
		if len(wevents) == 0 && len(events) == 0 {
			return w, wpos, nil
		}
		parts := make([]eventstore.Part, 0, 2)
		if len(events) > 0 {
			parts = append(parts, eventstore.Part{Key: eventstore.Key{Type: accountKind.typ, ID: reserve.Account}, Expected: apos, Events: storeEvents(events)})
		}
		if len(wevents) > 0 {
			parts = append(parts, eventstore.Part{Key: eventstore.Key{Type: withdrawalKind.typ, ID: w.ID}, Expected: wpos, Events: storeEvents(wevents)})
		}
		positions, err := r.store.AppendAll(ctx, parts...)
		if errors.Is(err, eventstore.ErrConflict) {
			continue // one of the two moved: decide again on both
		}
		if err != nil {
			return w, wpos, unavailable(fmt.Errorf("reserve %s on %s: %w", w.ID, reserve.Account, err))
		}
		if len(events) > 0 {
			r.snaps.put(accountKind.typ, reserve.Account, aggregate.FoldAccountFrom(a, events), positions[0])
			positions = positions[1:]
		}
		if len(wevents) > 0 {
			for _, e := range wevents {
				w = aggregate.Evolve(w, e)
			}
			wpos = positions[0]
			w.Version = wpos.Version
		}
		return w, wpos, nil
	}
	return w, wpos, unavailable(fmt.Errorf("reserve %s on %s: %w", w.ID, reserve.Account, ErrTooMuchContention))
}

// accountForDecision is the account state to decide on: on a first
// attempt the snapshot this process holds (an append made on it is fenced
// by its position), else the log.
func (r *Repo) accountForDecision(ctx context.Context, id string, attempt int) (aggregate.Account, eventstore.Position, error) {
	if attempt == 0 {
		if snap, ok := r.snaps.get(eventlog.TypeAccount, id); ok {
			return snap.state.(aggregate.Account), snap.pos, nil
		}
	}
	return load(ctx, r, accountKind, id, false)
}

func storeEvents[E interface{ EventType() string }](events []E) []eventstore.Event {
	out := make([]eventstore.Event, len(events))
	for i, e := range events {
		out[i] = eventstore.Event{ID: eventstore.NewEventID(), Type: e.EventType(), Data: e}
	}
	return out
}
