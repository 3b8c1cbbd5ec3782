package tron

import (
	"context"
	"sync"
	"time"
)

// Limited is a Node that bounds the calls reaching Node: at most
// Concurrency at once and at most RPS started per second (evenly spaced,
// with a burst of one second's worth), so a hosted endpoint that
// rate-limits its clients is not hammered by pipelined workers. A call
// waiting for its turn gives up when its context ends, with the context's
// error, and never reaches Node. Safe for concurrent use; one Limited is
// shared by every worker that talks to the same node.
type Limited struct {
	node Node
	sem  chan struct{} // nil: no concurrency cap
	rps  float64       // 0: no rate cap

	mu    sync.Mutex
	next  time.Time // when the next call may start, once the burst is spent
	burst time.Duration
	now   func() time.Time
}

var _ Node = (*Limited)(nil)

// NewLimited wraps n. rps ≤ 0 means no rate cap, concurrency ≤ 0 no cap
// on calls at once; with neither, n's calls pass straight through.
func NewLimited(n Node, rps float64, concurrency int) *Limited {
	l := &Limited{node: n, rps: max(rps, 0), now: time.Now}
	if concurrency > 0 {
		l.sem = make(chan struct{}, concurrency)
	}
	if l.rps > 0 {
		l.burst = time.Second
	}
	return l
}

// acquire waits for a slot and for the call's turn under the rate; the
// returned func releases the slot.
func (l *Limited) acquire(ctx context.Context) (func(), error) {
	release := func() {}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
			release = func() { <-l.sem }
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if l.rps > 0 {
		l.mu.Lock()
		now := l.now()
		// The schedule may lag now by at most the burst: calls after a
		// quiet spell start at once, up to a second's worth.
		if floor := now.Add(-l.burst); l.next.Before(floor) {
			l.next = floor
		}
		at := l.next
		l.next = l.next.Add(time.Duration(float64(time.Second) / l.rps))
		l.mu.Unlock()
		if wait := at.Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				release()
				return nil, ctx.Err()
			}
		}
	}
	return release, nil
}

// limit runs one call under the limits.
func limit[T any](l *Limited, ctx context.Context, call func() (T, error)) (T, error) {
	release, err := l.acquire(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	defer release()
	return call()
}

func (l *Limited) Broadcast(ctx context.Context, tx SignedTx) (BroadcastResult, error) {
	return limit(l, ctx, func() (BroadcastResult, error) { return l.node.Broadcast(ctx, tx) })
}

func (l *Limited) Lookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return limit(l, ctx, func() (TxStatus, error) { return l.node.Lookup(ctx, txid) })
}

func (l *Limited) SolidLookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return limit(l, ctx, func() (TxStatus, error) { return l.node.SolidLookup(ctx, txid) })
}

func (l *Limited) Head(ctx context.Context) (BlockHeader, error) {
	return limit(l, ctx, func() (BlockHeader, error) { return l.node.Head(ctx) })
}

func (l *Limited) SolidHead(ctx context.Context) (BlockHeader, error) {
	return limit(l, ctx, func() (BlockHeader, error) { return l.node.SolidHead(ctx) })
}

func (l *Limited) RefBlock(ctx context.Context) (BlockHeader, error) {
	return limit(l, ctx, func() (BlockHeader, error) { return l.node.RefBlock(ctx) })
}

func (l *Limited) SolidBlockByNum(ctx context.Context, num int64) (Block, error) {
	return limit(l, ctx, func() (Block, error) { return l.node.SolidBlockByNum(ctx, num) })
}

func (l *Limited) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	return limit(l, ctx, func() ([]TxInfo, error) { return l.node.SolidTxInfosByBlockNum(ctx, num) })
}

func (l *Limited) TxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	return limit(l, ctx, func() ([]TxInfo, error) { return l.node.TxInfosByBlockNum(ctx, num) })
}

// Genesis and SolidBlockTransfers pass the chain reads (the audit's) on
// under the same budget when the node wrapped (under any Observed) is a
// ChainReader; otherwise they answer ErrNotSupported without spending it.
var _ ChainReader = (*Limited)(nil)

func (l *Limited) Genesis(ctx context.Context) (BlockHeader, error) {
	c, err := asChainReader(l.node)
	if err != nil {
		return BlockHeader{}, err
	}
	return limit(l, ctx, func() (BlockHeader, error) { return c.Genesis(ctx) })
}

func (l *Limited) SolidBlockTransfers(ctx context.Context, num int64) ([]ChainTransfer, error) {
	c, err := asChainReader(l.node)
	if err != nil {
		return nil, err
	}
	return limit(l, ctx, func() ([]ChainTransfer, error) { return c.SolidBlockTransfers(ctx, num) })
}
