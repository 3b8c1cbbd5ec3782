package hotwallet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// Sending states of Status.Sending (CONTRACT.md "Hot wallet and chain").
const (
	SendingActive = "active"
	SendingPaused = "paused"
)

// DefaultInterval is how often Run reads the wallet.
const DefaultInterval = 10 * time.Second

// Config configures a Monitor.
type Config struct {
	Reader tron.WalletReader
	// Address is the hot wallet; Contract the token it pays out
	// (default tron.USDTContract).
	Address, Contract tron.Address
	// FeeLimit is every envelope's fee_limit in sun: a transfer whose
	// energy costs more than this runs out of energy on chain.
	FeeLimit int64
	// Probe is the recipient of the energy estimate, an address that
	// holds no USDT, so the estimate is a transfer's worst case (a first
	// payment to an address costs about twice the energy). Default: an
	// address derived from nothing anyone holds a key for.
	Probe tron.Address
	// LowUSDT (base units) and LowTRX (sun) are the low marks: crossing
	// below one logs a warning and calls OnLow. Nil/zero: no mark.
	LowUSDT *big.Int
	LowTRX  int64
	// OnLow is told when a balance crosses below its low mark (low true)
	// and back above it (low false). asset is "USDT" or "TRX".
	OnLow func(asset string, low bool, balance string)
	// Interval between readings in Run. Default DefaultInterval.
	Interval time.Duration
	// Clock stamps readings and ages refusals. Default time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// defaultProbe is a well-formed address that no key is known for and
// that holds no USDT: 0x41 followed by "weir energy probe" and zeros.
var defaultProbe = tron.Address{tron.AddressPrefix, 'w', 'e', 'i', 'r', ' ', 'e', 'n', 'e', 'r', 'g', 'y', ' ', 'p', 'r', 'o', 'b', 'e'}

// Status is the monitor's view of the wallet: GET /v1/wallet.
type Status struct {
	Address   string `json:"address"`
	USDT      string `json:"usdt"`
	TRX       string `json:"trx"`
	Energy    int64  `json:"energy"`
	Bandwidth int64  `json:"bandwidth"`
	Sending   string `json:"sending"`
	// PausedReason says why sending is paused; null while active.
	PausedReason *string `json:"paused_reason"`
	// Additions beyond the contract's minimum.
	// TransferFee is the TRX the next transfer may burn (worst case:
	// to an address without USDT), TransferEnergy its energy.
	TransferFee    string    `json:"transfer_fee_trx"`
	TransferEnergy int64     `json:"transfer_energy"`
	ReadAt         time.Time `json:"read_at"`
	// ReadError is the last reading's failure, if it failed; the figures
	// are then the last good reading's.
	ReadError *string `json:"read_error"`
}

// Monitor reads the hot wallet and gates sending on what it holds. Safe
// for concurrent use.
type Monitor struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	read bool // a reading succeeded
	usdt *big.Int
	acct tron.Account
	cost tron.TransferCost
	// energyPrice in sun per energy, of the last reading.
	energyPrice int64
	readAt      time.Time
	readErr     error
	// spentUSDT and spentSun are what the gate let through since the last
	// reading: the reading does not show transfers still on their way.
	spentUSDT *big.Int
	spentSun  int64
	// refused is the amount the gate last refused, refusedAt when; sending
	// shows paused while refusals keep coming and the wallet still cannot
	// pay it.
	refused   *big.Int
	refusedAt time.Time
	low       map[string]bool
}

// New returns a Monitor; call Refresh (or Run) before relying on it.
func New(cfg Config) (*Monitor, error) {
	if cfg.Reader == nil {
		return nil, errors.New("hotwallet: no wallet reader")
	}
	if cfg.Address.IsZero() {
		return nil, errors.New("hotwallet: no hot-wallet address")
	}
	if cfg.FeeLimit <= 0 {
		return nil, errors.New("hotwallet: fee limit must be positive")
	}
	if cfg.Contract.IsZero() {
		cfg.Contract = tron.USDTContract
	}
	if cfg.Probe.IsZero() {
		cfg.Probe = defaultProbe
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Monitor{cfg: cfg, log: cfg.Logger, usdt: new(big.Int), spentUSDT: new(big.Int), low: map[string]bool{}}, nil
}

// Run reads the wallet every Interval until ctx ends. A failed reading is
// logged and keeps the last good one.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("reading the hot wallet failed; keeping the last reading", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh takes one reading: the token balance, the account, the prices
// and a worst-case transfer's energy.
func (m *Monitor) Refresh(ctx context.Context) error {
	err := m.refresh(ctx)
	m.mu.Lock()
	m.readErr = err
	m.mu.Unlock()
	return err
}

func (m *Monitor) refresh(ctx context.Context) error {
	r := m.cfg.Reader
	usdt, err := r.TokenBalance(ctx, m.cfg.Contract, m.cfg.Address)
	if err != nil {
		return fmt.Errorf("hotwallet: token balance: %w", err)
	}
	acct, err := r.Account(ctx, m.cfg.Address)
	if err != nil {
		return fmt.Errorf("hotwallet: account: %w", err)
	}
	prices, err := r.ChainPrices(ctx)
	if err != nil {
		return fmt.Errorf("hotwallet: chain prices: %w", err)
	}
	energy, err := m.estimate(ctx, usdt)
	if err != nil {
		return err
	}
	cost := tron.CostOf(acct, prices, energy, tron.TransferBandwidth, false)
	m.mu.Lock()
	m.read, m.usdt, m.acct, m.cost, m.energyPrice = true, usdt, acct, cost, prices.EnergySun
	m.readAt = m.cfg.Clock().UTC()
	m.spentUSDT, m.spentSun = new(big.Int), 0
	crossings := m.crossingsLocked()
	m.mu.Unlock()
	for _, c := range crossings {
		c()
	}
	return nil
}

// worstCaseEnergy is a USDT transfer's energy to an address that never
// held USDT on mainnet (and on the simulated node): the estimate when the
// wallet holds no token to estimate with.
const worstCaseEnergy = tron.SimTransferEnergyNewHolder

// estimate is the energy of a transfer of one base unit to the probe. A
// wallet without tokens cannot run the call; the worst case stands in.
func (m *Monitor) estimate(ctx context.Context, usdt *big.Int) (int64, error) {
	if usdt.Sign() <= 0 {
		return worstCaseEnergy, nil
	}
	e, err := m.cfg.Reader.EstimateTransferEnergy(ctx, m.cfg.Address, m.cfg.Contract, m.cfg.Probe, big.NewInt(1))
	if errors.Is(err, tron.ErrCallFailed) {
		return worstCaseEnergy, nil
	}
	if err != nil {
		return 0, fmt.Errorf("hotwallet: energy estimate: %w", err)
	}
	return max(e, 1), nil
}

// crossingsLocked compares the reading with the low marks and returns the
// notifications to make (outside the lock).
func (m *Monitor) crossingsLocked() []func() {
	var out []func()
	check := func(asset string, low bool, balance string) {
		if low == m.low[asset] {
			return
		}
		m.low[asset] = low
		if low {
			m.log.Warn("hot wallet below its low mark", "asset", asset, "balance", balance)
		} else {
			m.log.Info("hot wallet back above its low mark", "asset", asset, "balance", balance)
		}
		if m.cfg.OnLow != nil {
			f := m.cfg.OnLow
			out = append(out, func() { f(asset, low, balance) })
		}
	}
	if m.cfg.LowUSDT != nil && m.cfg.LowUSDT.Sign() > 0 {
		check("USDT", m.usdt.Cmp(m.cfg.LowUSDT) < 0, tron.FormatUnits(m.usdt, tron.USDTDecimals))
	}
	if m.cfg.LowTRX > 0 {
		check("TRX", m.acct.BalanceSun < m.cfg.LowTRX, tron.FormatUnits(big.NewInt(m.acct.BalanceSun), tron.TRXDecimals))
	}
	return out
}

// Low reports whether asset ("USDT", "TRX") is below its low mark.
func (m *Monitor) Low(asset string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.low[asset]
}

// MaySend is the worker's send gate: may w's transfer be built and sent
// now? When not, reason says why (the wallet is short of USDT, of TRX for
// the fee, or the fee limit is below what the transfer burns). A
// withdrawal let through is counted against the reading until the next
// one, so a burst cannot spend the same balance twice.
func (m *Monitor) MaySend(_ context.Context, w aggregate.Withdrawal) (bool, string) {
	amount := w.Amount.Units()
	m.mu.Lock()
	defer m.mu.Unlock()
	reason := m.shortLocked(amount)
	if reason != "" {
		m.refused, m.refusedAt = amount, m.cfg.Clock()
		return false, reason
	}
	m.refused = nil
	m.spentUSDT.Add(m.spentUSDT, amount)
	m.spentSun += m.cost.TotalSun()
	return true, ""
}

// shortLocked says why the wallet cannot pay a transfer of amount now, or
// "" when it can.
func (m *Monitor) shortLocked(amount *big.Int) string {
	if !m.read {
		why := "the hot wallet has not been read yet"
		if m.readErr != nil {
			why += ": " + m.readErr.Error()
		}
		return why
	}
	if need := m.cost.Energy * m.energyPrice; need > m.cfg.FeeLimit {
		return fmt.Sprintf("the fee limit %s TRX is below the %s TRX a transfer's energy may burn (raise --fee-limit or stake TRX for energy)",
			trx(m.cfg.FeeLimit), trx(need))
	}
	if have, fee := m.acct.BalanceSun-m.spentSun, m.cost.TotalSun(); have < fee {
		return fmt.Sprintf("TRX short: the hot wallet has %s TRX, a transfer may burn %s TRX in fees", trx(max(have, 0)), trx(fee))
	}
	have := new(big.Int).Sub(m.usdt, m.spentUSDT)
	if have.Cmp(amount) < 0 {
		if have.Sign() < 0 {
			have.SetInt64(0)
		}
		return fmt.Sprintf("USDT short: the hot wallet has %s USDT, the next withdrawal pays %s USDT",
			tron.FormatUnits(have, tron.USDTDecimals), tron.FormatUnits(amount, tron.USDTDecimals))
	}
	return ""
}

func trx(sun int64) string { return tron.FormatUnits(big.NewInt(sun), tron.TRXDecimals) }

// Status is the last reading and whether sending is paused. Sending is
// paused when the wallet cannot pay even a transfer's fee, or when the
// gate refused a withdrawal within the last two intervals and the last
// reading still could not pay it (a refusal no one repeats ages out).
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Status{
		Address: m.cfg.Address.String(), USDT: tron.FormatUnits(m.usdt, tron.USDTDecimals),
		TRX: trx(m.acct.BalanceSun), Energy: m.acct.Energy(), Bandwidth: m.acct.Bandwidth(),
		Sending: SendingActive, TransferFee: trx(m.cost.TotalSun()), TransferEnergy: m.cost.Energy, ReadAt: m.readAt,
	}
	if m.readErr != nil {
		e := m.readErr.Error()
		s.ReadError = &e
	}
	next := new(big.Int) // no withdrawal waiting: the fee alone
	if m.refused != nil && m.cfg.Clock().Sub(m.refusedAt) < 2*m.cfg.Interval {
		next = m.refused
	}
	reason := m.shortLocked(next)
	if reason != "" {
		s.Sending, s.PausedReason = SendingPaused, &reason
	}
	return s
}

// Paused reports whether sending is paused (Status().Sending).
func (m *Monitor) Paused() bool { return m.Status().Sending == SendingPaused }

// Balances are the last reading's USDT and TRX (as decimal numbers) for
// the weir_hot_wallet_balance metric.
func (m *Monitor) Balances() (usdt, trxBalance float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, _ := new(big.Float).SetInt(m.usdt).Float64()
	return u / 1e6, float64(m.acct.BalanceSun) / tron.SunPerTRX
}
