package sagas

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/tron"
)

// viewNode answers Head and RefBlock with numbers it is told, counting the
// calls; with gate set, every call waits for the gate first, having taken
// its number (and said so on entered, when set).
type viewNode struct {
	tron.Node
	mu         sync.Mutex
	head, ref  int64
	heads, rfs int
	gate       chan struct{}
	entered    chan struct{}
	fail       bool
}

func (n *viewNode) answer(num int64, count *int) (tron.BlockHeader, error) {
	n.mu.Lock()
	gate, entered := n.gate, n.entered
	n.mu.Unlock()
	if gate != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		<-gate
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	*count++
	if n.fail {
		return tron.BlockHeader{}, errors.New("node down")
	}
	return tron.BlockHeader{Number: num}, nil
}

func (n *viewNode) Head(context.Context) (tron.BlockHeader, error) {
	return n.answer(n.get(&n.head), &n.heads)
}

func (n *viewNode) RefBlock(context.Context) (tron.BlockHeader, error) {
	return n.answer(n.get(&n.ref), &n.rfs)
}

func (n *viewNode) get(p *int64) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return *p
}

func (n *viewNode) set(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

func noTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

// A round of Run reads the view in the background and serves the last
// round's meanwhile; a round that did not use it reads nothing; a failed
// background read makes the next user read for itself. Step's expire
// always makes the next user read and wait.
func TestChainViewOfARunRoundIsReadInTheBackground(t *testing.T) {
	ctx := t.Context()
	n := &viewNode{head: 10, ref: 5}
	v := &chainView{}
	h, r, err := v.tapos(ctx, n, noTimeout)
	if err != nil || h.Number != 10 || r.Number != 5 || n.heads != 1 || n.rfs != 1 {
		t.Fatalf("first read: %d %d %v, %d heads %d refs", h.Number, r.Number, err, n.heads, n.rfs)
	}
	// The chain moves; a new round of Run starts while the node is slow.
	gate := make(chan struct{})
	n.set(func() { n.head, n.ref, n.gate = 11, 6, gate })
	v.next(ctx, n, noTimeout)
	served := make(chan error, 1)
	go func() {
		var err error
		h, r, err = v.tapos(ctx, n, noTimeout) // does not wait for the gate
		served <- err
	}()
	select {
	case err = <-served:
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("a round's build waited for the background read")
	}
	if err != nil || h.Number != 10 || r.Number != 5 {
		t.Fatalf("during the background read: %d %d %v, want the last round's 10 5", h.Number, r.Number, err)
	}
	close(gate)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, r, _ = v.tapos(ctx, n, noTimeout)
		if h.Number == 11 && r.Number == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background read never landed: %d %d", h.Number, r.Number)
		}
		time.Sleep(time.Millisecond)
	}
	n.set(func() { n.gate = nil })
	// A round that used nothing: the next one reads nothing in the
	// background, and its first user reads and waits.
	v.next(ctx, n, noTimeout) // refreshes (the last round used it)
	waitRead(t, v)
	n.mu.Lock()
	before := n.heads
	n.mu.Unlock()
	v.next(ctx, n, noTimeout) // the last round did not use it: nothing read
	waitRead(t, v)
	n.mu.Lock()
	after := n.heads
	n.mu.Unlock()
	if after != before {
		t.Fatalf("a round after an unused one read the head %d times", after-before)
	}
	n.set(func() { n.head = 12 })
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 12 {
		t.Fatalf("first use after an unused round: %d %v, want a read of 12", h.Number, err)
	}
	// A failed background read: the next user reads for itself.
	n.set(func() { n.fail = true })
	v.next(ctx, n, noTimeout)
	waitRead(t, v)
	n.set(func() { n.fail = false; n.head = 13 })
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 13 {
		t.Fatalf("after a failed background read: %d %v, want a read of 13", h.Number, err)
	}
	// Step's expire: the next user reads.
	n.set(func() { n.head = 14 })
	v.expire()
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 14 {
		t.Fatalf("after expire: %d %v, want 14", h.Number, err)
	}
}

// waitRead waits for the view's background read to end.
func waitRead(t *testing.T, v *chainView) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.mu.Lock()
		reading := v.reading
		v.mu.Unlock()
		if !reading {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the background read never ended")
		}
		time.Sleep(time.Millisecond)
	}
}

// A background read that a newer synchronous read overtook does not move
// the head back: the view keeps the newer block.
func TestChainViewBackgroundReadNeverMovesTheHeadBack(t *testing.T) {
	ctx := t.Context()
	n := &viewNode{head: 10}
	v := &chainView{}
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 10 {
		t.Fatalf("first read: %d %v", h.Number, err)
	}
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	n.set(func() { n.head, n.gate, n.entered = 20, gate, entered })
	v.next(ctx, n, noTimeout) // the background read takes block 20, then waits
	<-entered
	// Meanwhile a round starts with expire and reads the head itself.
	n.set(func() { n.head, n.gate = 21, nil })
	v.expire()
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 21 {
		t.Fatalf("synchronous read: %d %v, want 21", h.Number, err)
	}
	close(gate)
	waitRead(t, v)
	if h, err := v.headNow(ctx, n, noTimeout); err != nil || h.Number != 21 || v.known().Number != 21 {
		t.Fatalf("after the background read of 20 ended: head %d (%v), known %d; want 21", h.Number, err, v.known().Number)
	}
}
