package audit

import (
	"fmt"
	"sort"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// accountAudit is one account stream, replayed.
type accountAudit struct {
	ID      string
	Account aggregate.Account
	Events  int
}

// auditAccount replays an account stream and checks that every event
// could have been decided (aggregate.ReplayAccount names each one that
// could not, and skips it as the fold does) and that available + reserved
// + settled = credits at the end.
func (a *auditor) auditAccount(id string, recs []eventstore.Record) accountAudit {
	aa := accountAudit{ID: id, Events: len(recs)}
	events := make([]aggregate.AccountEvent, 0, len(recs))
	index := make([]int, 0, len(recs)) // events[i] is recs[index[i]]
	for i, r := range recs {
		if r.AggregateVersion != uint64(i+1) {
			a.add(Finding{Severity: Violation, Check: "stream", Account: id, Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type,
				What: fmt.Sprintf("event %d of the stream carries version %d: the stream has a gap or a duplicate", i+1, r.AggregateVersion)})
		}
		e, err := aggregate.DecodeAccountEvent(r.Type, r.Payload)
		if err != nil {
			a.add(Finding{Severity: Violation, Check: "decode", Account: id, Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type, What: "payload does not decode: " + err.Error()})
			continue
		}
		events = append(events, e)
		index = append(index, i)
		a.checkAccountAuthority(id, r, e)
	}
	aa.Account = aggregate.ReplayAccount(events, func(i int, err error) {
		r := recs[index[i]]
		a.add(Finding{Severity: Violation, Check: "account", Account: id, Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type,
			What: "could not have been decided: " + err.Error()})
	})
	if aa.Account.ID != "" && aa.Account.ID != id {
		a.add(Finding{Severity: Violation, Check: "account", Account: id, What: fmt.Sprintf("the stream of account %s holds the events of account %s", id, aa.Account.ID)})
	}
	if err := aa.Account.CheckInvariants(); err != nil {
		a.add(Finding{Severity: Violation, Check: "account", Account: id, What: err.Error()})
	}
	return aa
}

// checkAccountAuthority judges an account event against the configuration
// in force at its position in the log: operator credits by an operator
// (weir itself funds the dev account), a second operator for a credit
// above the review threshold, and a reservation under the daily limit in
// force — never the limit the event records about itself.
func (a *auditor) checkAccountAuthority(id string, r eventstore.Record, e aggregate.AccountEvent) {
	bad := func(format string, args ...any) {
		a.add(Finding{Severity: Violation, Check: "authority", Account: id, Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type, What: fmt.Sprintf(format, args...)})
	}
	actor := func(by, what string, system bool) {
		if msg, ok := a.configs.checkActor(r.Sequence, by, what, "", system, aggregate.RoleOperator); !ok {
			bad("%s", msg)
		}
	}
	switch ev := e.(type) {
	case aggregate.AccountCredited:
		if ev.WithdrawalID != "" {
			return // an internal transfer: weir's own settlement, judged with its withdrawal
		}
		actor(ev.By, "credit "+ev.CreditID, true)
		if ev.ApprovedBy != "" {
			actor(ev.ApprovedBy, "review of credit "+ev.CreditID, false)
		} else if cv, ok := a.configs.inForceAt(r.Sequence); ok && ev.By != aggregate.SystemActor {
			if limit := cv.State.Config.CreditReviewAbove; limit.Sign() > 0 && ev.Amount.Cmp(limit) > 0 {
				bad("credit %s of %s without a second operator, above credit_review_above %s in %s", ev.CreditID, ev.Amount, limit, cv.label())
			}
		}
	case aggregate.AccountCreditRequested:
		actor(ev.By, "credit "+ev.CreditID, false)
	case aggregate.AccountReserved:
		if msg, ok := a.configs.checkDailyLimit(r, ev.DailyLimit); !ok {
			a.add(Finding{Severity: Violation, Check: "account", Account: id, Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type, What: msg})
		}
	}
}

// checkReservation (safe to call concurrently; accounts are only read):
// the account's reservation of a withdrawal matches the
// withdrawal — held while it is open, settled once confirmed, released (or
// never made) once rejected or failed — and an internal transfer credited
// its destination. A terminal withdrawal whose account has not caught up
// yet is a warning for `grace` after it ended (the ledger saga completes
// it asynchronously), a violation after.
func (a *auditor) checkReservation(wa *Replay, accounts map[string]accountAudit) {
	w := wa.w
	if !w.Exists() {
		return
	}
	report := func(sev Severity, format string, args ...any) {
		f := Finding{Severity: sev, Check: "reservation", Withdrawal: w.ID, What: fmt.Sprintf(format, args...)}
		wa.Checks = append(wa.Checks, f)
		wa.found = append(wa.found, f)
	}
	lagging := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if !wa.endedAt.IsZero() && a.now.Sub(wa.endedAt) < a.grace {
			report(Warning, "%s (it ended %s ago; the ledger saga completes it — audit again if this persists)", msg, a.now.Sub(wa.endedAt).Round(time.Millisecond))
			return
		}
		report(Violation, "%s", msg)
	}
	acct := accounts[w.Account].Account
	res, has := acct.Reservation(w.ID)
	if has && !res.Amount.Equal(w.Amount) {
		report(Violation, "account %s holds %s for it; the withdrawal is %s", w.Account, res.Amount, w.Amount)
	}
	if w.Reserved && !has {
		report(Violation, "the withdrawal records funds_reserved but account %s has no reservation for it", w.Account)
	}
	switch w.State {
	case aggregate.StateConfirmed:
		switch {
		case !has:
			report(Violation, "confirmed but nothing was ever reserved on account %s", w.Account)
		case res.Status == aggregate.ReservationReleased:
			report(Violation, "confirmed (paid) but its reservation on account %s was released: the money counts twice", w.Account)
		case res.Status == aggregate.ReservationHeld:
			lagging("confirmed but its reservation on account %s is still held, not settled", w.Account)
		}
		if w.Route.IsInternal() {
			dest := accounts[w.Route.Account()].Account
			amt, ok := dest.CreditAmount("internal:" + w.ID)
			switch {
			case !ok:
				lagging("settled internally but account %s was not credited (credit internal:%s)", w.Route.Account(), w.ID)
			case !amt.Equal(w.Amount):
				report(Violation, "account %s was credited %s for it; the withdrawal is %s", w.Route.Account(), amt, w.Amount)
			}
		}
	case aggregate.StateRejected, aggregate.StateFailed:
		switch {
		case has && res.Status == aggregate.ReservationSettled:
			report(Violation, "%s (not paid) but its reservation on account %s was settled: the account lost the money", w.State, w.Account)
		case has && res.Status == aggregate.ReservationHeld:
			lagging("%s but its reservation on account %s is still held, not released", w.State, w.Account)
		}
	default:
		if has && res.Status != aggregate.ReservationHeld {
			report(Violation, "still %s but its reservation on account %s is already %s", w.State, w.Account, res.Status)
		}
		if has && !w.Reserved {
			report(Note, "reserved on account %s, not yet recorded on the withdrawal (the ledger saga records it)", w.Account)
		}
	}
}

// checkOrphanReservations: every reservation on an account belongs to a
// withdrawal of that account. With only set, just the reservations for
// that withdrawal are judged (withdrawals then holds it alone).
func (a *auditor) checkOrphanReservations(accounts map[string]accountAudit, withdrawals map[string]*Replay, only string) {
	ids := make([]string, 0, len(accounts))
	for id := range accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, r := range accounts[id].Account.Reservations() {
			if only != "" && r.WithdrawalID != only {
				continue
			}
			wa, ok := withdrawals[r.WithdrawalID]
			switch {
			case !ok:
				a.add(Finding{Severity: Violation, Check: "reservation", Account: id,
					What: fmt.Sprintf("reservation of %s (%s) for withdrawal %s, which does not exist", r.Amount, r.Status, r.WithdrawalID)})
			case wa.w.Account != id:
				a.add(Finding{Severity: Violation, Check: "reservation", Account: id, Withdrawal: only,
					What: fmt.Sprintf("reservation for withdrawal %s, which draws on account %s", r.WithdrawalID, wa.w.Account)})
			}
		}
	}
}
