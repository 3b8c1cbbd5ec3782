package sagas

// Unit tests of the ledger consumer's handler and of the receipt rule,
// which need the package's unexported functions.

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/tron"
)

const internalAccount = "acct-unit"

func newUnitLedger(t *testing.T) (context.Context, *Repo, *Ledger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	store := eventstoretest.Start(t).Store(ctx, eventlog.NewRegistry())
	repo := NewRepo(store)
	if _, _, err := repo.UpdateAccount(ctx, internalAccount, aggregate.Credit{
		Account: internalAccount, CreditID: "seed", Amount: aggregate.MustParseAmount(aggregate.USDT, "100"), At: time.Now().UTC(),
	}); err != nil {
		t.Fatal(err)
	}
	return ctx, repo, NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.DiscardHandler))
}

func unitRequest(t *testing.T, ctx context.Context, repo *Repo, id, amount string) {
	t.Helper()
	if _, _, err := repo.UpdateWithdrawal(ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.RequestWithdrawal{ID: id, Account: internalAccount, ToAddress: "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC",
			Amount: aggregate.MustParseAmount(aggregate.USDT, amount), RequestedBy: "alice", Policy: aggregate.DefaultPolicy(), At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func unitReserveOnAccount(t *testing.T, ctx context.Context, repo *Repo, id, amount string) {
	t.Helper()
	if _, _, err := repo.UpdateAccount(ctx, internalAccount, aggregate.Reserve{
		Account: internalAccount, WithdrawalID: id, Amount: aggregate.MustParseAmount(aggregate.USDT, amount), At: time.Now().UTC(),
	}); err != nil {
		t.Fatal(err)
	}
}

// record returns the last stored record of type typ on the aggregate's
// subject.
func record(t *testing.T, ctx context.Context, repo *Repo, key eventstore.Key, typ string) eventstore.Record {
	t.Helper()
	recs, _, err := repo.store.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Type == typ {
			return recs[i]
		}
	}
	t.Fatalf("no %s on %s %s", typ, key.Type, key.ID)
	return eventstore.Record{}
}

func unitReservation(t *testing.T, ctx context.Context, repo *Repo, id string) aggregate.Reservation {
	t.Helper()
	a, _, err := repo.AccountWithHistory(ctx, internalAccount)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := a.Reservation(id)
	return res
}

// A load that does not yet include the event being handled (a lagging
// replica answering the direct get) is refused with ErrStaleRead, so the
// message is redelivered instead of acknowledged on a decision made on the
// old state; nothing is written. The same event handled on a read that
// includes it takes effect.
func TestLedgerRefusesToDecideOnAStaleRead(t *testing.T) {
	ctx, repo, l := newUnitLedger(t)
	id := "d00dfeed-0000-4000-8000-000000000001"
	unitRequest(t, ctx, repo, id, "40")
	if _, _, err := repo.UpdateWithdrawal(ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Cancel{By: "alice", At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	unitReserveOnAccount(t, ctx, repo, id, "40") // the race: reserved after the cancel
	wkey := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
	akey := eventstore.Key{Type: eventlog.TypeAccount, ID: internalAccount}
	rejected := record(t, ctx, repo, wkey, aggregate.EventRejected)
	reserved := record(t, ctx, repo, akey, aggregate.EventAccountReserved)

	// The reads below answer at the current versions; an event one version
	// ahead of them is what a lagging read looks like to the handler.
	for _, r := range []eventstore.Record{rejected, reserved} {
		ahead := r
		ahead.AggregateVersion++
		if err := l.handle(ahead); !errors.Is(err, ErrStaleRead) {
			t.Fatalf("%s at version %d on a read at %d: err %v, want ErrStaleRead", r.Type, ahead.AggregateVersion, r.AggregateVersion, err)
		}
		if res := unitReservation(t, ctx, repo, id); res.Status != aggregate.ReservationHeld {
			t.Fatalf("a stale read decided: reservation %s", res.Status)
		}
	}
	// A request whose withdrawal the read does not show at all.
	ghost := record(t, ctx, repo, wkey, aggregate.EventRequested)
	ghost.Key.ID = "d00dfeed-0000-4000-8000-000000000002"
	if err := l.handle(ghost); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("requested with no withdrawal behind it: err %v, want ErrStaleRead", err)
	}
	// Caught up: the rejected event releases.
	if err := l.handle(rejected); err != nil {
		t.Fatal(err)
	}
	if res := unitReservation(t, ctx, repo, id); res.Status != aggregate.ReservationReleased {
		t.Fatalf("reservation %s after the rejected event, want released", res.Status)
	}
}

// account.reserved for a withdrawal still alive and not yet marked reserved
// (the reserving path died between its two appends) records funds_reserved,
// once; for a withdrawal that ended it releases.
func TestLedgerHandlesAccountReserved(t *testing.T) {
	ctx, repo, l := newUnitLedger(t)
	akey := eventstore.Key{Type: eventlog.TypeAccount, ID: internalAccount}

	live := "d00dfeed-0000-4000-8000-000000000003"
	unitRequest(t, ctx, repo, live, "30")
	unitReserveOnAccount(t, ctx, repo, live, "30")
	r := record(t, ctx, repo, akey, aggregate.EventAccountReserved)
	for range 2 { // a redelivery changes nothing
		if err := l.handle(r); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := repo.Withdrawal(ctx, live)
	if err != nil || !w.Reserved || w.State != aggregate.StateRequested {
		t.Fatalf("%s reserved=%v err=%v", w.State, w.Reserved, err)
	}
	recs, err := repo.WithdrawalRecords(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(recs); n != 2 {
		t.Fatalf("%d withdrawal events, want requested and funds_reserved", n)
	}
	if res := unitReservation(t, ctx, repo, live); res.Status != aggregate.ReservationHeld || !res.Amount.Equal(aggregate.MustParseAmount(aggregate.USDT, "30")) {
		t.Fatalf("reservation %+v", res)
	}

	ended := "d00dfeed-0000-4000-8000-000000000004"
	unitRequest(t, ctx, repo, ended, "20")
	if _, _, err := repo.UpdateWithdrawal(ctx, ended, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Cancel{By: "alice", At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	unitReserveOnAccount(t, ctx, repo, ended, "20")
	if err := l.handle(record(t, ctx, repo, akey, aggregate.EventAccountReserved)); err != nil {
		t.Fatal(err)
	}
	if res := unitReservation(t, ctx, repo, ended); res.Status != aggregate.ReservationReleased {
		t.Fatalf("reservation of the cancelled withdrawal %s, want released", res.Status)
	}
	if w, _, err := repo.Withdrawal(ctx, ended); err != nil || w.Reserved || w.State != aggregate.StateRejected {
		t.Fatalf("%s reserved=%v err=%v", w.State, w.Reserved, err)
	}
}

// Only a receipt that says the call failed fails the withdrawal; one that
// says nothing (empty, DEFAULT, a value nobody knows) does not.
func TestReceiptFailureOnlyOnExplicitResults(t *testing.T) {
	for _, c := range []struct {
		receipt tron.ReceiptResult
		reason  string
		failed  bool
	}{
		{tron.ReceiptRevert, aggregate.ReasonReverted, true},
		{tron.ReceiptOutOfEnergy, aggregate.ReasonOutOfEnergy, true},
		{tron.ReceiptOutOfTime, "out_of_time", true},
		{tron.ReceiptBadJumpDest, "bad_jump_destination", true},
		{tron.ReceiptOutOfMemory, "out_of_memory", true},
		{tron.ReceiptIllegalOperation, "illegal_operation", true},
		{tron.ReceiptStackOverflow, "stack_overflow", true},
		{tron.ReceiptTransferFailed, "transfer_failed", true},
		{tron.ReceiptUnknown, "unknown", true},
		{"PRECOMPILED_CONTRACT", "precompiled_contract", true},
		{"STACK_TOO_SMALL", "stack_too_small", true},
		{"STACK_TOO_LARGE", "stack_too_large", true},
		{"JVM_STACK_OVER_FLOW", "jvm_stack_over_flow", true},
		{"INVALID_CODE", "invalid_code", true},
		{tron.ReceiptSuccess, "", false},
		{"", "", false},
		{tron.ReceiptDefault, "", false},
		{"SOMETHING_NEW", "", false},
	} {
		reason, failed := aggregate.FailureReasonOf(string(c.receipt))
		if reason != c.reason || failed != c.failed {
			t.Errorf("receipt %q: %q %v, want %q %v", c.receipt, reason, failed, c.reason, c.failed)
		}
	}
}
