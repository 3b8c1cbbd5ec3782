package aggregate

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strings"
	"testing"
	"time"
)

// stateSize counts the entries an account state holds.
func stateSize(a Account) int {
	return len(a.credits) + len(a.pending) + len(a.approvedBy) + a.reservations.len() + len(a.daily)
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

// A snapshot decodes to a state that decides and folds as the one it was
// taken of; a garbled or inconsistent one is refused.
func TestAccountSnapshotRoundTrips(t *testing.T) {
	log := cycleLog(t, 50)
	live := FoldAccountFrom(Account{}, log)
	data, err := live.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalAccountSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalSnapshot()
	if string(again) != string(data) || balances(back) != balances(live) || back.Version != live.Version || back.ID != live.ID {
		t.Fatalf("round trip:\n%s\n%s", data, again)
	}
	next := Reserve{Account: acct, WithdrawalID: "ffffffff-0000-4000-8000-000000000000", Amount: usdt("5"), At: at(9)}
	e1, err1 := DecideAccount(live, next)
	e2, err2 := DecideAccount(back, next)
	if err1 != nil || err2 != nil || len(e1) != 1 || len(e2) != 1 {
		t.Fatalf("%v %v", err1, err2)
	}
	if _, err := FoldAccount(log).MarshalSnapshot(); !errors.Is(err, ErrNotCompact) {
		t.Fatalf("a full fold was snapshotted: %v", err)
	}
	for name, bad := range map[string]string{
		"garbled":        `{"id":`,
		"unknown member": strings.Replace(string(data), `"daily"`, `"extra":1,"daily"`, 1),
		"invariant":      strings.Replace(string(data), `"available":"`, `"available":"9`, 1),
		"closed":         strings.Replace(string(data), `"status":"held"`, `"status":"settled"`, 1),
	} {
		if _, err := UnmarshalAccountSnapshot([]byte(bad)); err == nil {
			t.Errorf("%s snapshot accepted", name)
		}
	}
}

// Every field of Account is in accountSnapshot: a field added to the state
// and not to the snapshot would be lost by every restart that reads one.
func TestAccountSnapshotCoversEveryField(t *testing.T) {
	state := reflect.TypeOf(Account{}).NumField() - 1 // compact is implied
	if snap := reflect.TypeOf(accountSnapshot{}).NumField(); snap != state {
		t.Fatalf("Account has %d fields to keep, accountSnapshot %d: add the new one to both and bump AccountSnapshotSchema", state, snap)
	}
}

// A compact state knows which withdrawals' reservations it may have
// dropped: those requested no later than the latest one it dropped, or any
// once it dropped one whose requested_at was not recorded.
func TestCompactAccountKnowsWhatItMayHaveForgotten(t *testing.T) {
	a := FoldAccountFrom(Account{}, nil)
	step := func(c AccountCommand) {
		evs, err := DecideAccount(a, c)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%T: %v %v", c, evs, err)
		}
		a = FoldAccountFrom(a, evs)
	}
	step(Credit{Account: acct, CreditID: "dep", Amount: usdt("100"), At: t0})
	if a.MayHaveForgotten(at(1)) || !a.MayHaveForgotten(time.Time{}) {
		t.Fatal("a state that dropped nothing")
	}
	step(Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("1"), At: at(10), RequestedAt: at(5)})
	step(Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("1"), At: at(11), RequestedAt: at(8)})
	if a.MayHaveForgotten(at(5)) {
		t.Fatal("nothing closed yet")
	}
	step(Settle{Account: acct, WithdrawalID: wd1, At: at(12)})
	for _, c := range []struct {
		requested time.Time
		may       bool
	}{{at(4), true}, {at(5), true}, {at(6), false}, {at(8), false}} {
		if got := a.MayHaveForgotten(c.requested); got != c.may {
			t.Errorf("requested at %v: %v, want %v", c.requested, got, c.may)
		}
	}
	if FoldAccount(nil).MayHaveForgotten(at(1)) {
		t.Fatal("a full fold forgets nothing")
	}
	step(Reserve{Account: acct, WithdrawalID: wd3, Amount: usdt("1"), At: at(13)}) // no requested_at
	step(Release{Account: acct, WithdrawalID: wd3, Reason: "failed", At: at(14)})
	if !a.MayHaveForgotten(at(100)) {
		t.Fatal("after dropping a reservation without requested_at, anything may have been")
	}
	data, _ := a.MarshalSnapshot()
	if back, err := UnmarshalAccountSnapshot(data); err != nil || !back.MayHaveForgotten(at(100)) {
		t.Fatalf("snapshot: %v", err)
	}
}

// Folds from one state share its reservations and copy only the shard an
// event changes: neither sees the other's change, nor does the state they
// started from, and a busy account's request does not copy every held
// reservation.
func TestFoldsShareReservationsCopyOnWrite(t *testing.T) {
	a := FoldAccountFrom(Account{}, nil)
	step := func(a Account, c AccountCommand) Account { return compactStep(t, a, c) }
	a = step(a, Credit{Account: acct, CreditID: "dep", Amount: usdt("100000"), At: t0})
	for i := range 2000 {
		a = step(a, Reserve{Account: acct, WithdrawalID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Amount: usdt("1"), At: at(1)})
	}
	first := "00000000-0000-4000-8000-000000000000"
	x := step(a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("1"), At: at(2)})
	y := step(a, Settle{Account: acct, WithdrawalID: first, At: at(2)})
	if _, ok := a.Reservation(wd1); ok || a.reservations.len() != 2000 {
		t.Fatal("the base state changed")
	}
	if _, ok := a.Reservation(first); !ok {
		t.Fatal("the base state lost a reservation")
	}
	if _, ok := y.Reservation(wd1); ok || y.reservations.len() != 1999 {
		t.Fatal("a sibling fold saw the other's reservation")
	}
	if _, ok := x.Reservation(first); !ok || x.reservations.len() != 2001 {
		t.Fatal("a sibling fold saw the other's settlement")
	}
	if n := bits.OnesCount64(x.reservations.mine); n != 1 {
		t.Fatalf("one reservation made, %d shards copied", n)
	}
	if err := x.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := y.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Over days, two parts of the state follow the calendar rather than open
// work: the velocity window keeps the reservations of the last
// VelocityWindow (and slack), however long the history before it, and the
// daily totals keep one entry per UTC day that had a reservation (a few
// kilobytes a year; a day is not forgotten, so a writer's clock that lags
// by days still checks the limit against that day's true total).
func TestCompactAccountVelocityWindowIsBoundedByTime(t *testing.T) {
	a := FoldAccountFrom(Account{}, nil)
	step := func(c AccountCommand) {
		evs, err := DecideAccount(a, c)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%T: %v %v", c, evs, err)
		}
		a = FoldAccountFrom(a, evs)
	}
	step(Credit{Account: acct, CreditID: "dep", Amount: usdt("1000000"), At: t0})
	// Each cycle is a reservation and its settlement, two hours apart.
	cycles := func(n int) int {
		for range n {
			wid := fmt.Sprintf("%08x-0000-4000-8000-000000000001", a.Version)
			when := t0.Add(time.Duration(a.Version) * time.Hour)
			step(Reserve{Account: acct, WithdrawalID: wid, Amount: usdt("1"), At: when, RequestedAt: when})
			step(Settle{Account: acct, WithdrawalID: wid, At: when})
		}
		if days := int(t0.Add(time.Duration(a.Version)*time.Hour).Sub(t0)/(24*time.Hour)) + 1; len(a.daily) > days+1 {
			t.Fatalf("%d daily entries over %d days", len(a.daily), days)
		}
		return a.recent.len() + stateSize(a) - len(a.daily)
	}
	after100, after1000 := cycles(100), cycles(900)
	if after100 != after1000 {
		t.Fatalf("state entries (but the days) after 100 and 1000 two-hourly cycles: %d and %d", after100, after1000)
	}
	if max := int((VelocityWindow+velocityKeepSlack)/(2*time.Hour)) + 2; a.recent.len() > max {
		t.Fatalf("the velocity window keeps %d reservations, at most %d expected", a.recent.len(), max)
	}
}

// The velocity window is shared between states as the reservations are:
// sibling folds see only their own change, and the state they started
// from keeps its sum.
func TestVelocityWindowIsSharedCopyOnWrite(t *testing.T) {
	a := FoldAccountFrom(Account{}, nil)
	step := func(a Account, c AccountCommand) Account { return compactStep(t, a, c) }
	a = step(a, Credit{Account: acct, CreditID: "dep", Amount: usdt("100000"), At: t0})
	for i := range 500 {
		a = step(a, Reserve{Account: acct, WithdrawalID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Amount: usdt("1"), At: at(1)})
	}
	now := at(2)
	x := step(a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("1"), At: now})
	y := step(a, Release{Account: acct, WithdrawalID: "00000000-0000-4000-8000-000000000000", Reason: "failed", At: now})
	for name, c := range map[string]struct {
		s    Account
		want string
	}{"base": {a, "500"}, "reserved": {x, "501"}, "released": {y, "499"}} {
		if got := c.s.SentInWindow(now).String(); got != c.want {
			t.Errorf("%s: sent in window %s, want %s", name, got, c.want)
		}
	}
	data, _ := y.MarshalSnapshot()
	if back, err := UnmarshalAccountSnapshot(data); err != nil || back.SentInWindow(now).String() != "499" || back.recent.len() != 500 {
		t.Fatalf("snapshot: %v", err)
	}
}

// compactStep decides c on a and folds the one event it must cause.
func compactStep(t *testing.T, a Account, c AccountCommand) Account {
	t.Helper()
	evs, err := DecideAccount(a, c)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%T: %v %v", c, evs, err)
	}
	return FoldAccountFrom(a, evs)
}
