package sagas_test

import (
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// A busy account costs its new events, not its history: once a Repo has
// folded it, a load reads only what was appended since (by this process or
// another), and gives the same state as folding the whole log.
func TestAccountLoadFoldsOnlyTheEventsAfterItsSnapshot(t *testing.T) {
	r := newBCRig(t)
	for i := range 50 {
		if _, _, err := r.repo.UpdateAccount(r.ctx, bcAccount, aggregate.Credit{
			Account: bcAccount, CreditID: bcOpID(900 + i), Amount: bcUSDT("1"), At: r.clock.Now(),
		}); err != nil {
			t.Fatal(err)
		}
	}
	reads := sagas.CountReads(r.repo)
	a, _, err := r.repo.Account(r.ctx, bcAccount)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("a load right after this process's own append read %d events, want 0", n)
	}
	// Another process appends two events; this one folds just those two.
	other := r.newRepo()
	for _, id := range []string{"other-1", "other-2"} {
		if _, _, err := other.UpdateAccount(r.ctx, bcAccount, aggregate.Credit{
			Account: bcAccount, CreditID: id, Amount: bcUSDT("2"), At: r.clock.Now(),
		}); err != nil {
			t.Fatal(err)
		}
	}
	a2, pos, err := r.repo.Account(r.ctx, bcAccount)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("after another process's 2 appends a load read %d events, want 2", n)
	}
	fresh, fpos, err := r.newRepo().Account(r.ctx, bcAccount)
	if err != nil {
		t.Fatal(err)
	}
	if pos != fpos || a2.Version != fresh.Version || a2.Available().String() != fresh.Available().String() ||
		a2.Credited().String() != fresh.Credited().String() {
		t.Fatalf("from the snapshot: v%d available %s at %+v; folded from the log: v%d available %s at %+v",
			a2.Version, a2.Available(), pos, fresh.Version, fresh.Available(), fpos)
	}
	if want := a.Available().Add(bcUSDT("4")); a2.Available().String() != want.String() {
		t.Fatalf("available %s, want %s", a2.Available(), want)
	}
}

// A snapshot the log does not pass through is never folded on: the
// account is read from its first event and the planted state is gone.
func TestASnapshotTheLogDoesNotPassThroughIsDiscarded(t *testing.T) {
	r := newBCRig(t)
	_, pos, err := r.repo.Account(r.ctx, bcAccount)
	if err != nil {
		t.Fatal(err)
	}
	rich, _, err := r.repo.UpdateAccount(r.ctx, "acct-other", aggregate.Credit{
		Account: "acct-other", CreditID: "rich", Amount: bcUSDT("999999999"), At: r.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, at := range map[string]eventstore.Position{
		"a position on another subject": {Sequence: pos.Sequence + 1, Version: pos.Version},
		"a position past the end":       {Sequence: pos.Sequence + 100, Version: pos.Version + 5},
	} {
		sagas.PlantSnapshot(r.repo, eventlog.TypeAccount, bcAccount, rich, at)
		a, got, err := r.repo.Account(r.ctx, bcAccount)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != pos || a.Available().String() != bcUSDT(bcFunds).String() {
			t.Fatalf("%s: available %s at %+v, want %s at %+v", name, a.Available(), got, bcFunds, pos)
		}
	}
}

// The policy in force is read from a snapshot, yet a change made by
// another process is seen by the very next read: each read still looks at
// the policy subject's last event.
func TestPolicyChangeByAnotherProcessIsSeenByTheNextRead(t *testing.T) {
	r := newBCRig(t)
	setPolicy := func(name string) {
		p := aggregate.DefaultPolicy()
		p.Name = name
		if _, err := r.newRepo().SetPolicy(r.ctx, aggregate.SetPolicy{Policy: p, By: "op", At: r.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy("first")
	p0, err := r.repo.PolicyInForce(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p0.Name != "first" {
		t.Fatalf("policy %q, want first", p0.Name)
	}
	reads := sagas.CountReads(r.repo)
	for range 3 {
		if _, err := r.repo.PolicyInForce(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("unchanged policy: %d events read, want 0", n)
	}
	setPolicy("tighter")
	p1, err := r.repo.PolicyInForce(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Name != "tighter" || p1.Version == p0.Version {
		t.Fatalf("after another process set the policy: %q v%d, want %q after v%d", p1.Name, p1.Version, "tighter", p0.Version)
	}
}

// A command decided on a snapshot another process has overtaken is not
// appended on it: the append's expectation fails, and the command is
// decided again on the log, so nothing the other process wrote is lost.
func TestACommandOnAnOvertakenSnapshotIsDecidedAgainOnTheLog(t *testing.T) {
	r := newBCRig(t)
	if _, _, err := r.repo.Account(r.ctx, bcAccount); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.newRepo().UpdateAccount(r.ctx, bcAccount, aggregate.Credit{
		Account: bcAccount, CreditID: "elsewhere", Amount: bcUSDT("7"), At: r.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	a, _, err := r.repo.UpdateAccount(r.ctx, bcAccount, aggregate.Credit{
		Account: bcAccount, CreditID: "here", Amount: bcUSDT("5"), At: r.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh, _, err := r.newRepo().Account(r.ctx, bcAccount)
	if err != nil {
		t.Fatal(err)
	}
	want := bcUSDT(bcFunds).Add(bcUSDT("12"))
	if a.Available().String() != want.String() || fresh.Available().String() != want.String() || a.Version != fresh.Version {
		t.Fatalf("after a credit elsewhere and one here: returned %s v%d, log %s v%d, want %s",
			a.Available(), a.Version, fresh.Available(), fresh.Version, want)
	}
}
