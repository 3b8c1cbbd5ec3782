package aggregate

import "time"

// The account's side of velocity tiers: what it sent in the rolling
// VelocityWindow before a request. "Sent" is reserved and not released —
// held (in progress, approved or not) or settled; a released reservation
// (rejected, failed) never left. The fold keeps only the reservations of
// about the last window (plus velocityKeepSlack for clocks that disagree),
// so the state does not grow with the account's history and a request
// sums at most a window's worth of entries.

// velocityKeepSlack keeps reservations a little past the window: requests
// are timed by the intake's clock, reservations by the ledger's, which may
// run somewhat ahead.
const velocityKeepSlack = time.Hour

type recentReservation struct {
	WithdrawalID string
	Amount       Amount
	At           time.Time
	Released     bool
}

// releaseRecent marks the reservation of withdrawalID released, if it is
// recent. recent belongs to the state being changed (Account.owned). The
// entry is marked, not looked up in the reservations, because a compact
// state forgets closed reservations.
func releaseRecent(recent []recentReservation, withdrawalID string) {
	for i := len(recent) - 1; i >= 0; i-- { // releases follow their reservations closely
		if recent[i].WithdrawalID == withdrawalID {
			recent[i].Released = true
			return
		}
	}
}

// keepRecent appends ev's reservation and drops, from the front, those
// older than a window (and slack) before it. Reservations arrive in log
// order, so the front is the oldest but for clock skew between writers,
// which only makes an entry stay a little longer.
func keepRecent(recent []recentReservation, ev AccountReserved) []recentReservation {
	cutoff := ev.At.Add(-VelocityWindow - velocityKeepSlack)
	drop := 0
	for drop < len(recent) && recent[drop].At.Before(cutoff) {
		drop++
	}
	// The array belongs to this state (Account.owned copies it), so the
	// front can be cut in place; append's next reallocation drops it.
	return append(recent[drop:], recentReservation{WithdrawalID: ev.WithdrawalID, Amount: ev.Amount, At: ev.At})
}

// SentInWindow is what the account sent in the VelocityWindow before at:
// the amounts reserved in (at − window, at] and not released since.
func (a Account) SentInWindow(at time.Time) Amount {
	from := at.Add(-VelocityWindow)
	sum := AccountAsset.Zero()
	for _, r := range a.recent {
		if r.Released || !r.At.After(from) || r.At.After(at) {
			continue
		}
		sum = sum.Add(r.Amount)
	}
	return sum
}
