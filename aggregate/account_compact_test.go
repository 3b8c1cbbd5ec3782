package aggregate

import (
	"fmt"
	"testing"
	"time"
)

// stateSize counts the entries an account state holds.
func stateSize(a Account) int {
	return len(a.credits) + len(a.pending) + len(a.approvedBy) + len(a.reservations) + len(a.daily)
}

// cycleLog is a credit followed by n reserve → settle (even) or release
// (odd) cycles on one day, with one reservation left held at the end.
func cycleLog(t *testing.T, n int) []AccountEvent {
	t.Helper()
	a := FoldAccountFrom(Account{}, nil)
	var log []AccountEvent
	step := func(c AccountCommand) {
		evs, err := DecideAccount(a, c)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%T: %v %v", c, evs, err)
		}
		log = append(log, evs...)
		a = FoldAccountFrom(a, evs)
	}
	step(Credit{Account: acct, CreditID: "dep-1", Amount: usdt("1000000"), At: t0})
	for i := range n + 1 {
		wid := fmt.Sprintf("%08x-0000-4000-8000-000000000000", i)
		when := t0.Add(time.Duration(i) * time.Millisecond)
		step(Reserve{Account: acct, WithdrawalID: wid, Amount: usdt("1"), At: when})
		if i == n {
			break // the last one stays held
		}
		if i%2 == 0 {
			step(Settle{Account: acct, WithdrawalID: wid, At: when})
		} else {
			step(Release{Account: acct, WithdrawalID: wid, Reason: "failed", At: when})
		}
	}
	return log
}

// The live fold keeps what the deciders need and nothing of the history:
// after 10 or 2,000 closed reservations the state holds the same number
// of entries (one credit, one day, one held reservation), with the same
// balances as the full fold, and its invariants hold.
func TestCompactAccountStateDoesNotGrowWithHistory(t *testing.T) {
	var sizes []int
	for _, n := range []int{10, 2000} {
		log := cycleLog(t, n)
		live := FoldAccountFrom(Account{}, log)
		full := FoldAccount(log)
		if balances(live) != balances(full) || live.Version != full.Version || live.Version != uint64(len(log)) {
			t.Fatalf("n=%d: live %s v%d, full %s v%d", n, balances(live), live.Version, balances(full), full.Version)
		}
		if err := live.CheckInvariants(); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if got := len(full.Reservations()); got != n+1 {
			t.Fatalf("full fold: %d reservations, want %d", got, n+1)
		}
		if rs := live.Reservations(); len(rs) != 1 || rs[0].Status != ReservationHeld {
			t.Fatalf("live fold keeps %d reservations: %+v", len(rs), rs)
		}
		// Folding in two pieces (a snapshot, then what follows) is the same.
		half := FoldAccountFrom(FoldAccountFrom(Account{}, log[:len(log)/2]), log[len(log)/2:])
		if balances(half) != balances(live) || stateSize(half) != stateSize(live) {
			t.Fatalf("n=%d: piecewise fold %s/%d, whole %s/%d", n, balances(half), stateSize(half), balances(live), stateSize(live))
		}
		sizes = append(sizes, stateSize(live))
	}
	if sizes[0] != sizes[1] || sizes[0] != 3 {
		t.Fatalf("state entries after 10 and 2000 cycles: %v, want 3 and 3", sizes)
	}
}

// A compact state still refuses what the held reservation forbids and
// answers replays of it; a closed one it answers no_reservation (the
// caller asks the withdrawal's stream: sagas.Ledger).
func TestCompactAccountDecidesOnHeldReservations(t *testing.T) {
	log := cycleLog(t, 2)
	a := FoldAccountFrom(Account{}, log)
	held := "00000002-0000-4000-8000-000000000000"
	accountNothing(t, a, Reserve{Account: acct, WithdrawalID: held, Amount: usdt("1"), At: at(1)})
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: held, Amount: usdt("2"), At: at(1)}, ErrIdempotencyConflict)
	accountErr(t, a, Settle{Account: acct, WithdrawalID: "00000000-0000-4000-8000-000000000000", At: at(1)}, ErrNoReservation)
	a = accountStep(t, a, Settle{Account: acct, WithdrawalID: held, At: at(2)})
	if _, ok := a.Reservation(held); ok || balances(a) != "999998/0/2" {
		t.Fatalf("after settle: %s", balances(a))
	}
}
