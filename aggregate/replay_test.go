package aggregate

import (
	"errors"
	"testing"
)

// TestReplayAccountNamesEveryEventThatCouldNotHaveBeenDecided: a settle
// without a reservation, an overdraft and a reused credit id are each
// handed to bad with their index and skipped; the legal events around them
// fold exactly as FoldAccount folds them, and the invariants hold.
func TestReplayAccountNamesEveryEventThatCouldNotHaveBeenDecided(t *testing.T) {
	events := []AccountEvent{
		AccountCredited{Account: acct, CreditID: "c1", Amount: usdt("100"), At: at(0)},
		AccountSettled{Account: acct, WithdrawalID: wd1, Amount: usdt("5"), At: at(1)}, // no reservation
		AccountReserved{Account: acct, WithdrawalID: wd2, Amount: usdt("30"), Day: utcDay(at(2)), At: at(2)},
		AccountReserved{Account: acct, WithdrawalID: wd3, Amount: usdt("500"), Day: utcDay(at(3)), At: at(3)}, // overdraft
		AccountCredited{Account: acct, CreditID: "c1", Amount: usdt("1"), At: at(4)},                          // reused id
		AccountSettled{Account: acct, WithdrawalID: wd2, Amount: usdt("30"), At: at(5)},
	}
	bad := map[int]string{}
	a := ReplayAccount(events, func(i int, err error) {
		var de *Error
		if !errors.As(err, &de) {
			t.Fatalf("event %d: %v is not a domain error", i, err)
		}
		bad[i] = de.Code
	})
	want := map[int]string{1: CodeNoReservation, 3: CodeInsufficientFunds, 4: CodeIdempotencyConflict}
	if len(bad) != len(want) {
		t.Fatalf("bad events %v, want %v", bad, want)
	}
	for i, c := range want {
		if bad[i] != c {
			t.Fatalf("event %d: code %q, want %q", i, bad[i], c)
		}
	}
	folded := FoldAccount(events)
	if a.Version != 6 || !a.Available().Equal(folded.Available()) || !a.Settled().Equal(usdt("30")) || !a.Credited().Equal(usdt("100")) {
		t.Fatalf("replayed %+v, folded %+v", a.View(), folded.View())
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestDistinctApprovalsCountsNeitherTheRequesterNorARepeat: a log the
// auditor does not trust may hold both; neither counts.
func TestDistinctApprovalsCountsNeitherTheRequesterNorARepeat(t *testing.T) {
	w := Withdrawal{RequestedBy: "alice", Approvals: []Approval{{By: "bob"}, {By: "alice"}, {By: "bob"}, {By: "carol"}, {By: ""}}}
	if n := w.DistinctApprovals(); n != 2 {
		t.Fatalf("distinct approvals %d, want 2", n)
	}
}
