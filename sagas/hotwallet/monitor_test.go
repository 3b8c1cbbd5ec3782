package hotwallet_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

var hot = tron.MustParseAddress("TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy")

const feeLimit = 100 * tron.SunPerTRX

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type rig struct {
	sim   *tron.SimNode
	mon   *hotwallet.Monitor
	clock *clock
	lows  []string
}

func newRig(t *testing.T, usdt string, trxSun int64, cfg hotwallet.Config) *rig {
	t.Helper()
	r := &rig{sim: tron.NewSimNode(tron.SimConfig{Instant: true}), clock: &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}
	r.sim.SetBalance(hot, units(usdt))
	r.sim.SetTRX(hot, trxSun)
	cfg.Reader, cfg.Address, cfg.Clock, cfg.Interval = r.sim, hot, r.clock.now, time.Minute
	if cfg.FeeLimit == 0 {
		cfg.FeeLimit = feeLimit
	}
	cfg.OnLow = func(asset string, low bool, balance string) {
		r.lows = append(r.lows, map[bool]string{true: "low ", false: "ok "}[low]+asset+" "+balance)
	}
	m, err := hotwallet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.mon = m
	r.refresh(t)
	return r
}

func (r *rig) refresh(t *testing.T) {
	t.Helper()
	if err := r.mon.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func units(usdt string) *big.Int {
	v, err := tron.ParseUnits(usdt, tron.USDTDecimals)
	if err != nil {
		panic(err)
	}
	return v
}

func withdrawal(amount string) aggregate.Withdrawal {
	return aggregate.Withdrawal{Amount: aggregate.MustParseAmount(aggregate.USDT, amount)}
}

func TestStatusShowsTheWalletAsTheNodeHoldsIt(t *testing.T) {
	r := newRig(t, "1234.5", 500*tron.SunPerTRX, hotwallet.Config{})
	s := r.mon.Status()
	if s.Address != hot.String() || s.USDT != "1234.5" || s.TRX != "500" || s.Sending != hotwallet.SendingActive || s.PausedReason != nil {
		t.Fatalf("status %+v", s)
	}
	// The worst case: a first payment to an address, energy burnt at 210 sun.
	if s.TransferEnergy != tron.SimTransferEnergyNewHolder || s.TransferFee == "0" {
		t.Fatalf("transfer cost: %d energy, %s TRX", s.TransferEnergy, s.TransferFee)
	}
	if !r.clock.t.Equal(s.ReadAt) {
		t.Fatalf("read at %v, clock %v", s.ReadAt, r.clock.t)
	}
}

func TestGatePausesWhenUSDTIsShortAndResumesWhenFunded(t *testing.T) {
	r := newRig(t, "50", 500*tron.SunPerTRX, hotwallet.Config{})
	if ok, why := r.mon.MaySend(context.Background(), withdrawal("40")); !ok {
		t.Fatalf("40 of 50 refused: %s", why)
	}
	// The 40 let through counts until the next reading: 10 are left.
	ok, why := r.mon.MaySend(context.Background(), withdrawal("20"))
	if ok || !strings.Contains(why, "USDT short") {
		t.Fatalf("20 more after 40 of 50: ok=%v %q", ok, why)
	}
	s := r.mon.Status()
	if s.Sending != hotwallet.SendingPaused || s.PausedReason == nil || !strings.Contains(*s.PausedReason, "USDT short") {
		t.Fatalf("status while refused: %+v", s)
	}
	// Funds arrive: the next reading lets the waiting withdrawal through.
	if err := r.sim.Fund(hot, units("100"), 0); err != nil {
		t.Fatal(err)
	}
	r.refresh(t)
	if s := r.mon.Status(); s.Sending != hotwallet.SendingActive {
		t.Fatalf("still paused after funding: %+v", s)
	}
	if ok, why := r.mon.MaySend(context.Background(), withdrawal("20")); !ok {
		t.Fatalf("refused after funding: %s", why)
	}
}

func TestGatePausesWhenTRXCannotPayTheFee(t *testing.T) {
	r := newRig(t, "1000", 1*tron.SunPerTRX, hotwallet.Config{})
	ok, why := r.mon.MaySend(context.Background(), withdrawal("1"))
	if ok || !strings.Contains(why, "TRX short") {
		t.Fatalf("1 TRX for a ~27 TRX fee: ok=%v %q", ok, why)
	}
	// Paused even with no withdrawal waiting: no transfer could be paid.
	if s := r.mon.Status(); s.Sending != hotwallet.SendingPaused {
		t.Fatalf("status %+v", s)
	}
	if err := r.sim.Fund(hot, nil, 100*tron.SunPerTRX); err != nil {
		t.Fatal(err)
	}
	r.refresh(t)
	if ok, why := r.mon.MaySend(context.Background(), withdrawal("1")); !ok {
		t.Fatalf("refused after TRX arrived: %s", why)
	}
}

func TestGatePausesWhenTheFeeLimitIsBelowTheEnergyFee(t *testing.T) {
	r := newRig(t, "1000", 1000*tron.SunPerTRX, hotwallet.Config{FeeLimit: 10 * tron.SunPerTRX})
	ok, why := r.mon.MaySend(context.Background(), withdrawal("1"))
	if ok || !strings.Contains(why, "fee limit") {
		t.Fatalf("10 TRX fee limit: ok=%v %q", ok, why)
	}
}

func TestARefusalNoOneRepeatsAgesOut(t *testing.T) {
	r := newRig(t, "10", 500*tron.SunPerTRX, hotwallet.Config{})
	if ok, _ := r.mon.MaySend(context.Background(), withdrawal("20")); ok {
		t.Fatal("20 of 10 let through")
	}
	if !r.mon.Paused() {
		t.Fatal("not paused after a refusal")
	}
	r.clock.t = r.clock.t.Add(3 * time.Minute) // the withdrawal was cancelled: nobody asks again
	if r.mon.Paused() {
		t.Fatal("still paused three intervals after the last refusal")
	}
}

func TestLowMarksNotifyOnCrossingOnly(t *testing.T) {
	r := newRig(t, "100", 500*tron.SunPerTRX, hotwallet.Config{LowUSDT: units("50"), LowTRX: 200 * tron.SunPerTRX})
	if len(r.lows) != 0 {
		t.Fatalf("notified above the marks: %v", r.lows)
	}
	r.sim.SetBalance(hot, units("30"))
	r.refresh(t)
	r.refresh(t) // still low: no second notification
	if len(r.lows) != 1 || r.lows[0] != "low USDT 30" || !r.mon.Low("USDT") || r.mon.Low("TRX") {
		t.Fatalf("after draining USDT: %v", r.lows)
	}
	r.sim.SetTRX(hot, 150*tron.SunPerTRX)
	r.sim.SetBalance(hot, units("80"))
	r.refresh(t)
	if len(r.lows) != 3 || r.lows[1] != "ok USDT 80" || r.lows[2] != "low TRX 150" {
		t.Fatalf("after refilling USDT and draining TRX: %v", r.lows)
	}
}

func TestUnreadWalletRefusesAndSaysWhy(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	m, err := hotwallet.New(hotwallet.Config{Reader: sim, Address: hot, FeeLimit: feeLimit})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := m.MaySend(context.Background(), withdrawal("1")); ok || !strings.Contains(why, "not been read") {
		t.Fatalf("unread wallet: ok=%v %q", ok, why)
	}
}
