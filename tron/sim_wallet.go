package tron

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"time"
)

// The simulated chain's prices and resource figures (mainnet's as of 2025):
//
//   - SimEnergyPriceSun: the committee's getEnergyFee, 210 sun per energy
//     (mainnet since 2024; wallet-cli's `chain params --key getEnergyFee`
//     answers 210).
//   - SimBandwidthPriceSun: getTransactionFee, 1,000 sun per byte.
//   - SimMemoFeeSun: getMemoFee, 1 TRX for a transaction whose
//     raw_data.data is set (committee proposal #80, in force 2022-12-16).
//   - SimFreeBandwidth: getFreeNetLimit, 600 bytes a day per account.
//   - SimTransferEnergy / SimTransferEnergyNewHolder: a USDT transfer uses
//     64,285 energy when the recipient holds USDT and 130,285 when it holds
//     none (a fresh storage slot), as USDT transfers on TronScan show
//     (≈13.5 TRX and ≈27.4 TRX when burnt at 210 sun).
//   - A transfer's bandwidth is its serialised size plus 64 bytes
//     (java-tron's MAX_RESULT_SIZE_IN_TX): ≈ 345 bytes for weir's transfers.
//
// Energy and bandwidth used recover linearly over ResourceWindow of chain
// time, as java-tron's do.
const (
	SimEnergyPriceSun          = 210
	SimBandwidthPriceSun       = 1_000
	SimMemoFeeSun              = 1_000_000
	SimFreeBandwidth           = 600
	SimTransferEnergy          = 64_285
	SimTransferEnergyNewHolder = 130_285
	resultAllowance            = 64
)

// ResourceWindow is the period over which used energy and bandwidth recover.
const ResourceWindow = 24 * time.Hour

// SimUnlimitedUSDT and SimUnlimitedTRX are what the simulated node reports
// for an address's token balance and TRX when they are not modelled
// (SimConfig.Balances or SimConfig.TRX nil): more than any test spends.
var SimUnlimitedUSDT = new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil) // 10^12 USDT

const SimUnlimitedTRX = int64(1) << 60 // sun

// simAccount is an address's staked resources and their use.
type simAccount struct {
	energyLimit, netLimit int64
	energy, net, free     usage
}

// usage is a resource amount used at a time; it recovers linearly over
// ResourceWindow.
type usage struct {
	used, at int64 // at: chain ms of the last use
}

func (u usage) now(t int64) int64 {
	w := ResourceWindow.Milliseconds()
	switch {
	case u.used <= 0 || t >= u.at+w:
		return 0
	case t <= u.at:
		return u.used
	}
	return u.used * (w - (t - u.at)) / w
}

func (u *usage) add(n, t int64) { u.used, u.at = u.now(t)+n, t }

// simCost is what including a transaction burnt and used.
type simCost struct {
	energyUsed   int64 // total energy the call used
	energyStaked int64 // of which from staked energy
	energyFee    int64 // sun burnt for the rest
	netUsage     int64 // bandwidth covered by staked or free bandwidth
	netFee       int64 // sun burnt for bandwidth
	memoFee      int64 // sun
}

func (c simCost) total() int64 { return c.energyFee + c.netFee + c.memoFee }

// account returns a's resource record. Caller holds s.mu.
func (s *SimNode) account(a Address) *simAccount {
	acct, ok := s.accounts[a]
	if !ok {
		acct = &simAccount{}
		s.accounts[a] = acct
	}
	return acct
}

// trxOf is a's spendable TRX (sun). Caller holds s.mu.
func (s *SimNode) trxOf(a Address) int64 {
	if s.trx == nil {
		return SimUnlimitedTRX
	}
	return s.trx[a]
}

// burn takes sun from a (at most what it has) and returns what was taken.
// Caller holds s.mu.
func (s *SimNode) burn(a Address, sun int64) int64 {
	if s.trx == nil || sun <= 0 {
		return max(sun, 0)
	}
	sun = min(sun, s.trx[a])
	s.trx[a] -= sun
	return sun
}

// holds reports whether a holds the token now (balances modelled) or ever
// received it (not modelled). Caller holds s.mu.
func (s *SimNode) holds(a Address) bool {
	if s.balances != nil {
		b, ok := s.balances[a]
		return ok && b.Sign() > 0
	}
	return s.held[a]
}

// transferEnergy is the energy a transfer to `to` uses now. Caller holds s.mu.
func (s *SimNode) transferEnergy(to Address) int64 {
	if s.holds(to) {
		return SimTransferEnergy
	}
	return SimTransferEnergyNewHolder
}

// bandwidthPayable reports whether owner can pay a transaction's bandwidth
// and memo fee now: java-tron refuses one it cannot (BANDWITH_ERROR) before
// it reaches a block. Caller holds s.mu.
func (s *SimNode) bandwidthPayable(owner Address, size int64, memo bool) bool {
	t := s.blockTime(s.head)
	acct := s.account(owner)
	need := int64(0)
	if acct.netLimit-acct.net.now(t) < size && SimFreeBandwidth-acct.free.now(t) < size {
		need = size * SimBandwidthPriceSun
	}
	if memo {
		need += SimMemoFeeSun
	}
	return s.trxOf(owner) >= need
}

// execute charges tx's resources at block time t and runs the transfer,
// setting its receipt. Bandwidth and the memo fee first (from stake, then
// the free allowance, else burnt), then energy: the call may use at most
// min(staked energy + TRX/price, fee_limit/price); staked energy is used
// first, the rest is burnt. A call that needs more runs out of energy
// (OUT_OF_ENERGY, everything up to the limit burnt, no tokens move); a
// transfer the sender's tokens do not cover reverts (REVERT, the energy
// burnt, no tokens move). Caller holds s.mu.
func (s *SimNode) execute(tx *simTx, t int64) {
	owner, tr := tx.transfer.Owner, tx.transfer
	acct := s.account(owner)
	var c simCost
	switch {
	case acct.netLimit-acct.net.now(t) >= tx.bandwidth:
		acct.net.add(tx.bandwidth, t)
		c.netUsage = tx.bandwidth
	case SimFreeBandwidth-acct.free.now(t) >= tx.bandwidth:
		acct.free.add(tx.bandwidth, t)
		c.netUsage = tx.bandwidth
	default:
		c.netFee = s.burn(owner, tx.bandwidth*SimBandwidthPriceSun)
	}
	if tx.memo {
		c.memoFee = s.burn(owner, SimMemoFeeSun)
	}

	need := s.transferEnergy(tr.To)
	staked := max(0, acct.energyLimit-acct.energy.now(t))
	limit := min(satAdd(staked, s.trxOf(owner)/s.energyPrice), tx.feeLimit/s.energyPrice)
	tx.receipt = ReceiptSuccess
	if tx.forced == ReceiptOutOfEnergy || need > limit {
		tx.receipt, tx.message = ReceiptOutOfEnergy, "Not enough energy for 'SSTORE' operation executing"
		need = limit
	}
	c.energyUsed = need
	c.energyStaked = min(staked, need)
	acct.energy.add(c.energyStaked, t)
	c.energyFee = s.burn(owner, (need-c.energyStaked)*s.energyPrice)
	tx.cost = c
	if tx.receipt != ReceiptSuccess {
		return
	}
	if tx.forced == ReceiptRevert {
		tx.receipt, tx.message = ReceiptRevert, "REVERT opcode executed"
		return
	}
	if tr.Contract != s.token {
		return
	}
	if s.balances != nil {
		from := s.balanceOf(owner)
		if from.Cmp(tr.Amount) < 0 {
			tx.receipt, tx.message = ReceiptRevert, "REVERT opcode executed: balance is not sufficient"
			return
		}
		from.Sub(from, tr.Amount)
		to := s.balanceOf(tr.To)
		to.Add(to, tr.Amount)
	}
	s.held[tr.To] = true
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ---- funding (never faulted) ---------------------------------------------

// Fund credits a with usdt token base units and trxSun sun (either may be
// nil/zero), turning the modelling of that asset on if it was off (every
// other address then starts at zero). It is what POST /sim/fund does.
func (s *SimNode) Fund(a Address, usdt *big.Int, trxSun int64) error {
	if usdt != nil && usdt.Sign() < 0 || trxSun < 0 {
		return fmt.Errorf("tron sim: funding %s with a negative amount", a)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	if usdt != nil && usdt.Sign() > 0 {
		if s.balances == nil {
			s.balances = map[Address]*big.Int{}
		}
		b := s.balanceOf(a)
		b.Add(b, usdt)
	}
	if trxSun > 0 {
		if s.trx == nil {
			s.trx = map[Address]int64{}
		}
		s.trx[a] = satAdd(s.trx[a], trxSun)
	}
	return nil
}

// SetTRX sets a's TRX (sun), turning TRX modelling on if it was off.
func (s *SimNode) SetTRX(a Address, sun int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	if s.trx == nil {
		s.trx = map[Address]int64{}
	}
	s.trx[a] = max(sun, 0)
}

// TRX returns a's modelled TRX in sun (SimUnlimitedTRX when not modelled).
func (s *SimNode) TRX(a Address) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trxOf(a)
}

// Stake gives a the energy and bandwidth that staked TRX would (per
// ResourceWindow), as if frozen or delegated to it.
func (s *SimNode) Stake(a Address, energy, bandwidth int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	acct := s.account(a)
	acct.energyLimit, acct.netLimit = max(energy, 0), max(bandwidth, 0)
}

// ---- WalletReader ----------------------------------------------------------

var (
	_ WalletReader = (*SimNode)(nil)
	_ ChainReader  = (*SimNode)(nil)
)

// TokenBalance is the modelled balance (SimUnlimitedUSDT when balances are
// not modelled); zero for a contract other than the simulated token.
func (s *SimNode) TokenBalance(ctx context.Context, contract, owner Address) (*big.Int, error) {
	if err := s.readCall(ctx, "balanceOf "+owner.String()); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	switch {
	case contract != s.token:
		return new(big.Int), nil
	case s.balances == nil:
		return new(big.Int).Set(SimUnlimitedUSDT), nil
	}
	b, ok := s.balances[owner]
	if !ok {
		return new(big.Int), nil
	}
	return new(big.Int).Set(b), nil
}

// Account reports a's TRX and resources at the head.
func (s *SimNode) Account(ctx context.Context, a Address) (Account, error) {
	if err := s.readCall(ctx, "account "+a.String()); err != nil {
		return Account{}, err
	}
	defer s.mu.Unlock()
	return s.accountAt(a), nil
}

// AccountState is Account without faults (for the façade and tests).
func (s *SimNode) AccountState(a Address) Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountAt(a)
}

// accountAt reads a at the head. Caller holds s.mu.
func (s *SimNode) accountAt(a Address) Account {
	t := s.blockTime(s.head)
	out := Account{Address: a, BalanceSun: s.trxOf(a), FreeNetLimit: SimFreeBandwidth}
	_, funded := s.trx[a]
	_, hasTokens := s.balances[a]
	acct, tracked := s.accounts[a]
	out.Exists = s.trx == nil || funded || hasTokens || tracked || s.held[a]
	if tracked {
		out.EnergyLimit, out.EnergyUsed = acct.energyLimit, acct.energy.now(t)
		out.NetLimit, out.NetUsed = acct.netLimit, acct.net.now(t)
		out.FreeNetUsed = acct.free.now(t)
	}
	if !out.Exists {
		return Account{Address: a}
	}
	return out
}

// EstimateTransferEnergy is the energy the transfer would use now; an
// error wrapping ErrCallFailed when the owner's modelled balance is short.
func (s *SimNode) EstimateTransferEnergy(ctx context.Context, owner, contract, to Address, amount *big.Int) (int64, error) {
	if amount == nil || amount.Sign() <= 0 {
		return 0, fmt.Errorf("%w: amount must be positive", ErrInvalidTransfer)
	}
	if err := s.readCall(ctx, "estimate energy"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if contract == s.token && s.balances != nil {
		if b, ok := s.balances[owner]; !ok || b.Cmp(amount) < 0 {
			return 0, fmt.Errorf("%w: REVERT opcode executed", ErrCallFailed)
		}
	}
	return s.transferEnergy(to), nil
}

// ChainPrices are the simulated chain's prices.
func (s *SimNode) ChainPrices(ctx context.Context) (ChainPrices, error) {
	if err := s.readCall(ctx, "chain parameters"); err != nil {
		return ChainPrices{}, err
	}
	defer s.mu.Unlock()
	return ChainPrices{EnergySun: s.energyPrice, BandwidthSun: SimBandwidthPriceSun, MemoSun: SimMemoFeeSun}, nil
}

// Genesis is block 0: a simulated chain starts at StartNumber, but its
// genesis exists, with an id derived from the seed (so two simulated
// chains with different seeds are different chains).
func (s *SimNode) Genesis(ctx context.Context) (BlockHeader, error) {
	if err := s.readCall(ctx, "genesis"); err != nil {
		return BlockHeader{}, err
	}
	defer s.mu.Unlock()
	return s.header(0), nil
}

// SolidBlockTransfers lists the transfers in solid block num, in inclusion
// order, with their receipts.
func (s *SimNode) SolidBlockTransfers(ctx context.Context, num int64) ([]ChainTransfer, error) {
	if err := s.readCall(ctx, fmt.Sprintf("transfers of block %d", num)); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := s.solidCheck(num); err != nil {
		return nil, err
	}
	txs := s.byBlock[num]
	out := make([]ChainTransfer, 0, len(txs))
	for _, tx := range txs {
		out = append(out, ChainTransfer{
			TxID: tx.txid, BlockNumber: tx.block, BlockTime: tx.blockTime,
			Contract: tx.transfer.Contract, From: tx.transfer.Owner, To: tx.transfer.To,
			Amount: new(big.Int).Set(tx.transfer.Amount), Receipt: tx.receipt,
		})
	}
	return out, nil
}

// readCall starts a read: the context, then the next lookup-channel fault.
// On success it returns with s.mu held.
func (s *SimNode) readCall(ctx context.Context, call string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.lookupFault(call); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}
