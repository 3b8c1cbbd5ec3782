package nodetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

// A lagging backend that is not behind, and a balancer over two of them,
// must be indistinguishable from the node itself.
func TestLaggingBackendZeroBehindSatisfiesTheNodeContract(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: &nodetest.Lagging{Sim: sim}, Sim: sim}
	})
}

func TestBalancedOverUpToDateBackendsSatisfiesTheNodeContract(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: nodetest.NewBalanced(nil, sim, &nodetest.Lagging{Sim: sim}), Sim: sim}
	})
}

func TestLaggingBackendHonestlyDoesNotKnowWhatItHasNotSeen(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{Instant: true, StartNumber: 100})
	sim.Advance(100)
	lag := &nodetest.Lagging{Sim: sim, Behind: 60}
	solid := sim.CurrentSolidHead()
	if h, err := lag.SolidHead(ctx); err != nil || h.Number != solid.Number-60 {
		t.Fatalf("lagging solid head %+v, %v; want %d", h, err, solid.Number-60)
	}
	if h, err := lag.Head(ctx); err != nil || h.Number != sim.CurrentHead().Number-60 {
		t.Fatalf("lagging head %+v, %v", h, err)
	}
	if _, err := lag.SolidBlockByNum(ctx, solid.Number); !errors.Is(err, tron.ErrBlockNotSolid) {
		t.Fatalf("block the backend lacks: %v, want ErrBlockNotSolid", err)
	}
	if infos, err := lag.SolidTxInfosByBlockNum(ctx, solid.Number); err != nil || len(infos) != 0 {
		t.Fatalf("receipts of a block the backend lacks: %+v, %v; want [] as java-tron answers", infos, err)
	}
	if infos, err := lag.TxInfosByBlockNum(ctx, sim.CurrentHead().Number); err != nil || len(infos) != 0 {
		t.Fatalf("receipts of a head block the backend lacks: %+v, %v; want []", infos, err)
	}
	if b, err := lag.SolidBlockByNum(ctx, solid.Number-60); err != nil || b.Header.Number != solid.Number-60 {
		t.Fatalf("block it has: %+v, %v", b, err)
	}
}

func TestBalancedRoutesEachCallAsTheRouteSays(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	sim.Advance(100)
	lag := &nodetest.Lagging{Sim: sim, Behind: 60}
	b := nodetest.NewBalanced(nodetest.ByMethod(0, map[tron.NodeMethod]int{tron.NodeSolidBlockByNum: 1}), sim, lag)
	if h, err := b.SolidHead(ctx); err != nil || h != sim.CurrentSolidHead() {
		t.Fatalf("solid head from the up-to-date backend: %+v, %v", h, err)
	}
	if _, err := b.SolidBlockByNum(ctx, sim.CurrentSolidHead().Number); !errors.Is(err, tron.ErrBlockNotSolid) {
		t.Fatalf("block from the lagging backend: %v", err)
	}
	want := []nodetest.Routed{{1, tron.NodeSolidHead, 0}, {2, tron.NodeSolidBlockByNum, 1}}
	got := b.Calls()
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
	rr := nodetest.NewBalanced(nil, sim, lag, sim)
	for range 4 {
		_, _ = rr.Head(ctx)
	}
	var backends []int
	for _, c := range rr.Calls() {
		backends = append(backends, c.Backend)
	}
	if len(backends) != 4 || backends[0] != 0 || backends[1] != 1 || backends[2] != 2 || backends[3] != 0 {
		t.Fatalf("round robin went %v", backends)
	}
}

func TestSeededRouteIsReproducibleAndFollowsItsWeights(t *testing.T) {
	trace := func(seed uint64) []int {
		route := nodetest.Seeded(seed, 0.8, 0.2)
		out := make([]int, 1000)
		for i := range out {
			out[i] = route(i+1, tron.NodeSolidLookup)
		}
		return out
	}
	a, b, c := trace(7), trace(7), trace(8)
	lagging, differs := 0, false
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 routed call %d to %d then %d", i+1, a[i], b[i])
		}
		lagging += a[i]
		differs = differs || a[i] != c[i]
	}
	if lagging < 150 || lagging > 250 || !differs {
		t.Fatalf("%d of 1000 calls to the 0.2 backend; another seed differs: %v", lagging, differs)
	}
}
