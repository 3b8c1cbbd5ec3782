package sagas_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// The live account state forgets a reservation once it is closed, so it
// cannot refuse a second one for the same withdrawal: the withdrawal's own
// stream does, read on the leader once the account's position is known. A
// reserving path that read the withdrawal before its reservation was made,
// recorded, and released (cancelled) comes back with its stale view and
// reserves nothing — no money is held twice.
func TestAStaleReservingPathCannotReserveTwice(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acct-a", "100")
	id := "c0ffee00-0000-4000-8000-0000000000a1"
	s.requestOnly(t, id, "acct-a", "40")
	stale, _, err := s.repo.Withdrawal(ctx, id)
	if err != nil || stale.Reserved {
		t.Fatalf("%+v %v", stale, err)
	}
	if w, err := s.ledger.Reserve(ctx, id); err != nil || !w.Reserved {
		t.Fatalf("reserve: %+v %v", w, err)
	}
	if _, err := s.intake.Cancel(ctx, id, "alice", false); err != nil {
		t.Fatal(err)
	}
	w, _, err := s.repo.Withdrawal(ctx, id)
	if err != nil || w.State != aggregate.StateRejected {
		t.Fatalf("%s %v", w.State, err)
	}
	if err := s.ledger.Finish(ctx, w); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := s.repo.Account(ctx, "acct-a"); !a.Compact() || len(a.Reservations()) != 0 {
		t.Fatalf("live state still holds %d reservations", len(a.Reservations()))
	}

	for _, requestedAt := range []time.Time{{}, stale.RequestedAt} {
		if err := s.repo.ReserveFor(ctx, id, aggregate.Reserve{Account: "acct-a", WithdrawalID: id, Amount: stale.Amount, At: time.Now().UTC(), RequestedAt: requestedAt}); err != nil {
			t.Fatalf("stale reserve: %v", err)
		}
	}
	// The ledger's own path with the stale view: it records nothing and
	// finds the withdrawal rejected.
	if got, err := s.ledger.Reserve(ctx, id); err != nil || got.State != aggregate.StateRejected {
		t.Fatalf("ledger reserve: %s reserved=%v %v", got.State, got.Reserved, err)
	}
	a, err := s.intake.Account(ctx, "acct-a")
	if err != nil || a.Available != "100" || a.Reserved != "0" {
		t.Fatalf("balance %+v %v", a, err)
	}
	recs, _, err := s.store.Load(ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: "acct-a"})
	if err != nil {
		t.Fatal(err)
	}
	reserved := 0
	for _, r := range recs {
		if r.Type == aggregate.EventAccountReserved {
			reserved++
		}
	}
	if reserved != 1 {
		t.Fatalf("%d reservations in the log, want 1", reserved)
	}
}
