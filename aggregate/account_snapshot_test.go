package aggregate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// referenceSnapshot is the snapshot as encoding/json writes it.
func referenceSnapshot(a Account) ([]byte, error) {
	return json.Marshal(accountSnapshot{
		ID: a.ID, Version: a.Version,
		Credited: a.credited, Available: a.available, Reserved: a.reserved, Settled: a.settled,
		Credits: a.credits, Pending: a.pending, ApprovedBy: a.approvedBy, Reservations: a.reservations.asMap(), Daily: a.daily,
		Recent: a.recent.list(), Forgotten: a.forgotten, ForgottenUnknown: a.forgottenUnknown,
	})
}

// asMap returns the reservations as one map (the snapshot's encoding).
func (s *reservationSet) asMap() map[string]Reservation {
	return maps.Collect(s.all())
}

func (l *recentLog) list() []recentReservation { return slices.Collect(l.all()) }

// MarshalSnapshot writes without reflection the bytes encoding/json
// writes for the same state (so stored snapshots are unchanged), for
// empty and busy states, strings that need escaping and times with and
// without fractions.
func TestMarshalSnapshotWritesWhatEncodingJSONWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	a := FoldAccountFrom(Account{}, nil)
	check := func(a Account) {
		t.Helper()
		got, err := a.MarshalSnapshot()
		want, werr := referenceSnapshot(a)
		if err != nil || werr != nil || string(got) != string(want) {
			t.Fatalf("snapshot (%v, %v):\n got %s\nwant %s", err, werr, got, want)
		}
	}
	check(a)
	a = compactStep(t, a, Credit{Account: acct, CreditID: "dep", Amount: usdt("1000000"), At: t0})
	check(a)
	a = compactStep(t, a, Credit{Account: acct, CreditID: "big", Amount: usdt("5000"), At: t0, By: "olivia", ReviewAbove: usdt("100")})
	var held []string
	for i := range 300 {
		when := t0.Add(time.Duration(i)*time.Minute + time.Duration(rng.IntN(1000))*time.Microsecond)
		if len(held) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(held))
			if rng.IntN(2) == 0 {
				a = compactStep(t, a, Release{Account: acct, WithdrawalID: held[k], Reason: "failed", At: when})
			} else {
				a = compactStep(t, a, Settle{Account: acct, WithdrawalID: held[k], At: when})
			}
			held = append(held[:k], held[k+1:]...)
		} else {
			wid := fmt.Sprintf("%08x-0000-4000-8000-000000000000", i)
			var requested time.Time
			if i%2 == 0 {
				requested = when
			}
			a = compactStep(t, a, Reserve{Account: acct, WithdrawalID: wid, Amount: MustParseAmount(USDT, fmt.Sprintf("%d.%d", rng.IntN(100)+1, rng.IntN(100))), At: when, RequestedAt: requested})
			held = append(held, wid)
		}
		if i%37 == 0 {
			check(a)
		}
	}
	check(a)
	// Strings that need escaping, and a time outside what JSON can carry.
	odd := a.owned()
	odd.reservations.put(Reservation{WithdrawalID: "x\"<é>\u2028&\\\x01", Amount: usdt("1"), Day: "d", Status: ReservationHeld, At: t0.In(time.FixedZone("", 3600)), Reason: "a \"reason\""})
	check(odd)
	odd.forgotten = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := odd.MarshalSnapshot(); err == nil {
		t.Fatal("a year encoding/json refuses was written")
	}
}

// BenchmarkMarshalSnapshot: a snapshot of an account holding 3,000
// reservations, as the hot-account bench writes every 128 events.
func BenchmarkMarshalSnapshot(b *testing.B) {
	a := FoldAccountFrom(Account{}, nil)
	evs, _ := DecideAccount(a, Credit{Account: acct, CreditID: "dep", Amount: usdt("1000000000"), At: t0})
	a = FoldAccountFrom(a, evs)
	for i := range 3000 {
		when := t0.Add(time.Duration(i) * time.Second)
		evs, _ := DecideAccount(a, Reserve{Account: acct, WithdrawalID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Amount: usdt("1.5"), At: when, RequestedAt: when})
		a = FoldAccountFrom(a, evs)
	}
	b.Run("reflection", func(b *testing.B) {
		for range b.N {
			if _, err := referenceSnapshot(a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("written", func(b *testing.B) {
		for range b.N {
			if _, err := a.MarshalSnapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
