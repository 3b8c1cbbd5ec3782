package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	acct = "acct-1"
	wd1  = "11111111-1111-4111-8111-111111111111"
	wd2  = "22222222-2222-4222-8222-222222222222"
	wd3  = "33333333-3333-4333-8333-333333333333"
)

func accountStep(t *testing.T, a Account, c AccountCommand) Account {
	t.Helper()
	evs, err := DecideAccount(a, c)
	if err != nil || len(evs) != 1 {
		t.Fatalf("DecideAccount(%T): %v, %v", c, evs, err)
	}
	return EvolveAccount(a, evs[0])
}

func accountErr(t *testing.T, a Account, c AccountCommand, want *Error) {
	t.Helper()
	evs, err := DecideAccount(a, c)
	if !errors.Is(err, want) || len(evs) != 0 {
		t.Fatalf("DecideAccount(%T): want %s, got %v, %v", c, want.Code, evs, err)
	}
}

func accountNothing(t *testing.T, a Account, c AccountCommand) {
	t.Helper()
	evs, err := DecideAccount(a, c)
	if err != nil || len(evs) != 0 {
		t.Fatalf("DecideAccount(%T): want a replay, got %v, %v", c, evs, err)
	}
}

func balances(a Account) string {
	return fmt.Sprintf("%s/%s/%s", a.Available(), a.Reserved(), a.Settled())
}

func TestCreditsAreIdempotentByCreditID(t *testing.T) {
	a := accountStep(t, Account{}, Credit{Account: acct, CreditID: "dep-1", Amount: usdt("100"), At: t0})
	accountNothing(t, a, Credit{Account: acct, CreditID: "dep-1", Amount: usdt("100.000"), At: at(5)})
	accountErr(t, a, Credit{Account: acct, CreditID: "dep-1", Amount: usdt("101"), At: at(5)}, ErrIdempotencyConflict)
	a = accountStep(t, a, Credit{Account: acct, CreditID: "dep-2", Amount: usdt("0.5"), At: at(6)})
	if balances(a) != "100.5/0/0" || a.ID != acct || a.Version != 2 {
		t.Fatalf("%s %+v", balances(a), a)
	}
	accountErr(t, a, Credit{Account: acct, CreditID: "dep-3", Amount: Amount{}, At: at(6)}, ErrInvalidAmount)
	accountErr(t, a, Credit{Account: "acct-2", CreditID: "dep-3", Amount: usdt("1"), At: at(6)}, ErrInvalidAccount)
	accountErr(t, a, Credit{Account: acct, CreditID: "", Amount: usdt("1"), At: at(6)}, ErrInvalidCommand)
}

func TestReservationLifecycle(t *testing.T) {
	a := accountStep(t, Account{}, Credit{Account: acct, CreditID: "dep-1", Amount: usdt("100"), At: t0})
	a = accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("60"), At: at(1)})
	accountNothing(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("60"), At: at(2)})
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("61"), At: at(2)}, ErrIdempotencyConflict)
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("40.000001"), At: at(2)}, ErrInsufficientFunds)
	a = accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("40"), At: at(2)})
	if balances(a) != "0/100/0" {
		t.Fatal(balances(a))
	}
	a = accountStep(t, a, Settle{Account: acct, WithdrawalID: wd1, At: at(3)})
	accountNothing(t, a, Settle{Account: acct, WithdrawalID: wd1, At: at(4)})
	accountErr(t, a, Release{Account: acct, WithdrawalID: wd1, Reason: "failed", At: at(4)}, ErrInvalidTransition)
	a = accountStep(t, a, Release{Account: acct, WithdrawalID: wd2, Reason: "cancelled", At: at(4)})
	accountNothing(t, a, Release{Account: acct, WithdrawalID: wd2, Reason: "cancelled", At: at(5)})
	accountErr(t, a, Settle{Account: acct, WithdrawalID: wd2, At: at(5)}, ErrInvalidTransition)
	accountErr(t, a, Release{Account: acct, WithdrawalID: wd3, Reason: "x", At: at(5)}, ErrNoReservation)
	accountErr(t, a, Settle{Account: acct, WithdrawalID: wd3, At: at(5)}, ErrNoReservation)
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: "not-a-uuid", Amount: usdt("1"), At: at(5)}, ErrInvalidOperationID)
	if balances(a) != "40/0/60" {
		t.Fatal(balances(a))
	}
	if r, ok := a.Reservation(wd2); !ok || r.Status != ReservationReleased || r.Reason != "cancelled" {
		t.Fatalf("%+v", r)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if rs := a.Reservations(); len(rs) != 2 || rs[0].WithdrawalID != wd1 || !a.Credited().Equal(usdt("100")) {
		t.Fatalf("%+v", rs)
	}
	if v, _ := json.Marshal(a.View()); string(v) != `{"id":"acct-1","available":"40","reserved":"0","settled":"60"}` {
		t.Fatal(string(v))
	}
}

func TestDailyLimitCountsWhatWasReservedThatUTCDay(t *testing.T) {
	limit := usdt("100")
	late := time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC)
	nextDay := time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)
	// 01:00 at UTC+3 on March 2nd is still March 1st in UTC.
	sameDayElsewhere := time.Date(2025, 3, 2, 1, 0, 0, 0, time.FixedZone("UTC+3", 3*3600))

	a := accountStep(t, Account{}, Credit{Account: acct, CreditID: "dep", Amount: usdt("1000"), At: t0})
	a = accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("70"), DailyLimit: limit, At: t0})
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("30.000001"), DailyLimit: limit, At: late}, ErrDailyLimit)
	accountErr(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("31"), DailyLimit: limit, At: sameDayElsewhere}, ErrDailyLimit)
	b := accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("30"), DailyLimit: limit, At: late})
	if !b.ReservedOn(t0).Equal(limit) {
		t.Fatal(b.ReservedOn(t0))
	}
	// A new UTC day starts from zero.
	accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("100"), DailyLimit: limit, At: nextDay})
	// Released money never left: it stops counting. Settled money counts.
	r := accountStep(t, a, Release{Account: acct, WithdrawalID: wd1, Reason: "cancelled", At: late})
	accountStep(t, r, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("100"), DailyLimit: limit, At: late})
	s := accountStep(t, a, Settle{Account: acct, WithdrawalID: wd1, At: late})
	accountErr(t, s, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("31"), DailyLimit: limit, At: late}, ErrDailyLimit)
	// No limit configured: no limit.
	accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("900"), At: t0})
}

func TestEvolveAccountLeavesItsInputAlone(t *testing.T) {
	a := accountStep(t, Account{}, Credit{Account: acct, CreditID: "dep", Amount: usdt("10"), At: t0})
	b := accountStep(t, a, Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("4"), At: t0})
	c := accountStep(t, a, Credit{Account: acct, CreditID: "dep-2", Amount: usdt("1"), At: t0})
	if balances(a) != "10/0/0" || balances(b) != "6/4/0" || balances(c) != "11/0/0" {
		t.Fatal(balances(a), balances(b), balances(c))
	}
	if _, ok := a.Reservation(wd1); ok {
		t.Fatal("reservation leaked into the earlier state")
	}
	if _, ok := a.CreditAmount("dep-2"); ok {
		t.Fatal("credit leaked into the earlier state")
	}
}

func TestAccountEventsRoundTripAndAudit(t *testing.T) {
	var a Account
	var log []AccountEvent
	for _, c := range []AccountCommand{
		Credit{Account: acct, CreditID: "dep", Amount: usdt("10"), At: t0},
		Reserve{Account: acct, WithdrawalID: wd1, Amount: usdt("4"), DailyLimit: usdt("5"), At: t0},
		Reserve{Account: acct, WithdrawalID: wd2, Amount: usdt("1"), At: t0},
		Settle{Account: acct, WithdrawalID: wd1, At: at(1)},
		Release{Account: acct, WithdrawalID: wd2, Reason: "failed", At: at(2)},
	} {
		evs, err := DecideAccount(a, c)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(evs[0])
		back, err := DecodeAccountEvent(evs[0].EventType(), data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		log = append(log, back)
		a = EvolveAccount(a, evs[0])
	}
	folded, err := AuditAccount(log)
	if err != nil || balances(folded) != balances(a) || folded.Version != 5 {
		t.Fatalf("%v %s %s", err, balances(folded), balances(a))
	}
	if folded.Available().UnitsString() != "6000000" {
		t.Fatal(folded.Available().UnitsString())
	}
	// A release of money that was never reserved is not a log Decide writes.
	forged := append(log[:1:1], AccountReleased{Account: acct, WithdrawalID: wd3, Amount: usdt("1"), Reason: "x", At: t0})
	if _, err := AuditAccount(forged); err == nil {
		t.Fatal("audit accepted a release without reservation")
	}
	if got := FoldAccount(forged); balances(got) != "10/0/0" {
		t.Fatalf("fold applied a forged release: %s", balances(got))
	}
}

// TestRandomAccountHistoriesConserveMoney drives thousands of random command
// sequences (small id pools so that replays, conflicts, double releases and
// settles of released reservations all happen) and checks after every step
// that money is conserved and nothing goes negative, that a refused command
// emits nothing, and that replaying the step just taken emits nothing.
func TestRandomAccountHistoriesConserveMoney(t *testing.T) {
	rng := rand.New(rand.NewPCG(20250301, 42))
	wids := []string{wd1, wd2, wd3, "44444444-4444-4444-8444-444444444444", "55555555-5555-4555-8555-555555555555",
		"66666666-6666-4666-8666-666666666666"}
	amounts := []string{"0.000001", "1", "2.5", "10", "33.333333", "100", "1000000"}
	limits := []string{"", "", "50", "1000"}
	const sequences, steps = 1500, 40
	for seq := range sequences {
		var a Account
		var log []AccountEvent
		expectCredited := Amount{}
		for i := range steps {
			when := t0.Add(time.Duration(rng.IntN(72)) * time.Hour)
			var c AccountCommand
			switch rng.IntN(4) {
			case 0:
				c = Credit{Account: acct, CreditID: fmt.Sprintf("c%d", rng.IntN(8)), Amount: usdt(amounts[rng.IntN(len(amounts))]), At: when}
			case 1:
				var lim Amount
				if l := limits[rng.IntN(len(limits))]; l != "" {
					lim = usdt(l)
				}
				c = Reserve{Account: acct, WithdrawalID: wids[rng.IntN(len(wids))], Amount: usdt(amounts[rng.IntN(len(amounts))]), DailyLimit: lim, At: when}
			case 2:
				c = Release{Account: acct, WithdrawalID: wids[rng.IntN(len(wids))], Reason: "failed", At: when}
			default:
				c = Settle{Account: acct, WithdrawalID: wids[rng.IntN(len(wids))], At: when}
			}
			before := balances(a)
			evs, err := DecideAccount(a, c)
			if err != nil && len(evs) != 0 {
				t.Fatalf("seq %d step %d: error with events", seq, i)
			}
			if err != nil {
				if CodeOf(err) == "" {
					t.Fatalf("seq %d step %d: untyped error %v", seq, i, err)
				}
				continue
			}
			for _, e := range evs {
				a = EvolveAccount(a, e)
				log = append(log, e)
				if cr, ok := e.(AccountCredited); ok {
					expectCredited = expectCredited.Add(cr.Amount)
				}
			}
			if err := a.CheckInvariants(); err != nil {
				t.Fatalf("seq %d step %d after %T: %v", seq, i, c, err)
			}
			for _, v := range []Amount{a.Available(), a.Reserved(), a.Settled()} {
				if v.Sign() < 0 {
					t.Fatalf("seq %d step %d: negative balance %s", seq, i, balances(a))
				}
			}
			if !a.Available().Add(a.Reserved()).Add(a.Settled()).Equal(expectCredited) {
				t.Fatalf("seq %d step %d: %s does not add up to credits %s", seq, i, balances(a), expectCredited)
			}
			if len(evs) > 0 {
				if again, err := DecideAccount(a, c); err != nil || len(again) != 0 {
					t.Fatalf("seq %d step %d: replay of %T gave %v, %v (was %s)", seq, i, c, again, err, before)
				}
			}
		}
		if folded, err := AuditAccount(log); err != nil || balances(folded) != balances(a) {
			t.Fatalf("seq %d: refold %v %s vs %s", seq, err, balances(folded), balances(a))
		}
	}
}
