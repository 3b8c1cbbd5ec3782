package nodetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/weir-payouts/weir/tron"
)

// Route picks the backend (an index into Balanced.Backends) that serves the
// seq-th call (1-based, counted over all methods) of method m. It must be
// deterministic so a test means the same thing on every run.
type Route func(seq int, m tron.NodeMethod) int

// RoundRobin sends call seq to backend (seq-1) mod n.
func RoundRobin(n int) Route {
	return func(seq int, _ tron.NodeMethod) int { return (seq - 1) % n }
}

// Seeded sends each call to backend i with probability weights[i] (weights
// need not sum to 1), drawing from a generator seeded with seed: the same
// seed and call order give the same routes. The chaos tests' "sometimes a
// lagging backend answers".
func Seeded(seed uint64, weights ...float64) Route {
	var total float64
	for _, w := range weights {
		total += w
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x62616c616e636572)) // "balancer"
	return func(int, tron.NodeMethod) int {
		mu.Lock()
		r := rng.Float64() * total
		mu.Unlock()
		for i, w := range weights {
			if r < w {
				return i
			}
			r -= w
		}
		return len(weights) - 1
	}
}

// ByMethod sends each method to the backend the map names, the others to
// backend def.
func ByMethod(def int, routes map[tron.NodeMethod]int) Route {
	return func(_ int, m tron.NodeMethod) int {
		if b, ok := routes[m]; ok {
			return b
		}
		return def
	}
}

// Routed is one call as Balanced dispatched it.
type Routed struct {
	Seq     int
	Method  tron.NodeMethod
	Backend int
}

// Balanced is a tron.Node in front of several backends, as a hosted TRON
// endpoint is a load balancer over full nodes that lag each other: every
// call goes to the one backend Route picks, and nothing ties two calls to
// the same chain view. Safe for concurrent use.
type Balanced struct {
	Backends []tron.Node
	Route    Route // nil: RoundRobin

	mu    sync.Mutex
	calls []Routed
}

var _ tron.Node = (*Balanced)(nil)

// NewBalanced routes calls to backends with route (nil: round robin).
func NewBalanced(route Route, backends ...tron.Node) *Balanced {
	return &Balanced{Backends: backends, Route: route}
}

// Calls returns every call so far, in dispatch order.
func (b *Balanced) Calls() []Routed {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Routed(nil), b.calls...)
}

func (b *Balanced) pick(m tron.NodeMethod) tron.Node {
	b.mu.Lock()
	defer b.mu.Unlock()
	seq := len(b.calls) + 1
	route := b.Route
	if route == nil {
		route = RoundRobin(len(b.Backends))
	}
	i := route(seq, m)
	if i < 0 || i >= len(b.Backends) {
		panic(fmt.Sprintf("nodetest: route sent call %d (%s) to backend %d of %d", seq, m, i, len(b.Backends)))
	}
	b.calls = append(b.calls, Routed{Seq: seq, Method: m, Backend: i})
	return b.Backends[i]
}

func (b *Balanced) Broadcast(ctx context.Context, tx tron.SignedTx) (tron.BroadcastResult, error) {
	return b.pick(tron.NodeBroadcast).Broadcast(ctx, tx)
}

func (b *Balanced) Lookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	return b.pick(tron.NodeLookup).Lookup(ctx, txid)
}

func (b *Balanced) SolidLookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	return b.pick(tron.NodeSolidLookup).SolidLookup(ctx, txid)
}

func (b *Balanced) Head(ctx context.Context) (tron.BlockHeader, error) {
	return b.pick(tron.NodeHead).Head(ctx)
}

func (b *Balanced) SolidHead(ctx context.Context) (tron.BlockHeader, error) {
	return b.pick(tron.NodeSolidHead).SolidHead(ctx)
}

func (b *Balanced) RefBlock(ctx context.Context) (tron.BlockHeader, error) {
	return b.pick(tron.NodeRefBlock).RefBlock(ctx)
}

func (b *Balanced) SolidBlockByNum(ctx context.Context, num int64) (tron.Block, error) {
	return b.pick(tron.NodeSolidBlockByNum).SolidBlockByNum(ctx, num)
}

func (b *Balanced) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	return b.pick(tron.NodeSolidTxInfosByBlockNum).SolidTxInfosByBlockNum(ctx, num)
}

func (b *Balanced) TxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	return b.pick(tron.NodeTxInfosByBlockNum).TxInfosByBlockNum(ctx, num)
}

// Lagging is a backend that has seen Sim's chain only up to Behind blocks
// before its head, as a slow full node behind a load balancer has. It
// answers honestly from that view: transactions in blocks it has not seen
// are unknown, solid blocks it lacks are tron.ErrBlockNotSolid, and the
// receipts of a block it lacks (solid or head) [] (java-tron's answer for
// a block it does not have). Broadcasts
// go through to the chain (a backend relays them). Every call consumes the
// same faults of Sim as the call would on Sim itself.
type Lagging struct {
	Sim    *tron.SimNode
	Behind int64
}

var _ tron.Node = (*Lagging)(nil)

func (l *Lagging) Broadcast(ctx context.Context, tx tron.SignedTx) (tron.BroadcastResult, error) {
	return l.Sim.Broadcast(ctx, tx)
}

func (l *Lagging) head() int64  { return l.Sim.CurrentHead().Number - l.Behind }
func (l *Lagging) solid() int64 { return l.Sim.CurrentSolidHead().Number - l.Behind }

func (l *Lagging) Lookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	st, err := l.Sim.Lookup(ctx, txid)
	if err == nil && st.State == tron.TxIncluded && st.BlockNumber > l.head() {
		return tron.TxStatus{State: tron.TxUnknown}, nil
	}
	return st, err
}

func (l *Lagging) SolidLookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	st, err := l.Sim.SolidLookup(ctx, txid)
	if err == nil && st.State == tron.TxIncluded && st.BlockNumber > l.solid() {
		return tron.TxStatus{State: tron.TxUnknown}, nil
	}
	return st, err
}

func (l *Lagging) Head(ctx context.Context) (tron.BlockHeader, error) {
	if _, err := l.Sim.Head(ctx); err != nil {
		return tron.BlockHeader{}, err
	}
	return l.header(l.head())
}

func (l *Lagging) SolidHead(ctx context.Context) (tron.BlockHeader, error) {
	if _, err := l.Sim.SolidHead(ctx); err != nil {
		return tron.BlockHeader{}, err
	}
	return l.header(l.solid())
}

func (l *Lagging) RefBlock(ctx context.Context) (tron.BlockHeader, error) {
	if _, err := l.Sim.RefBlock(ctx); err != nil {
		return tron.BlockHeader{}, err
	}
	return l.header(l.solid())
}

func (l *Lagging) header(n int64) (tron.BlockHeader, error) {
	h, ok := l.Sim.Block(n)
	if !ok {
		return tron.BlockHeader{}, fmt.Errorf("nodetest: lagging backend has no block %d: %w", n, tron.ErrUnavailable)
	}
	return h, nil
}

func (l *Lagging) SolidBlockByNum(ctx context.Context, num int64) (tron.Block, error) {
	b, err := l.Sim.SolidBlockByNum(ctx, num)
	if err == nil && num > l.solid() {
		return tron.Block{}, fmt.Errorf("nodetest: lagging backend, solid head %d: block %d: %w", l.solid(), num, tron.ErrBlockNotSolid)
	}
	return b, err
}

func (l *Lagging) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	infos, err := l.Sim.SolidTxInfosByBlockNum(ctx, num)
	if err == nil && num > l.solid() {
		return []tron.TxInfo{}, nil
	}
	return infos, err
}

func (l *Lagging) TxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	infos, err := l.Sim.TxInfosByBlockNum(ctx, num)
	if err == nil && num > l.head() {
		return []tron.TxInfo{}, nil
	}
	return infos, err
}
