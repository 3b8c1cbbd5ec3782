package hotwallet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

type changes struct{ got []hotwallet.Change }

func (c *changes) record(ch hotwallet.Change) { c.got = append(c.got, ch) }

func (c *changes) names() string {
	var out []string
	for _, ch := range c.got {
		s := ch.Type
		if ch.Asset != "" {
			s += " " + ch.Asset
		}
		if ch.Initial {
			s += " (initial)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestChangesTellEveryCrossingAndEveryPauseOnce(t *testing.T) {
	var c changes
	r := newRig(t, "100", 500*tron.SunPerTRX, hotwallet.Config{LowUSDT: units("50"), OnChange: c.record})
	if c.names() != "wallet.recovered USDT (initial)" {
		t.Fatalf("first reading: %s", c.names())
	}
	c.got = nil
	r.sim.SetBalance(hot, units("30"))
	r.refresh(t)
	r.refresh(t)
	if ok, _ := r.mon.MaySend(context.Background(), withdrawal("40")); ok {
		t.Fatal("40 of 30 let through")
	}
	if ok, _ := r.mon.MaySend(context.Background(), withdrawal("40")); ok { // asked again: no news
		t.Fatal("40 of 30 let through")
	}
	if c.names() != "wallet.low USDT, sending.paused" {
		t.Fatalf("after draining: %s", c.names())
	}
	paused := c.got[1].Status
	if paused.Sending != hotwallet.SendingPaused || paused.PausedReason == nil || !strings.Contains(*paused.PausedReason, "USDT short") {
		t.Fatalf("the pause's status %+v", paused)
	}
	c.got = nil
	r.sim.SetBalance(hot, units("80"))
	r.refresh(t) // the funds are there: sending resumes at the reading
	if c.names() != "wallet.recovered USDT, sending.resumed" {
		t.Fatalf("after funding: %s", c.names())
	}
	if ok, why := r.mon.MaySend(context.Background(), withdrawal("40")); !ok {
		t.Fatalf("refused after funding: %s", why)
	}
	if len(c.got) != 2 {
		t.Fatalf("after sending: %s", c.names())
	}
}

// A withdrawal held back and never asked about again (cancelled) stops
// pausing sending after two intervals: a resumption is told.
func TestAStaleRefusalResumesSending(t *testing.T) {
	var c changes
	r := newRig(t, "10", 500*tron.SunPerTRX, hotwallet.Config{OnChange: c.record})
	if ok, _ := r.mon.MaySend(context.Background(), withdrawal("20")); ok {
		t.Fatal("20 of 10 let through")
	}
	r.clock.t = r.clock.t.Add(3 * time.Minute)
	r.refresh(t)
	if c.names() != "sending.paused, sending.resumed" {
		t.Fatalf("changes %s", c.names())
	}
}

// A big withdrawal held back keeps sending paused while smaller ones go:
// no flapping between paused and resumed at every visit.
func TestSmallerWithdrawalsGoingDoNotFlapThePause(t *testing.T) {
	var c changes
	r := newRig(t, "100", 500*tron.SunPerTRX, hotwallet.Config{OnChange: c.record})
	for range 3 {
		if ok, _ := r.mon.MaySend(context.Background(), aggregate.Withdrawal{ID: "big", Amount: aggregate.MustParseAmount(aggregate.USDT, "1000")}); ok {
			t.Fatal("1000 of 100 let through")
		}
		if ok, why := r.mon.MaySend(context.Background(), aggregate.Withdrawal{ID: "small", Amount: aggregate.MustParseAmount(aggregate.USDT, "1")}); !ok {
			t.Fatalf("1 of 100 refused: %s", why)
		}
	}
	if c.names() != "sending.paused" {
		t.Fatalf("changes %s", c.names())
	}
}

// Transfers in flight (built, not yet ended) are spoken for at every
// reading: a reading at the head does not show a transfer still in the
// pool, so without them the gate would let the same USDT go twice.
func TestInFlightTransfersAreSpokenForAcrossReadings(t *testing.T) {
	var inFlight []aggregate.Withdrawal
	r := newRig(t, "100", 500*tron.SunPerTRX, hotwallet.Config{InFlight: func(time.Time) []aggregate.Withdrawal { return inFlight }})
	first := aggregate.Withdrawal{ID: "first", Amount: aggregate.MustParseAmount(aggregate.USDT, "80")}
	if ok, why := r.mon.MaySend(context.Background(), first); !ok {
		t.Fatalf("80 of 100 refused: %s", why)
	}
	// The next reading comes before the projection shows it in flight, and
	// before its transfer reached the chain.
	r.refresh(t)
	second := aggregate.Withdrawal{ID: "second", Amount: aggregate.MustParseAmount(aggregate.USDT, "80")}
	if ok, _ := r.mon.MaySend(context.Background(), second); ok {
		t.Fatal("the same 80 USDT let through twice")
	}
	// Now it is in flight (broadcast, not yet in a block).
	first.State = aggregate.StateBroadcast
	inFlight = []aggregate.Withdrawal{first}
	r.refresh(t)
	r.refresh(t)
	ok, why := r.mon.MaySend(context.Background(), second)
	if ok || !strings.Contains(why, "not spoken for") {
		t.Fatalf("80 more with 80 of 100 in flight: ok=%v %q", ok, why)
	}
	if s := r.mon.Status(); s.Committed != "80" {
		t.Fatalf("committed %q, want 80", s.Committed)
	}
	// It landed and ended: the reading shows 20 left, nothing in flight.
	r.sim.SetBalance(hot, units("20"))
	inFlight = nil
	r.refresh(t)
	if ok, _ := r.mon.MaySend(context.Background(), second); ok {
		t.Fatal("80 of 20 let through")
	}
	r.sim.SetBalance(hot, units("120"))
	r.refresh(t)
	if ok, why := r.mon.MaySend(context.Background(), second); !ok {
		t.Fatalf("80 of 120 refused: %s", why)
	}
}
