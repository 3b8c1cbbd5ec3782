package tron

import (
	"math/big"
	"testing"
)

func TestCostOfUsesStakeAndFreeBandwidthBeforeBurning(t *testing.T) {
	prices := ChainPrices{EnergySun: 210, BandwidthSun: 1000, MemoSun: 1_000_000}
	bare := Account{Exists: true, BalanceSun: 100 * SunPerTRX, FreeNetLimit: 600}
	if c := CostOf(bare, prices, SimTransferEnergy, TransferBandwidth, false); c.EnergyBurn != SimTransferEnergy*210 || c.BandwidthSun != 0 || c.TotalSun() != 13_499_850 {
		t.Fatalf("no stake, free bandwidth left: %+v (total %d), want 13.49985 TRX", c, c.TotalSun())
	}
	spent := bare
	spent.FreeNetUsed = 400
	if c := CostOf(spent, prices, SimTransferEnergy, TransferBandwidth, true); c.BandwidthSun != TransferBandwidth*1000 || c.MemoSun != 1_000_000 ||
		c.TotalSun() != SimTransferEnergy*210+TransferBandwidth*1000+1_000_000 {
		t.Fatalf("free bandwidth spent, with a memo: %+v", c)
	}
	staked := Account{Exists: true, EnergyLimit: 100_000, EnergyUsed: 50_000, NetLimit: 1_000, FreeNetLimit: 600, FreeNetUsed: 600}
	if c := CostOf(staked, prices, SimTransferEnergy, TransferBandwidth, false); c.EnergyBurn != (SimTransferEnergy-50_000)*210 || c.BandwidthSun != 0 {
		t.Fatalf("half the energy staked, bandwidth staked: %+v", c)
	}
}

func TestParseUnitsTakesPlainDecimalsOnly(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "12": 12_000_000, "12.5": 12_500_000, "0.000001": 1, ".5": 500_000} {
		if got, err := ParseUnits(in, 6); err != nil || got.Cmp(big.NewInt(want)) != 0 {
			t.Errorf("%q = %v, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "1.", "-1", "+1", "1e6", "0.0000001", "1,5", " 1", "0x10"} {
		if got, err := ParseUnits(in, 6); err == nil {
			t.Errorf("%q = %v, want refused", in, got)
		}
	}
	for in, want := range map[int64]string{0: "0", 1: "0.000001", 12_500_000: "12.5", 3_000_000: "3", -1_500_000: "-1.5"} {
		if got := FormatUnits(big.NewInt(in), 6); got != want {
			t.Errorf("FormatUnits(%d) = %q, want %q", in, got, want)
		}
	}
}
