package sagas_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

func TestNewWorkerRefusesIncompleteConfig(t *testing.T) {
	r := newBCRig(t)
	ok := sagas.WorkerConfig{ID: "w", Repo: r.repo, Node: r.sim, Signer: r.signer, Work: r.work}
	if _, err := sagas.NewWorker(ok); err != nil {
		t.Fatalf("minimal config refused: %v", err)
	}
	for name, mutate := range map[string]func(*sagas.WorkerConfig){
		"no id":          func(c *sagas.WorkerConfig) { c.ID = "" },
		"no repo":        func(c *sagas.WorkerConfig) { c.Repo = nil },
		"no node":        func(c *sagas.WorkerConfig) { c.Node = nil },
		"no signer":      func(c *sagas.WorkerConfig) { c.Signer = nil },
		"no work source": func(c *sagas.WorkerConfig) { c.Work = nil },
		"window > 24h":   func(c *sagas.WorkerConfig) { c.ExpirationWindow = 25 * time.Hour },
		"negative lease": func(c *sagas.WorkerConfig) { c.Lease = -time.Second },
	} {
		cfg := ok
		mutate(&cfg)
		if _, err := sagas.NewWorker(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// bcWaitFor blocks until an event of type typ is in the withdrawal's
// stream, reading the log as it grows (no polling, no sleeps).
func bcWaitFor(t *testing.T, ctx context.Context, store *eventstore.Store, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	found := errors.New("found")
	err := store.Subscribe(ctx, 1, eventlog.TypeWithdrawal, func(rec eventstore.Record) error {
		if rec.Key.ID == id && rec.Type == typ {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("waiting for %s on %s: %v", typ, id, err)
	}
}

// bcWaitForIntent waits for the first send's intent of id to be in the
// log (a broadcasting event, or a signature carrying it).
func bcWaitForIntent(t *testing.T, ctx context.Context, store *eventstore.Store, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	found := errors.New("found")
	err := store.Subscribe(ctx, 1, eventlog.TypeWithdrawal, func(rec eventstore.Record) error {
		if rec.Key.ID != id || (rec.Type != aggregate.EventBroadcasting && rec.Type != aggregate.EventSigned) {
			return nil
		}
		e, err := aggregate.DecodeWithdrawalEvent(rec.Type, rec.Payload)
		if err != nil {
			return err
		}
		if s, ok := e.(aggregate.Signed); ok && s.Send == 0 {
			return nil
		}
		return found
	})
	if !errors.Is(err, found) {
		t.Fatalf("waiting for a send intent on %s: %v", id, err)
	}
}

// Run waits for Notify (the poll interval here is an hour) and drives the
// work it finds; it returns nil when its context ends.
func TestRunDrivesNotifiedWorkAndStopsOnCancel(t *testing.T) {
	r := newBCRig(t)
	sent := make(chan struct{})
	var once sync.Once
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) {
		c.PollInterval = time.Hour
		// Not a crash: the hook tells the test the node accepted the send.
		c.Crash = func(p sagas.CrashPoint, _ string) bool {
			if p == sagas.CrashAfterAccepted {
				once.Do(func() { close(sent) })
			}
			return false
		}
	})
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()

	id := r.ready(bcAddress("run"), "19.99")
	w1.Notify()
	store := r.repo.Store()
	bcWaitForIntent(t, r.ctx, store, id)
	select {
	case <-sent:
	case <-r.ctx.Done():
		t.Fatal("the send was never accepted")
	}
	r.sim.Advance(tron.DefaultSolidityLag + 2)
	w1.Notify()
	bcWaitFor(t, r.ctx, store, id, aggregate.EventConfirmed)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.paidOnce(id)
}

// A crash hook firing inside Run ends Run with ErrCrashed.
func TestRunEndsWithErrCrashed(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("run-crash"), "2")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(sagas.CrashAfterBuild, "") })
	if err := w1.Run(r.ctx); !errors.Is(err, sagas.ErrCrashed) {
		t.Fatalf("Run: %v", err)
	}
	if w := r.load(id); w.State != aggregate.StateSigning {
		t.Fatalf("%s", w.State)
	}
}

// countingWork counts the listings a worker asks of its WorkSource.
type countingWork struct {
	sagas.WorkSource
	ready, inflight atomic.Int32
}

func (c *countingWork) Ready(now time.Time) []aggregate.Withdrawal {
	c.ready.Add(1)
	return c.WorkSource.Ready(now)
}

func (c *countingWork) InFlightWithdrawals(now time.Time) []aggregate.Withdrawal {
	c.inflight.Add(1)
	return c.WorkSource.InFlightWithdrawals(now)
}

// Candidates listed once but left over for lack of a slot are taken as
// drives end, without listing the queues again: twelve ready withdrawals,
// two slots, no notification and an hour's poll — the listing at the
// start (and the one after the first block scan) send all twelve.
func TestRunTakesLeftoverCandidatesWithoutListingAgain(t *testing.T) {
	r := newBCRig(t)
	ids := r.readyMany("leftover", 12)
	work := &countingWork{WorkSource: r.work}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Inflight = 2; c.PollInterval = time.Hour; c.Work = work })
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	store := r.repo.Store()
	for _, id := range ids {
		bcWaitForIntent(t, r.ctx, store, id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n, m := work.ready.Load(), work.inflight.Load(); n > 2 || m > 2 {
		t.Fatalf("the queues were listed %d and %d times, want at most twice", n, m)
	}
}

// Run follows the solid blocks beside its drives, not in their way: while
// the block scan hangs on a slow node, new work is still listed and sent.
func TestRunSendsNewWorkWhileTheBlockScanWaitsOnTheNode(t *testing.T) {
	r := newBCRig(t)
	gate := make(chan struct{})
	var gated atomic.Bool
	r.node.Before = func(ctx context.Context, m tron.NodeMethod) error {
		if m != tron.NodeSolidHead || !gated.Load() {
			return nil
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.PollInterval = time.Hour; c.NodeTimeout = time.Minute })
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	defer close(gate)
	store := r.repo.Store()
	first := r.ready(bcAddress("scan-first"), "3")
	w1.Notify()
	bcWaitForIntent(t, r.ctx, store, first) // now watched: the scan will ask
	gated.Store(true)
	r.sim.Advance(1)
	w1.Notify() // the scan starts and hangs
	second := r.ready(bcAddress("scan-second"), "4")
	w1.Notify()
	bcWaitForIntent(t, r.ctx, store, second)
}
