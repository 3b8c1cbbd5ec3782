package nodetest

import (
	"context"
	"fmt"
	"math/big"

	"github.com/weir-payouts/weir/tron"
)

// The wallet and chain reads (tron.WalletReader, tron.ChainReader) of the
// test backends, so the hot-wallet monitor and the audit work behind them
// as they do behind a hosted endpoint.

var (
	_ tron.WalletReader = (*Balanced)(nil)
	_ tron.ChainReader  = (*Balanced)(nil)
	_ tron.WalletReader = (*Lagging)(nil)
	_ tron.ChainReader  = (*Lagging)(nil)
)

// walletOf is backend n as a WalletReader, or ErrNotSupported.
func walletOf(n tron.Node) (tron.WalletReader, error) {
	if w, ok := n.(tron.WalletReader); ok {
		return w, nil
	}
	return nil, fmt.Errorf("nodetest: %w: %T is no WalletReader", tron.ErrNotSupported, n)
}

func chainOf(n tron.Node) (tron.ChainReader, error) {
	if c, ok := n.(tron.ChainReader); ok {
		return c, nil
	}
	return nil, fmt.Errorf("nodetest: %w: %T is no ChainReader", tron.ErrNotSupported, n)
}

// TokenBalance goes, like every call, to the backend the route picks
// (counted under tron.NodeTokenBalance); a backend that reads no wallets
// answers tron.ErrNotSupported.
func (b *Balanced) TokenBalance(ctx context.Context, contract, owner tron.Address) (*big.Int, error) {
	w, err := walletOf(b.pick(tron.NodeTokenBalance))
	if err != nil {
		return nil, err
	}
	return w.TokenBalance(ctx, contract, owner)
}

func (b *Balanced) Account(ctx context.Context, a tron.Address) (tron.Account, error) {
	w, err := walletOf(b.pick(tron.NodeAccount))
	if err != nil {
		return tron.Account{}, err
	}
	return w.Account(ctx, a)
}

func (b *Balanced) EstimateTransferEnergy(ctx context.Context, owner, contract, to tron.Address, amount *big.Int) (int64, error) {
	w, err := walletOf(b.pick(tron.NodeEstimateTransferEnergy))
	if err != nil {
		return 0, err
	}
	return w.EstimateTransferEnergy(ctx, owner, contract, to, amount)
}

func (b *Balanced) ChainPrices(ctx context.Context) (tron.ChainPrices, error) {
	w, err := walletOf(b.pick(tron.NodeChainPrices))
	if err != nil {
		return tron.ChainPrices{}, err
	}
	return w.ChainPrices(ctx)
}

func (b *Balanced) Genesis(ctx context.Context) (tron.BlockHeader, error) {
	c, err := chainOf(b.pick(tron.NodeGenesis))
	if err != nil {
		return tron.BlockHeader{}, err
	}
	return c.Genesis(ctx)
}

func (b *Balanced) SolidBlockTransfers(ctx context.Context, num int64) ([]tron.ChainTransfer, error) {
	c, err := chainOf(b.pick(tron.NodeSolidBlockTransfers))
	if err != nil {
		return nil, err
	}
	return c.SolidBlockTransfers(ctx, num)
}

// TokenBalance, Account, EstimateTransferEnergy and ChainPrices read the
// chain's state now: the simulator keeps no history of balances, so a
// lagging backend's wallet reads are Sim's (each consumes Sim's next
// lookup-channel fault, as on Sim). Block reads are where it lags.
func (l *Lagging) TokenBalance(ctx context.Context, contract, owner tron.Address) (*big.Int, error) {
	return l.Sim.TokenBalance(ctx, contract, owner)
}

func (l *Lagging) Account(ctx context.Context, a tron.Address) (tron.Account, error) {
	return l.Sim.Account(ctx, a)
}

func (l *Lagging) EstimateTransferEnergy(ctx context.Context, owner, contract, to tron.Address, amount *big.Int) (int64, error) {
	return l.Sim.EstimateTransferEnergy(ctx, owner, contract, to, amount)
}

func (l *Lagging) ChainPrices(ctx context.Context) (tron.ChainPrices, error) {
	return l.Sim.ChainPrices(ctx)
}

// Genesis is block 0, which every backend of a chain has.
func (l *Lagging) Genesis(ctx context.Context) (tron.BlockHeader, error) {
	return l.Sim.Genesis(ctx)
}

// SolidBlockTransfers of a block beyond the backend's solid head is
// tron.ErrBlockNotSolid (never an empty block), as SolidBlockByNum.
func (l *Lagging) SolidBlockTransfers(ctx context.Context, num int64) ([]tron.ChainTransfer, error) {
	txs, err := l.Sim.SolidBlockTransfers(ctx, num)
	if err == nil && num > l.solid() {
		return nil, fmt.Errorf("nodetest: lagging backend, solid head %d: transfers of block %d: %w", l.solid(), num, tron.ErrBlockNotSolid)
	}
	return txs, err
}
