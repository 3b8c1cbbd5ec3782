package aggregate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The window sum is found by binary search and running sums
// (SentInWindow); it must be exactly what the walk over every entry kept
// gives (sentInWindowWalk, the sum before) and what a log that never
// forgets gives for any time the window can be asked about — on random
// histories with decimal amounts, writers whose clocks disagree (entries
// folded out of time order), releases, settlements, expiry from the front,
// snapshots and sibling states. Queries fall on the window's edges: an
// entry exactly a window old is out, a nanosecond younger is in.
func TestWindowSumEqualsTheWalkOnRandomHistories(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomWindowHistory(t, seed) })
	}
}

type everReserved struct {
	wid      string
	amount   Amount
	at       time.Time
	released bool
}

func randomWindowHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 12))
	a := compactStep(t, FoldAccountFrom(Account{}, nil), Credit{Account: acct, CreditID: "dep", Amount: usdt("1000000000"), At: t0})
	var ever []*everReserved // every reservation, never dropped
	held := map[string]*everReserved{}
	clock, latest := t0, t0
	type kept struct {
		a    Account
		at   time.Time
		want string
	}
	var siblings []kept

	check := func(a Account, at time.Time) {
		t.Helper()
		got, walk := a.SentInWindow(at), a.sentInWindowWalk(at)
		if !got.Equal(walk) || got.FixedString() != walk.FixedString() {
			t.Fatalf("at %s: window sum %s, the walk %s (%d kept, %d odd)", at, got.FixedString(), walk.FixedString(), a.recent.len(), len(a.recent.odd))
		}
		if at.Before(latest.Add(-velocityKeepSlack)) {
			return // before what the fold keeps for: the walk is the definition
		}
		want := AccountAsset.Zero()
		for _, r := range ever {
			if !r.released && r.at.After(at.Add(-VelocityWindow)) && !r.at.After(at) {
				want = want.Add(r.amount)
			}
		}
		if !got.Equal(want) {
			t.Fatalf("at %s: window sum %s, every reservation ever says %s", at, got, want)
		}
	}
	queries := func(a Account) []time.Time {
		qs := []time.Time{clock, latest, latest.Add(-velocityKeepSlack), clock.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))}
		for range 4 {
			if len(ever) == 0 {
				break
			}
			r := ever[len(ever)-1-rng.IntN(min(len(ever), 40))]
			qs = append(qs, r.at, r.at.Add(-time.Nanosecond), r.at.Add(VelocityWindow), r.at.Add(VelocityWindow-time.Nanosecond))
		}
		return qs
	}

	for i := range 400 {
		switch k := rng.IntN(20); {
		case k < 12 || len(held) == 0: // reserve
			// Mostly forward in small steps, sometimes a jump past the
			// window, sometimes a writer whose clock is behind.
			switch j := rng.IntN(20); {
			case j == 0 && rng.IntN(4) == 0:
				clock = clock.Add(VelocityWindow + time.Duration(rng.Int64N(int64(3*time.Hour))))
			case j == 1 && len(ever) > 0:
				clock = ever[rng.IntN(len(ever))].at.Add(VelocityWindow) // an entry exactly a window old
			default:
				clock = clock.Add(time.Duration(rng.Int64N(int64(8 * time.Minute))))
			}
			when := clock
			if rng.IntN(6) == 0 {
				when = clock.Add(-time.Duration(rng.Int64N(int64(90 * time.Minute))))
			}
			amount := MustParseAmount(USDT, fmt.Sprintf("%d.%06d", rng.IntN(500), rng.IntN(1_000_000)))
			if amount.Sign() == 0 {
				amount = usdt("0.000001")
			}
			wid := fmt.Sprintf("%08x-0000-4000-8000-%012x", seed, i)
			a = compactStep(t, a, Reserve{Account: acct, WithdrawalID: wid, Amount: amount, At: when, RequestedAt: when})
			r := &everReserved{wid: wid, amount: amount, at: when}
			ever, held[wid] = append(ever, r), r
			if when.After(latest) {
				latest = when
			}
		default: // close a held reservation
			var r *everReserved
			for _, h := range held { // map order: a random one
				r = h
				break
			}
			delete(held, r.wid)
			if rng.IntN(2) == 0 {
				a = compactStep(t, a, Release{Account: acct, WithdrawalID: r.wid, Reason: "failed", At: clock})
				r.released = true
			} else {
				a = compactStep(t, a, Settle{Account: acct, WithdrawalID: r.wid, At: clock})
			}
		}
		if rng.IntN(50) == 0 {
			data, err := a.MarshalSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if a, err = UnmarshalAccountSnapshot(data); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range queries(a) {
			check(a, q)
		}
		if rng.IntN(25) == 0 {
			siblings = append(siblings, kept{a: a, at: clock, want: a.SentInWindow(clock).FixedString()})
		}
	}
	// States handed out earlier still sum what they summed: later folds
	// copied what they changed.
	for _, s := range siblings {
		if got := s.a.SentInWindow(s.at).FixedString(); got != s.want {
			t.Fatalf("an earlier state now sums %s, it summed %s", got, s.want)
		}
		if got, walk := s.a.SentInWindow(s.at), s.a.sentInWindowWalk(s.at); !got.Equal(walk) {
			t.Fatalf("an earlier state sums %s, its walk %s", got, walk)
		}
	}
}

// BenchmarkReserveOnBusyAccount is what one reservation costs the account
// (the velocity window sum, the decision, the fold) on an account holding
// many reservations in its window, next to a fresh account: held/fresh
// should stay near 1, whatever the account holds.
func BenchmarkReserveOnBusyAccount(b *testing.B) {
	const heldN = 5000
	build := func(n int) Account {
		a := FoldAccountFrom(Account{}, nil)
		evs, _ := DecideAccount(a, Credit{Account: acct, CreditID: "dep", Amount: usdt("1000000000"), At: t0})
		a = FoldAccountFrom(a, evs)
		for i := range n {
			when := t0.Add(time.Duration(i) * time.Second)
			evs, err := DecideAccount(a, Reserve{Account: acct, WithdrawalID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Amount: usdt("1.5"), At: when, RequestedAt: when})
			if err != nil {
				b.Fatal(err)
			}
			a = FoldAccountFrom(a, evs)
		}
		return a
	}
	fresh, busy := build(0), build(heldN)
	now := t0.Add(2 * time.Hour)
	request := func(a Account, i int) time.Duration {
		start := time.Now()
		_ = a.SentInWindow(now)
		evs, err := DecideAccount(a, Reserve{Account: acct, WithdrawalID: fmt.Sprintf("%08x-0000-4000-a000-%012x", i, i), Amount: usdt("1.5"), At: now, RequestedAt: now})
		if err != nil || len(evs) != 1 {
			b.Fatal(err)
		}
		_ = FoldAccountFrom(a, evs)
		return time.Since(start)
	}
	var tf, tb time.Duration
	b.ResetTimer()
	for i := range b.N {
		tf += request(fresh, i)
		tb += request(busy, i)
	}
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "ns/fresh")
	b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "ns/held")
	b.ReportMetric(float64(tb)/float64(tf), "held/fresh")
}

// sentInWindowWalk is SentInWindow by walking every entry kept: the
// definition SentInWindow must agree with.
func (a Account) sentInWindowWalk(at time.Time) Amount {
	from := at.Add(-VelocityWindow)
	sum := AccountAsset.Zero()
	for r := range a.recent.all() {
		if r.Released || !r.At.After(from) || r.At.After(at) {
			continue
		}
		sum = sum.Add(r.Amount)
	}
	return sum
}
