package tron

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// WalletReader is what weir needs to know of the hot wallet on chain: its
// token balance, its TRX and resources, what a transfer would cost, and the
// prices the chain charges. Implementations: *SimNode, tronhttp's client and
// *Observed (which passes the calls on when its Node implements them).
// It is separate from Node so Node stays the broadcast saga's contract.
//
// Every answer is a reading at the node's head (not a solid block): it can
// change with the next block and proves nothing about the past.
type WalletReader interface {
	// TokenBalance is contract.balanceOf(owner), read with
	// /wallet/triggerconstantcontract.
	TokenBalance(ctx context.Context, contract, owner Address) (*big.Int, error)
	// Account is the address's TRX and its energy and bandwidth
	// (/wallet/getaccount and /wallet/getaccountresource). An address the
	// chain has never seen is Account{Exists: false}, not an error.
	Account(ctx context.Context, a Address) (Account, error)
	// EstimateTransferEnergy is the energy transfer(to, amount) from owner
	// on contract would use now (triggerconstantcontract's energy_used). A
	// call that would fail (the owner's tokens are short, say) is an error
	// wrapping ErrCallFailed.
	EstimateTransferEnergy(ctx context.Context, owner, contract, to Address, amount *big.Int) (int64, error)
	// ChainPrices are the chain's current resource prices
	// (/wallet/getchainparameters).
	ChainPrices(ctx context.Context) (ChainPrices, error)
}

// ChainReader reads the chain itself: which chain it is, and the transfers
// its solid blocks hold, for reconciling the log against the chain.
// Implementations: *SimNode, tronhttp's client, *Observed.
type ChainReader interface {
	// Genesis is block 0. Its id names the chain: MainnetGenesisID on
	// mainnet; every simulated chain has its own (derived from its seed).
	Genesis(ctx context.Context) (BlockHeader, error)
	// SolidBlockTransfers decodes every TRC-20 transfer(to, amount) call in
	// solid block num (any sender, any contract), in block order, with its
	// receipt. ErrBlockNotSolid as SolidBlockByNum.
	SolidBlockTransfers(ctx context.Context, num int64) ([]ChainTransfer, error)
}

// MainnetGenesisID is the id of TRON mainnet's block 0.
const MainnetGenesisID = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc"

// ErrCallFailed: a constant (read-only) contract call did not succeed: it
// reverted or ran out of energy. The message says how.
var ErrCallFailed = errors.New("tron: contract call failed")

// ErrNotSupported: the node behind an Observed or a Limited does not
// implement the called interface.
var ErrNotSupported = errors.New("tron: node does not support this call")

// asChainReader is n's chain reads, for the wrappers (Observed, Limited) to
// pass them on. It looks through every wrapper down to the node that
// answers: a wrapper is a ChainReader whatever it wraps, so asking the
// wrapper itself would tell nothing, and the call would only be refused at
// the bottom, after every wrapper on the way had counted or spent it. A
// node that reads no chain is ErrNotSupported, naming it; otherwise n
// itself, so the call still goes through each wrapper.
func asChainReader(n Node) (ChainReader, error) {
	inner := innermost(n)
	if _, ok := inner.(ChainReader); !ok {
		return nil, fmt.Errorf("%w: %T is no ChainReader", ErrNotSupported, inner)
	}
	return n.(ChainReader), nil
}

// innermost is the node under every Observed and Limited wrapping n.
func innermost(n Node) Node {
	for {
		switch w := n.(type) {
		case *Observed:
			n = w.Node
		case *Limited:
			n = w.node
		default:
			return n
		}
	}
}

// Account is an address's TRX and resources as the node reports them.
// Energy and bandwidth recover linearly over 24 h of chain time; the Used
// figures are as of the node's head.
type Account struct {
	Address Address
	// Exists: the chain knows the address (it was activated by receiving TRX).
	Exists bool
	// BalanceSun is the spendable TRX, in sun (1 TRX = 1,000,000 sun).
	BalanceSun int64
	// EnergyLimit is the energy staked TRX (own or delegated) provides per
	// 24 h; EnergyUsed how much of it is used.
	EnergyLimit, EnergyUsed int64
	// FreeNetLimit is the free daily bandwidth (bytes); NetLimit the
	// bandwidth staked TRX provides.
	FreeNetLimit, FreeNetUsed int64
	NetLimit, NetUsed         int64
}

// Energy is the staked energy available now.
func (a Account) Energy() int64 { return max(0, a.EnergyLimit-a.EnergyUsed) }

// Bandwidth is the bandwidth (free and staked) available now.
func (a Account) Bandwidth() int64 {
	return max(0, a.FreeNetLimit-a.FreeNetUsed) + max(0, a.NetLimit-a.NetUsed)
}

// ChainPrices are the committee-set prices a transaction's resources are
// burnt at when the sender has no staked resources left.
type ChainPrices struct {
	EnergySun    int64 // getEnergyFee: sun per energy unit
	BandwidthSun int64 // getTransactionFee: sun per byte of bandwidth
	MemoSun      int64 // getMemoFee: sun burnt by a transaction carrying raw_data.data
}

// TransferCost is what one transfer would burn.
type TransferCost struct {
	Energy       int64 // energy the call uses
	EnergyBurn   int64 // sun burnt for the energy staking does not cover
	Bandwidth    int64 // bytes of bandwidth
	BandwidthSun int64 // sun burnt for the bandwidth staking and the free allowance do not cover
	MemoSun      int64
}

// TotalSun is the TRX (sun) the transfer burns.
func (c TransferCost) TotalSun() int64 { return c.EnergyBurn + c.BandwidthSun + c.MemoSun }

// TransferBandwidth is the bandwidth a USDT transfer as BuildTransfer
// makes it uses, rounded up: its serialised size with a signature (≈ 280
// bytes) plus the 64 bytes java-tron adds for the result.
const TransferBandwidth = 350

// CostOf says what a transaction of size bytes (TransferBandwidth for a
// USDT transfer) using energy would burn from acct at prices: staked
// energy first, the rest at EnergySun; free and staked bandwidth first,
// otherwise the whole size at BandwidthSun (java-tron never splits a
// transaction's bandwidth between staked and burnt).
func CostOf(acct Account, prices ChainPrices, energy, size int64, memo bool) TransferCost {
	c := TransferCost{Energy: energy, Bandwidth: size}
	c.EnergyBurn = max(0, energy-acct.Energy()) * prices.EnergySun
	if acct.NetLimit-acct.NetUsed < size && acct.FreeNetLimit-acct.FreeNetUsed < size {
		c.BandwidthSun = size * prices.BandwidthSun
	}
	if memo {
		c.MemoSun = prices.MemoSun
	}
	return c
}

// ChainTransfer is one TRC-20 transfer call found in a solid block.
type ChainTransfer struct {
	TxID        [32]byte
	BlockNumber int64
	BlockTime   int64
	Contract    Address
	From        Address
	To          Address
	Amount      *big.Int
	// Receipt is the block's contractRet for the transaction: tokens moved
	// only when ReceiptSuccess.
	Receipt ReceiptResult
}

// SolidTransfersFrom lists the transfers of contract sent by owner in solid
// blocks from..to (inclusive), in chain order, whatever their receipt. It
// stops at the first block the node cannot serve (the error wraps
// ErrBlockNotSolid when the range runs past the solid head).
func SolidTransfersFrom(ctx context.Context, r ChainReader, contract, owner Address, from, to int64) ([]ChainTransfer, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("tron: block range %d..%d is empty", from, to)
	}
	var out []ChainTransfer
	for n := from; n <= to; n++ {
		txs, err := r.SolidBlockTransfers(ctx, n)
		if err != nil {
			return out, fmt.Errorf("tron: transfers of block %d: %w", n, err)
		}
		for _, t := range txs {
			if t.From == owner && t.Contract == contract {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// Units of the amounts this package reads from people (flags, /sim/fund).
const (
	USDTDecimals = 6 // USDT base units per USDT: 10^6
	TRXDecimals  = 6 // sun per TRX: 10^6
	SunPerTRX    = 1_000_000
)

// ParseUnits reads a non-negative decimal amount ("12", "0.5") with at most
// decimals fraction digits into base units.
func ParseUnits(s string, decimals int) (*big.Int, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") || len(frac) > decimals || (dot && frac == "") {
		return nil, fmt.Errorf("tron: amount %q is not a decimal with at most %d fraction digits", s, decimals)
	}
	digits := whole + frac + strings.Repeat("0", decimals-len(frac))
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, fmt.Errorf("tron: amount %q is not a non-negative decimal", s)
		}
	}
	v, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("tron: amount %q is not a decimal", s)
	}
	return v, nil
}

// FormatUnits writes base units as a decimal with decimals fraction digits,
// trailing zeros dropped ("1.5", "3").
func FormatUnits(v *big.Int, decimals int) string {
	if v == nil {
		return "0"
	}
	neg := v.Sign() < 0
	s := new(big.Int).Abs(v).String()
	if len(s) <= decimals {
		s = strings.Repeat("0", decimals-len(s)+1) + s
	}
	whole, frac := s[:len(s)-decimals], strings.TrimRight(s[len(s)-decimals:], "0")
	if frac != "" {
		whole += "." + frac
	}
	if neg {
		return "-" + whole
	}
	return whole
}
