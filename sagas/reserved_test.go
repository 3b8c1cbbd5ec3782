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

// inlineThenCancelled sets up what the ledger's consumer finds: kept and
// cancelled both requested through the intake (reserved inline, so this
// process remembers them), then cancelled ended by a cancel that "died"
// before its inline release (the rejected event only, the reservation
// still held).
func inlineThenCancelled(t *testing.T, s *stack, kept, cancelled string) {
	t.Helper()
	ctx := context.Background()
	s.credit(t, "acct-r", "100")
	for _, id := range []string{kept, cancelled} {
		w, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: id, Account: "acct-r", ToAddress: testAddr, Amount: jsonString("30"), By: "alice"})
		if err != nil || !w.Reserved {
			t.Fatalf("request %s: reserved=%v err=%v", id, w.Reserved, err)
		}
	}
	if _, _, err := s.repo.UpdateWithdrawal(ctx, cancelled, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Cancel{By: "alice", At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// consumeUpTo runs the ledger's durable consumer l until it has passed
// every event now in the log: a marker withdrawal requested last, without
// its inline step, is reserved by the consumer, which handles events one at
// a time in stream order.
func consumeUpTo(t *testing.T, s *stack, l *sagas.Ledger, marker string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ledger: %v", err)
		}
	})
	s.requestOnly(t, marker, "acct-r", "1")
	waitForEvent(t, s.store, marker, aggregate.EventFundsReserved)
}

func wantLedgerOutcome(t *testing.T, s *stack, kept, cancelled string) {
	t.Helper()
	if res := s.reservationOf(t, "acct-r", kept); res.Status != aggregate.ReservationHeld {
		t.Fatalf("reservation of the live withdrawal %s", res.Status)
	}
	if res := s.reservationOf(t, "acct-r", cancelled); res.Status != aggregate.ReservationReleased {
		t.Fatalf("LEAK: the cancelled withdrawal's reservation is %s", res.Status)
	}
	if a, _ := s.intake.Account(context.Background(), "acct-r"); a.Available != "69" || a.Reserved != "31" {
		t.Fatalf("balance %+v", a)
	}
}

// The consumer does not load a withdrawal this process reserved inline for
// the events before its funds_reserved (requested, account.reserved): the
// inline step did their work. It still loads it for a later event (the
// cancel's rejected, whose release the cancel never made) and releases.
func TestLedgerConsumerSkipsLoadsOfInlineReservations(t *testing.T) {
	s := newStack(t, "")
	kept := "5e7ed000-0000-4000-8000-000000000001"
	cancelled := "5e7ed000-0000-4000-8000-000000000002"
	marker := "5e7ed000-0000-4000-8000-000000000003"
	inlineThenCancelled(t, s, kept, cancelled)
	if n := sagas.ReservedRemembered(s.ledger); n != 2 {
		t.Fatalf("%d withdrawals remembered, want the 2 reserved inline", n)
	}
	loadsKept := sagas.CountLoadsOf(s.repo, eventlog.TypeWithdrawal, kept)
	loadsCancelled := sagas.CountLoadsOf(s.repo, eventlog.TypeWithdrawal, cancelled)
	loadsMarker := sagas.CountLoadsOf(s.repo, eventlog.TypeWithdrawal, marker)

	consumeUpTo(t, s, s.ledger, marker)
	if n := loadsKept.Load(); n != 0 {
		t.Fatalf("the consumer loaded the inline-reserved withdrawal %d times, want 0", n)
	}
	if n := loadsCancelled.Load(); n == 0 {
		t.Fatal("the cancelled withdrawal's rejected event was handled without a load")
	}
	if loadsMarker.Load() == 0 {
		t.Fatal("the marker, reserved by the consumer, was not loaded: the count sees nothing")
	}
	wantLedgerOutcome(t, s, kept, cancelled)
	// Passed: nothing stays remembered (the marker's own funds_reserved,
	// appended by the consumer, is forgotten once the consumer handles it).
	deadline := time.Now().Add(10 * time.Second)
	for sagas.ReservedRemembered(s.ledger) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d withdrawals still remembered after the consumer passed them", sagas.ReservedRemembered(s.ledger))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// After a restart the set is empty: the new process's consumer loads the
// withdrawal for each of those events, as before, and reaches the same
// outcome — correctness never depends on the set.
func TestLedgerConsumerAfterRestartLoadsAndDoesTheWork(t *testing.T) {
	s := newStack(t, "")
	kept := "5e7ed000-0000-4000-8000-000000000004"
	cancelled := "5e7ed000-0000-4000-8000-000000000005"
	marker := "5e7ed000-0000-4000-8000-000000000006"
	inlineThenCancelled(t, s, kept, cancelled)

	repo := sagas.NewRepo(s.store) // the next process: fresh caches, fresh set
	restarted := sagas.NewLedger(repo, aggregate.Amount{}, nil, nil)
	if n := sagas.ReservedRemembered(restarted); n != 0 {
		t.Fatalf("a new ledger remembers %d withdrawals", n)
	}
	loadsKept := sagas.CountLoadsOf(repo, eventlog.TypeWithdrawal, kept)
	consumeUpTo(t, s, restarted, marker)
	if n := loadsKept.Load(); n < 2 {
		t.Fatalf("the restarted consumer loaded the withdrawal %d times, want one for requested and one for account.reserved", n)
	}
	wantLedgerOutcome(t, s, kept, cancelled)
}
