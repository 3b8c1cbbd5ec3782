package sagas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/sagas"
)

func watchPolicy(t *testing.T, in *sagas.Intake) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.WatchPolicy(ctx, nil) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("policy watcher: %v", err)
		}
	})
	pollUntil(t, "the policy watcher follows", func() bool { live, _ := sagas.PolicyWatch(in); return live })
}

func pollUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func policyNamed(t *testing.T, name string, approvers int) aggregate.Policy {
	t.Helper()
	p, err := aggregate.NewPolicy(name, []aggregate.Rule{{Name: name, Threshold: aggregate.Amount{}, Approvers: approvers}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantPolicyVersion(t *testing.T, in *sagas.Intake, version int) {
	t.Helper()
	p, err := in.Policy(context.Background())
	if err != nil || p.Version != version {
		t.Fatalf("policy in force: version %d (%v), want %d", p.Version, err, version)
	}
}

// Between policy events the intake answers the policy in force from memory;
// its own change is read back at once, another process's as soon as the
// watcher sees its event. Without the watcher every question reads the log.
func TestIntakePolicyCachedBetweenPolicyEvents(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	if _, err := s.intake.SetPolicy(ctx, policyNamed(t, "first", 1), "olivia"); err != nil {
		t.Fatal(err)
	}
	loads := sagas.CountLoadsOf(s.repo, eventlog.TypePolicy, eventlog.PolicyStreamID)
	wantPolicyVersion(t, s.intake, 1)
	wantPolicyVersion(t, s.intake, 1)
	if n := loads.Load(); n != 2 {
		t.Fatalf("%d policy reads for 2 questions without a watcher, want 2", n)
	}

	watchPolicy(t, s.intake)
	loads.Store(0)
	for range 5 {
		wantPolicyVersion(t, s.intake, 1)
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d policy reads for 5 questions with the watcher, want 1", n)
	}
	// Its own change: at once.
	if _, err := s.intake.SetPolicy(ctx, policyNamed(t, "second", 2), "olivia"); err != nil {
		t.Fatal(err)
	}
	wantPolicyVersion(t, s.intake, 2)
	w, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: "9011c7ca-0000-4000-8000-000000000001", Account: "acme", ToAddress: testAddr, Amount: jsonString("1"), By: "alice"})
	if err != nil && !errors.Is(err, aggregate.ErrInsufficientFunds) || w.RequiredApprovals != 2 {
		t.Fatalf("request under the new policy: %d approvals required, %v", w.RequiredApprovals, err)
	}
	// Another process's change: read as soon as the watcher has seen it
	// (a read may find it earlier, and is then dropped by its event).
	other := sagas.NewIntake(sagas.NewRepo(s.store), s.ledger, nil)
	if _, err := other.SetPolicy(ctx, policyNamed(t, "third", 3), "olivia"); err != nil {
		t.Fatal(err)
	}
	changed, err := s.store.LastSequence(ctx) // the policy event just appended
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the watcher sees the other process's change", func() bool { _, seen := sagas.PolicyWatch(s.intake); return seen >= changed })
	loads.Store(0)
	wantPolicyVersion(t, s.intake, 3)
	wantPolicyVersion(t, s.intake, 3)
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d policy reads for 2 questions after the change, want 1", n)
	}
}

// A read answered behind the last policy event the watcher saw (a lagging
// replica) is used for that question only, never kept.
func TestIntakePolicyCacheKeepsNoReadBehindTheWatcher(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	if _, err := s.intake.SetPolicy(ctx, policyNamed(t, "first", 1), "olivia"); err != nil {
		t.Fatal(err)
	}
	watchPolicy(t, s.intake)
	sagas.LagReads(s.repo, eventlog.TypePolicy, 1) // this process's reads miss the last policy event
	other := sagas.NewIntake(sagas.NewRepo(s.store), s.ledger, nil)
	if _, err := other.SetPolicy(ctx, policyNamed(t, "second", 2), "olivia"); err != nil {
		t.Fatal(err)
	}
	changed, err := s.store.LastSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the watcher sees the change", func() bool { _, seen := sagas.PolicyWatch(s.intake); return seen >= changed })
	loads := sagas.CountLoadsOf(s.repo, eventlog.TypePolicy, eventlog.PolicyStreamID)
	for range 3 {
		wantPolicyVersion(t, s.intake, 1) // what the lagging replica says
	}
	if n := loads.Load(); n != 3 {
		t.Fatalf("%d reads for 3 questions, want 3: a read behind the watcher was kept", n)
	}
}

// The intake's own policy change is what it answers next, even when its
// reads lag behind the change and the watcher has not delivered the event:
// a read answered by the replica at the old position is not kept in its
// place.
func TestIntakePolicyCacheReadsItsOwnWriteOverALaggingReplica(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	if _, err := s.intake.SetPolicy(ctx, policyNamed(t, "first", 1), "olivia"); err != nil {
		t.Fatal(err)
	}
	sagas.FollowPolicyUndelivered(s.intake)
	sagas.LagReads(s.repo, eventlog.TypePolicy, 1) // this process's reads miss the last policy event
	if _, err := s.intake.SetPolicy(ctx, policyNamed(t, "second", 2), "olivia"); err != nil {
		t.Fatal(err)
	}
	wantPolicyVersion(t, s.intake, 2)
	wantPolicyVersion(t, s.intake, 2)

	ch, err := s.intake.ProposePolicy(ctx, policyNamed(t, "third", 3), "olivia")
	if err != nil || ch.InForce.Version != 3 {
		t.Fatalf("proposal under a quorum of 1: in force v%d, %v", ch.InForce.Version, err)
	}
	wantPolicyVersion(t, s.intake, 3)
}
