package tron

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// NodeMethod names a Node method, as Observed reports calls.
type NodeMethod string

// The Node methods.
const (
	NodeBroadcast              NodeMethod = "Broadcast"
	NodeLookup                 NodeMethod = "Lookup"
	NodeSolidLookup            NodeMethod = "SolidLookup"
	NodeHead                   NodeMethod = "Head"
	NodeSolidHead              NodeMethod = "SolidHead"
	NodeRefBlock               NodeMethod = "RefBlock"
	NodeSolidBlockByNum        NodeMethod = "SolidBlockByNum"
	NodeSolidTxInfosByBlockNum NodeMethod = "SolidTxInfosByBlockNum"
	NodeTxInfosByBlockNum      NodeMethod = "TxInfosByBlockNum"

	// WalletReader and ChainReader methods.
	NodeTokenBalance           NodeMethod = "TokenBalance"
	NodeAccount                NodeMethod = "Account"
	NodeEstimateTransferEnergy NodeMethod = "EstimateTransferEnergy"
	NodeChainPrices            NodeMethod = "ChainPrices"
	NodeGenesis                NodeMethod = "Genesis"
	NodeSolidBlockTransfers    NodeMethod = "SolidBlockTransfers"
)

// Observed is a Node that passes every call to Node unchanged and lets its
// owner watch: it counts calls per worker (WithWorker's id), runs Before
// ahead of each call and After once it returned. It wraps every method
// explicitly (no embedding), so a method added to Node cannot slip past it
// uncounted. The WalletReader and ChainReader methods pass on to Node when
// it implements them and otherwise answer ErrNotSupported. The demo and bench use it to show and pace node traffic; tests
// use it to prove a worker never reached the node. Safe for concurrent use;
// set the hooks before the first call.
type Observed struct {
	Node Node
	// Before, when set, runs before the call reaches Node; a non-nil error
	// is the call's answer and the call never reaches Node (a simulated
	// network round trip that the context cut short, say).
	Before func(ctx context.Context, m NodeMethod) error
	// After, when set, runs once Node answered (or Before refused).
	After func(ctx context.Context, m NodeMethod, err error)
	// Timed, when set, runs after After with how long the call took
	// (Before included): what node latency metrics need.
	Timed func(ctx context.Context, m NodeMethod, err error, took time.Duration)

	mu    sync.Mutex
	calls map[string]int
}

var (
	_ Node         = (*Observed)(nil)
	_ WalletReader = (*Observed)(nil)
	_ ChainReader  = (*Observed)(nil)
)

// NewObserved watches n with no hooks.
func NewObserved(n Node) *Observed { return &Observed{Node: n} }

// Calls returns how many calls the worker made (any method, including those
// Before refused).
func (o *Observed) Calls(worker string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[worker]
}

// Total returns how many calls were made by all workers.
func (o *Observed) Total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := 0
	for _, c := range o.calls {
		total += c
	}
	return total
}

func (o *Observed) before(ctx context.Context, m NodeMethod) error {
	o.mu.Lock()
	if o.calls == nil {
		o.calls = map[string]int{}
	}
	o.calls[WorkerFrom(ctx)]++
	o.mu.Unlock()
	if o.Before != nil {
		return o.Before(ctx, m)
	}
	return nil
}

func (o *Observed) after(ctx context.Context, m NodeMethod, err error, start time.Time) {
	if o.After != nil {
		o.After(ctx, m, err)
	}
	if o.Timed != nil {
		o.Timed(ctx, m, err, time.Since(start))
	}
}

// observe runs one call of m through the hooks.
func observe[T any](o *Observed, ctx context.Context, m NodeMethod, call func() (T, error)) (T, error) {
	var res T
	start := time.Now()
	err := o.before(ctx, m)
	if err == nil {
		res, err = call()
	}
	o.after(ctx, m, err, start)
	return res, err
}

func (o *Observed) Broadcast(ctx context.Context, tx SignedTx) (BroadcastResult, error) {
	return observe(o, ctx, NodeBroadcast, func() (BroadcastResult, error) { return o.Node.Broadcast(ctx, tx) })
}

func (o *Observed) Lookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return observe(o, ctx, NodeLookup, func() (TxStatus, error) { return o.Node.Lookup(ctx, txid) })
}

func (o *Observed) SolidLookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return observe(o, ctx, NodeSolidLookup, func() (TxStatus, error) { return o.Node.SolidLookup(ctx, txid) })
}

func (o *Observed) Head(ctx context.Context) (BlockHeader, error) {
	return observe(o, ctx, NodeHead, func() (BlockHeader, error) { return o.Node.Head(ctx) })
}

func (o *Observed) SolidHead(ctx context.Context) (BlockHeader, error) {
	return observe(o, ctx, NodeSolidHead, func() (BlockHeader, error) { return o.Node.SolidHead(ctx) })
}

func (o *Observed) RefBlock(ctx context.Context) (BlockHeader, error) {
	return observe(o, ctx, NodeRefBlock, func() (BlockHeader, error) { return o.Node.RefBlock(ctx) })
}

func (o *Observed) SolidBlockByNum(ctx context.Context, num int64) (Block, error) {
	return observe(o, ctx, NodeSolidBlockByNum, func() (Block, error) { return o.Node.SolidBlockByNum(ctx, num) })
}

func (o *Observed) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	return observe(o, ctx, NodeSolidTxInfosByBlockNum, func() ([]TxInfo, error) { return o.Node.SolidTxInfosByBlockNum(ctx, num) })
}

func (o *Observed) TxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	return observe(o, ctx, NodeTxInfosByBlockNum, func() ([]TxInfo, error) { return o.Node.TxInfosByBlockNum(ctx, num) })
}

func (o *Observed) wallet() (WalletReader, error) {
	if w, ok := o.Node.(WalletReader); ok {
		return w, nil
	}
	return nil, fmt.Errorf("%w: %T is no WalletReader", ErrNotSupported, o.Node)
}

func (o *Observed) TokenBalance(ctx context.Context, contract, owner Address) (*big.Int, error) {
	return observe(o, ctx, NodeTokenBalance, func() (*big.Int, error) {
		w, err := o.wallet()
		if err != nil {
			return nil, err
		}
		return w.TokenBalance(ctx, contract, owner)
	})
}

func (o *Observed) Account(ctx context.Context, a Address) (Account, error) {
	return observe(o, ctx, NodeAccount, func() (Account, error) {
		w, err := o.wallet()
		if err != nil {
			return Account{}, err
		}
		return w.Account(ctx, a)
	})
}

func (o *Observed) EstimateTransferEnergy(ctx context.Context, owner, contract, to Address, amount *big.Int) (int64, error) {
	return observe(o, ctx, NodeEstimateTransferEnergy, func() (int64, error) {
		w, err := o.wallet()
		if err != nil {
			return 0, err
		}
		return w.EstimateTransferEnergy(ctx, owner, contract, to, amount)
	})
}

func (o *Observed) ChainPrices(ctx context.Context) (ChainPrices, error) {
	return observe(o, ctx, NodeChainPrices, func() (ChainPrices, error) {
		w, err := o.wallet()
		if err != nil {
			return ChainPrices{}, err
		}
		return w.ChainPrices(ctx)
	})
}

func (o *Observed) Genesis(ctx context.Context) (BlockHeader, error) {
	return observe(o, ctx, NodeGenesis, func() (BlockHeader, error) {
		c, err := asChainReader(o.Node)
		if err != nil {
			return BlockHeader{}, err
		}
		return c.Genesis(ctx)
	})
}

func (o *Observed) SolidBlockTransfers(ctx context.Context, num int64) ([]ChainTransfer, error) {
	return observe(o, ctx, NodeSolidBlockTransfers, func() ([]ChainTransfer, error) {
		c, err := asChainReader(o.Node)
		if err != nil {
			return nil, err
		}
		return c.SolidBlockTransfers(ctx, num)
	})
}
