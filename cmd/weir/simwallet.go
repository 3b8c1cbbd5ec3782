package main

import (
	"cmp"
	"fmt"
	"math/big"

	"github.com/weir-payouts/weir/tron"
)

// Defaults of --fee-limit and --sim-wallet-usdt/--sim-wallet-trx: 100 TRX
// is java-tron's customary fee limit (a USDT transfer burns 13.5–27.4 TRX
// at 210 sun per energy); a billion of each keeps every simulated scenario
// funded unless it drains the wallet on purpose.
const (
	defaultFeeLimitTRX = "100"
	defaultSimWallet   = "1000000000"
	// maxFeeLimitTRX is mainnet's getMaxFeeLimit: java-tron refuses a
	// larger fee_limit.
	maxFeeLimitTRX = 15_000
)

// feeLimitSun reads --fee-limit (TRX, up to 6 decimals) as sun.
func feeLimitSun(trx string) (int64, error) {
	v, err := tron.ParseUnits(cmp.Or(trx, defaultFeeLimitTRX), tron.TRXDecimals)
	if err != nil || v.Sign() <= 0 || v.Cmp(big.NewInt(maxFeeLimitTRX*tron.SunPerTRX)) > 0 {
		return 0, fmt.Errorf("--fee-limit %q: want a TRX amount above 0 and at most %d", trx, maxFeeLimitTRX)
	}
	return v.Int64(), nil
}

// fundSimWallet gives the hot wallet its --sim-wallet-usdt and
// --sim-wallet-trx on the simulated node.
func fundSimWallet(sim *tron.SimNode, wallet tron.Address, usdt, trx string) error {
	u, err := tron.ParseUnits(cmp.Or(usdt, defaultSimWallet), tron.USDTDecimals)
	if err != nil {
		return fmt.Errorf("--sim-wallet-usdt: %w", err)
	}
	t, err := tron.ParseUnits(cmp.Or(trx, defaultSimWallet), tron.TRXDecimals)
	if err != nil || !t.IsInt64() {
		return fmt.Errorf("--sim-wallet-trx %q: want a TRX amount", trx)
	}
	sim.SetBalance(wallet, u)
	sim.SetTRX(wallet, t.Int64())
	return nil
}
