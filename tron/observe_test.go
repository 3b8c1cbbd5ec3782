package tron_test

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"testing"

	"github.com/weir-payouts/weir/tron"
)

// Every Node method is counted for the worker that made it, and Before can
// keep a call from ever reaching the node.
func TestObservedCountsEveryMethodPerWorkerAndBeforeCanRefuse(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	sim.Advance(3)
	var seen []tron.NodeMethod
	var afterErrs int
	refuse := errors.New("no network")
	o := &tron.Observed{
		Node: sim,
		Before: func(ctx context.Context, m tron.NodeMethod) error {
			seen = append(seen, m)
			if tron.WorkerFrom(ctx) == "offline" {
				return refuse
			}
			return nil
		},
		After: func(_ context.Context, _ tron.NodeMethod, err error) {
			if err != nil {
				afterErrs++
			}
		},
	}
	ctx := tron.WithWorker(context.Background(), "w1")
	var txid [32]byte
	_, _ = o.Broadcast(ctx, tron.SignedTx{Raw: []byte{1}})
	_, _ = o.Lookup(ctx, txid)
	_, _ = o.SolidLookup(ctx, txid)
	_, _ = o.Head(ctx)
	_, _ = o.SolidHead(ctx)
	_, _ = o.RefBlock(ctx)
	_, _ = o.SolidBlockByNum(ctx, 1)
	_, _ = o.SolidTxInfosByBlockNum(ctx, 1)
	_, _ = o.TxInfosByBlockNum(ctx, 1)
	want := []tron.NodeMethod{tron.NodeBroadcast, tron.NodeLookup, tron.NodeSolidLookup, tron.NodeHead,
		tron.NodeSolidHead, tron.NodeRefBlock, tron.NodeSolidBlockByNum, tron.NodeSolidTxInfosByBlockNum, tron.NodeTxInfosByBlockNum}
	if len(seen) != len(want) {
		t.Fatalf("hooks saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("hooks saw %v, want %v", seen, want)
		}
	}
	if o.Calls("w1") != 9 || o.Calls("w2") != 0 {
		t.Fatalf("calls w1=%d w2=%d, want 9 and 0", o.Calls("w1"), o.Calls("w2"))
	}
	if len(sim.BroadcastLog()) != 1 {
		t.Fatalf("broadcast log %d, want the one call", len(sim.BroadcastLog()))
	}
	off := tron.WithWorker(context.Background(), "offline")
	if _, err := o.Broadcast(off, tron.SignedTx{Raw: []byte{1}}); !errors.Is(err, refuse) {
		t.Fatalf("refused broadcast: %v", err)
	}
	if len(sim.BroadcastLog()) != 1 || o.Calls("offline") != 1 || o.Total() != 10 || afterErrs != 1 {
		t.Fatalf("refused call reached the node (log %d) or was not counted (offline %d, total %d, after errs %d)",
			len(sim.BroadcastLog()), o.Calls("offline"), o.Total(), afterErrs)
	}
}

// The wallet and chain reads are watched like the Node methods, and pass
// to the wrapped node only when it has them.
func TestObservedWatchesWalletAndChainReads(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	var seen []tron.NodeMethod
	o := &tron.Observed{Node: sim, Before: func(_ context.Context, m tron.NodeMethod) error {
		seen = append(seen, m)
		return nil
	}}
	ctx := tron.WithWorker(context.Background(), "w1")
	a := tron.USDTContract
	_, _ = o.TokenBalance(ctx, a, a)
	_, _ = o.Account(ctx, a)
	_, _ = o.EstimateTransferEnergy(ctx, a, a, a, big.NewInt(1))
	_, _ = o.ChainPrices(ctx)
	_, _ = o.Genesis(ctx)
	_, _ = o.SolidBlockTransfers(ctx, 1)
	want := []tron.NodeMethod{tron.NodeTokenBalance, tron.NodeAccount, tron.NodeEstimateTransferEnergy,
		tron.NodeChainPrices, tron.NodeGenesis, tron.NodeSolidBlockTransfers}
	if !slices.Equal(seen, want) || o.Calls("w1") != len(want) {
		t.Fatalf("seen %v (%d calls), want %v", seen, o.Calls("w1"), want)
	}
	bare := tron.NewObserved(nodeOnly{sim})
	if _, err := bare.Account(ctx, a); !errors.Is(err, tron.ErrNotSupported) {
		t.Fatalf("account through a bare Node: %v, want ErrNotSupported", err)
	}
	if _, err := bare.Genesis(ctx); !errors.Is(err, tron.ErrNotSupported) {
		t.Fatalf("genesis through a bare Node: %v, want ErrNotSupported", err)
	}
}

// nodeOnly hides everything but the Node methods.
type nodeOnly struct{ tron.Node }
