package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
)

// startWalletMonitor watches the hot wallet through the node (one reading
// now, then every --wallet-interval): GET /v1/wallet, the metrics, the low
// marks and their notifications, and the workers' send gate. A first reading that fails is logged;
// sending stays paused until one succeeds.
func (e *engine) startWalletMonitor(ctx context.Context, reader tron.WalletReader, cfg serveConfig, hot tron.Address, log *slog.Logger) error {
	var lowUSDT *big.Int
	if cfg.WalletLowUSDT != "" {
		v, err := tron.ParseUnits(cfg.WalletLowUSDT, tron.USDTDecimals)
		if err != nil {
			return fmt.Errorf("--wallet-low-usdt: %w", err)
		}
		lowUSDT = v
	}
	var lowTRX int64
	if cfg.WalletLowTRX != "" {
		v, err := tron.ParseUnits(cfg.WalletLowTRX, tron.TRXDecimals)
		if err != nil || !v.IsInt64() {
			return fmt.Errorf("--wallet-low-trx %q: want a TRX amount", cfg.WalletLowTRX)
		}
		lowTRX = v.Int64()
	}
	m, err := hotwallet.New(hotwallet.Config{
		Reader: reader, Address: hot, FeeLimit: e.feeLimit, LowUSDT: lowUSDT, LowTRX: lowTRX,
		Interval: cfg.WalletInterval, Logger: log.With("saga", "hotwallet"),
		// Transfers built and not yet ended are spoken for at every reading.
		InFlight: e.projector.InFlightWithdrawals,
		// Low marks crossed, sending paused or resumed: WEIR_NOTIFY
		// (weir.notify.wallet.*) and the webhooks that asked for them.
		OnChange: e.walletNotes.Notify,
	})
	if err != nil {
		return err
	}
	if err := m.Refresh(ctx); err != nil {
		log.Warn("first reading of the hot wallet failed; sending waits for one", "err", err)
	}
	e.wallet = m
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = m.Run(ctx)
	}()
	return nil
}

// walletCollector reports weir_hot_wallet_balance{asset},
// weir_sending_paused and weir_hot_wallet_low{asset} from the monitor's
// last reading.
type walletCollector struct {
	m                    *hotwallet.Monitor
	balance, paused, low *prometheus.Desc
}

func newWalletCollector(m *hotwallet.Monitor) *walletCollector {
	return &walletCollector{m: m,
		balance: prometheus.NewDesc("weir_hot_wallet_balance",
			"The hot wallet's balance at the last reading, by asset (USDT, TRX).", []string{"asset"}, nil),
		paused: prometheus.NewDesc("weir_sending_paused",
			"1 while sending is paused because the hot wallet cannot pay the next transfer (GET /v1/wallet says why); withdrawals wait in approved.", nil, nil),
		low: prometheus.NewDesc("weir_hot_wallet_low",
			"1 while the asset's balance is below its --wallet-low-usdt / --wallet-low-trx mark.", []string{"asset"}, nil),
	}
}

func (c *walletCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.balance
	ch <- c.paused
	ch <- c.low
}

func (c *walletCollector) Collect(ch chan<- prometheus.Metric) {
	usdt, trx := c.m.Balances()
	ch <- prometheus.MustNewConstMetric(c.balance, prometheus.GaugeValue, usdt, "USDT")
	ch <- prometheus.MustNewConstMetric(c.balance, prometheus.GaugeValue, trx, "TRX")
	ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, boolGauge(c.m.Paused()))
	for _, a := range []string{"USDT", "TRX"} {
		ch <- prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, boolGauge(c.m.Low(a)), a)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
