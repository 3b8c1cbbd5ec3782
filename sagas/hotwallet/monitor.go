package hotwallet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"slices"
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
	// OnChange is told of every change a notification announces: a low
	// mark crossed either way, sending paused or resumed (Change). It is
	// called outside the monitor's lock, from Refresh or MaySend, and must
	// not block (queue the work).
	OnChange func(Change)
	// InFlight lists the withdrawals whose transfer is built and not yet
	// ended (the worker's WorkSource.InFlightWithdrawals). Their amounts
	// and fees are counted as spoken for at every reading, since a reading
	// at the node's head does not show transfers still on their way. Nil:
	// only what the gate let through since the last reading is counted.
	InFlight func(now time.Time) []aggregate.Withdrawal
	// Interval between readings in Run. Default DefaultInterval.
	Interval time.Duration
	// Clock stamps readings and ages refusals. Default time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Change types: what OnChange is told and what the notifications
// announce (CONTRACT.md addition: weir.notify.wallet.*).
const (
	ChangeLow       = aggregate.WebhookEventWalletLow       // an asset's balance went below its low mark
	ChangeRecovered = aggregate.WebhookEventWalletRecovered // and back to or above it
	ChangePaused    = aggregate.WebhookEventSendingPaused   // sending paused: the wallet cannot pay a held-back withdrawal
	ChangeResumed   = aggregate.WebhookEventSendingResumed  // sending resumed
)

// Change is one change of the wallet's state as this monitor saw it.
type Change struct {
	Type string
	// Asset is "USDT" or "TRX" for a low-mark change, "" for sending.
	Asset string
	// Mark is the low mark crossed (decimal), "" for sending.
	Mark string
	// Initial: the first reading's state of a low mark, not a crossing
	// this monitor saw (the previous state is in WEIR_NOTIFY, if anywhere).
	Initial bool
	// Status is the monitor's view right after the change.
	Status Status
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
	// Committed is the USDT spoken for by transfers built and not yet
	// ended (and let through since the reading), which the gate counts
	// against USDT.
	Committed string `json:"committed_usdt"`
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
	// readings counts successful readings.
	readings int
	// inFlightUSDT and inFlightSun are the withdrawals in flight at the
	// last reading (Config.InFlight) and their worst-case fees; let is
	// what the gate let through since, by withdrawal id, with the reading
	// it was let through after. The reading does not show transfers still
	// on their way.
	inFlightUSDT *big.Int
	inFlightSun  int64
	let          map[string]letThrough
	// refused holds the withdrawals the gate held back, by id: sending
	// shows paused while a refusal stands (asked again within two
	// intervals, and at least minRefusalAge) and the wallet still cannot
	// pay it.
	refused map[string]refusal
	low     map[string]bool
	// lowSeen: the asset's mark was compared at least once.
	lowSeen map[string]bool
	// paused is the sending state last told to OnChange.
	paused bool
}

type letThrough struct {
	amount  *big.Int
	sun     int64
	reading int
}

type refusal struct {
	amount *big.Int
	at     time.Time
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
	return &Monitor{cfg: cfg, log: cfg.Logger, usdt: new(big.Int), inFlightUSDT: new(big.Int),
		let: map[string]letThrough{}, refused: map[string]refusal{}, low: map[string]bool{}, lowSeen: map[string]bool{}}, nil
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
	now := m.cfg.Clock()
	var inFlight []aggregate.Withdrawal
	if m.cfg.InFlight != nil {
		inFlight = m.cfg.InFlight(now)
	}
	m.mu.Lock()
	m.read, m.usdt, m.acct, m.cost, m.energyPrice = true, usdt, acct, cost, prices.EnergySun
	m.readAt = now.UTC()
	m.readErr = nil
	m.readings++
	m.countInFlightLocked(inFlight)
	crossings := m.crossingsLocked()
	crossings = append(crossings, m.sendingLocked()...)
	m.mu.Unlock()
	for _, c := range crossings {
		c()
	}
	return nil
}

// countInFlightLocked counts what is spoken for at a new reading: the
// withdrawals in flight and, of those the gate let through, the ones
// that are not in flight yet and were let through after the previous
// reading (older ones had a whole interval to show up: ended, or never
// built). Without an InFlight source, nothing is carried over.
func (m *Monitor) countInFlightLocked(inFlight []aggregate.Withdrawal) {
	m.inFlightUSDT, m.inFlightSun = new(big.Int), 0
	if m.cfg.InFlight == nil {
		clear(m.let)
		return
	}
	seen := map[string]bool{}
	for _, w := range inFlight {
		if w.Route.IsInternal() || seen[w.ID] {
			continue
		}
		seen[w.ID] = true
		m.inFlightUSDT.Add(m.inFlightUSDT, w.Amount.Units())
		m.inFlightSun += m.cost.TotalSun()
	}
	for id, l := range m.let {
		if seen[id] || l.reading < m.readings-1 {
			delete(m.let, id)
		}
	}
}

// committedLocked is the USDT and sun spoken for beyond the reading.
func (m *Monitor) committedLocked() (*big.Int, int64) {
	usdt, sun := new(big.Int).Set(m.inFlightUSDT), m.inFlightSun
	for _, l := range m.let {
		usdt.Add(usdt, l.amount)
		sun += l.sun
	}
	return usdt, sun
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
	check := func(asset string, low bool, balance, mark string) {
		initial := !m.lowSeen[asset]
		m.lowSeen[asset] = true
		if low == m.low[asset] && !initial {
			return
		}
		changed := low != m.low[asset]
		m.low[asset] = low
		if changed {
			if low {
				m.log.Warn("hot wallet below its low mark", "asset", asset, "balance", balance, "mark", mark)
			} else {
				m.log.Info("hot wallet back above its low mark", "asset", asset, "balance", balance, "mark", mark)
			}
			if m.cfg.OnLow != nil {
				f := m.cfg.OnLow
				out = append(out, func() { f(asset, low, balance) })
			}
		}
		if m.cfg.OnChange != nil {
			c := Change{Type: ChangeRecovered, Asset: asset, Mark: mark, Initial: initial, Status: m.statusLocked()}
			if low {
				c.Type = ChangeLow
			}
			f := m.cfg.OnChange
			out = append(out, func() { f(c) })
		}
	}
	if m.cfg.LowUSDT != nil && m.cfg.LowUSDT.Sign() > 0 {
		check("USDT", m.usdt.Cmp(m.cfg.LowUSDT) < 0, tron.FormatUnits(m.usdt, tron.USDTDecimals), tron.FormatUnits(m.cfg.LowUSDT, tron.USDTDecimals))
	}
	if m.cfg.LowTRX > 0 {
		check("TRX", m.acct.BalanceSun < m.cfg.LowTRX, trx(m.acct.BalanceSun), trx(m.cfg.LowTRX))
	}
	return out
}

// sendingLocked compares whether sending is paused now with what
// OnChange was last told, and returns the notification to make (outside
// the lock). A monitor starts active: it announces a pause only when it
// holds a withdrawal back, and a resumption only after its own pause.
func (m *Monitor) sendingLocked() []func() {
	s := m.statusLocked()
	paused := s.Sending == SendingPaused
	if paused == m.paused || !m.read {
		return nil
	}
	m.paused = paused
	if paused {
		m.log.Warn("sending paused: the hot wallet cannot pay", "reason", *s.PausedReason)
	} else {
		m.log.Info("sending resumed")
	}
	if m.cfg.OnChange == nil {
		return nil
	}
	c := Change{Type: ChangeResumed, Status: s}
	if paused {
		c.Type = ChangePaused
	}
	f := m.cfg.OnChange
	return []func(){func() { f(c) }}
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
	reason := m.shortLocked(amount)
	if reason != "" {
		m.refused[w.ID] = refusal{amount: amount, at: m.cfg.Clock()}
	} else {
		delete(m.refused, w.ID)
		m.let[w.ID] = letThrough{amount: amount, sun: m.cost.TotalSun(), reading: m.readings}
	}
	changes := m.sendingLocked()
	m.mu.Unlock()
	for _, c := range changes {
		c()
	}
	return reason == "", reason
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
	committed, committedSun := m.committedLocked()
	if have, fee := m.acct.BalanceSun-committedSun, m.cost.TotalSun(); have < fee {
		return fmt.Sprintf("TRX short: the hot wallet has %s TRX%s, a transfer may burn %s TRX in fees", trx(max(have, 0)), spokenFor(committedSun > 0), trx(fee))
	}
	have := new(big.Int).Sub(m.usdt, committed)
	if have.Cmp(amount) < 0 {
		if have.Sign() < 0 {
			have.SetInt64(0)
		}
		return fmt.Sprintf("USDT short: the hot wallet has %s USDT%s, the next withdrawal pays %s USDT",
			tron.FormatUnits(have, tron.USDTDecimals), spokenFor(committed.Sign() > 0), tron.FormatUnits(amount, tron.USDTDecimals))
	}
	return ""
}

func spokenFor(some bool) string {
	if some {
		return " not spoken for by transfers in flight"
	}
	return ""
}

func trx(sun int64) string { return tron.FormatUnits(big.NewInt(sun), tron.TRXDecimals) }

// minRefusalAge is the least time a refusal stands without being asked
// again: workers ask at every visit (a second apart by default), so a
// short --wallet-interval must not age a standing refusal out between two
// visits (sending would flap between paused and resumed).
const minRefusalAge = 15 * time.Second

// Status is the last reading and whether sending is paused. Sending is
// paused when the wallet cannot pay even a transfer's fee, or when the
// gate refused a withdrawal within the last two intervals (at least
// minRefusalAge) and the last reading still could not pay it (a refusal
// no one repeats ages out).
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusLocked()
}

func (m *Monitor) statusLocked() Status {
	committed, _ := m.committedLocked()
	s := Status{
		Address: m.cfg.Address.String(), USDT: tron.FormatUnits(m.usdt, tron.USDTDecimals),
		TRX: trx(m.acct.BalanceSun), Energy: m.acct.Energy(), Bandwidth: m.acct.Bandwidth(),
		Sending: SendingActive, TransferFee: trx(m.cost.TotalSun()), TransferEnergy: m.cost.Energy, ReadAt: m.readAt,
		Committed: tron.FormatUnits(committed, tron.USDTDecimals),
	}
	if m.readErr != nil {
		e := m.readErr.Error()
		s.ReadError = &e
	}
	// A standing refusal the wallet still cannot pay pauses sending; with
	// none, only a wallet that cannot pay a transfer's fee does.
	reason := ""
	now := m.cfg.Clock()
	for _, id := range slices.Sorted(maps.Keys(m.refused)) {
		r := m.refused[id]
		if now.Sub(r.at) >= max(2*m.cfg.Interval, minRefusalAge) {
			delete(m.refused, id) // nobody asked again: cancelled, or sent by another process
			continue
		}
		if reason == "" {
			reason = m.shortLocked(r.amount)
		}
	}
	if reason == "" && len(m.refused) == 0 {
		reason = m.shortLocked(new(big.Int))
	}
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
