package tron

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// blockingNode answers Head only when told, and says when a call arrived.
type blockingNode struct {
	Node
	in      chan struct{}
	release chan struct{}
}

func (b *blockingNode) Head(ctx context.Context) (BlockHeader, error) {
	b.in <- struct{}{}
	<-b.release
	return BlockHeader{Number: 1}, nil
}

func TestLimitedLetsNoMoreThanItsConcurrencyReachTheNode(t *testing.T) {
	b := &blockingNode{in: make(chan struct{}, 8), release: make(chan struct{})}
	l := NewLimited(b, 0, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := l.Head(context.Background()); errs <- err }()
	}
	<-b.in
	<-b.in
	// Both slots are taken: a third call waits, and gives up with its
	// context without reaching the node.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Head(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("third call: %v", err)
	}
	if len(b.in) != 0 {
		t.Fatal("a third call reached the node")
	}
	close(b.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestLimitedSpacesCallsToItsRateAfterABurstOfOneSecond(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	l := NewLimited(sim, 10, 0)
	now := time.Unix(1_700_000_000, 0)
	l.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range 10 { // the burst: a second's worth at once
		if _, err := l.Head(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Head(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("the 11th call in the same instant did not have to wait: %v", err)
	}
	now = now.Add(2 * time.Second) // a quiet spell refills the burst
	if _, err := l.Head(ctx); err != nil {
		t.Fatalf("after a quiet spell: %v", err)
	}
}

// The chain reads go through the same budget when the node has them, and
// are refused without spending it when it has not.
func TestLimitedPassesChainReadsUnderItsBudget(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	sim.Advance(5)
	l := NewLimited(sim, 0, 1)
	g, err := l.Genesis(context.Background())
	if want, _ := sim.Genesis(context.Background()); err != nil || g != want {
		t.Fatalf("genesis %v %v, want %v", g, err, want)
	}
	if _, err := l.SolidBlockTransfers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	// The only slot is taken: a chain read waits for it, and gives up
	// with its context.
	l.sem <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.SolidBlockTransfers(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("over budget: %v", err)
	}
	<-l.sem

	bare := NewLimited(&blockingNode{}, 0, 1)
	if _, err := bare.Genesis(context.Background()); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("a node without chain reads: %v", err)
	}
	if len(bare.sem) != 0 {
		t.Fatal("an unsupported call took a slot")
	}
}

// An Observed is a ChainReader whatever it wraps: a Limited over one over a
// node without chain reads refuses them as it would over the bare node,
// naming that node, before taking a slot or reaching the Observed.
func TestLimitedRefusesChainReadsTheNodeUnderItsWrappersLacks(t *testing.T) {
	o := NewObserved(&blockingNode{})
	l := NewLimited(o, 0, 1)
	l.sem <- struct{}{} // a call that took a slot would wait for it
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Genesis(ctx)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "*tron.blockingNode") {
		t.Fatalf("genesis over Observed over a node without chain reads: %v, want ErrNotSupported naming the node", err)
	}
	if o.Total() != 0 {
		t.Fatalf("the refused call reached the Observed (%d calls)", o.Total())
	}
}
