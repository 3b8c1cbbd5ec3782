package sagas_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

const testAddr = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

type stack struct {
	emb    *eventstoretest.Server
	store  *eventstore.Store
	repo   *sagas.Repo
	ledger *sagas.Ledger
	intake *sagas.Intake
}

func newStack(t *testing.T, dailyLimit string) *stack {
	t.Helper()
	emb := eventstoretest.Start(t)
	store := emb.Store(context.Background(), eventlog.NewRegistry())
	var limit aggregate.Amount
	if dailyLimit != "" {
		limit = aggregate.MustParseAmount(aggregate.USDT, dailyLimit)
	}
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, limit, nil, nil)
	return &stack{emb: emb, store: store, repo: repo, ledger: ledger, intake: sagas.NewIntake(repo, ledger, nil)}
}

func jsonString(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func (s *stack) credit(t *testing.T, account, amount string) {
	t.Helper()
	if _, _, err := s.intake.Credit(context.Background(), sagas.CreditInput{Account: account, CreditID: "c-" + amount, Amount: jsonString(amount)}); err != nil {
		t.Fatal(err)
	}
}

// waitForEvent blocks until an event of type typ appears on the
// withdrawal's subject (read from the log, not polled with sleeps).
func waitForEvent(t *testing.T, store *eventstore.Store, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	found := errFound{}
	err := store.Subscribe(ctx, 1, eventlog.TypeWithdrawal, func(r eventstore.Record) error {
		if r.Key.ID == id && r.Type == typ {
			return found
		}
		return nil
	}, eventstore.OnViolation(func(*eventstore.IntegrityError) error { return nil })) // forged events are some tests' point
	if err != found {
		t.Fatalf("waiting for %s on %s: %v", typ, id, err)
	}
}

type errFound struct{}

func (errFound) Error() string { return "found" }

func TestRequestReservesInlineAndRejectsWhenShort(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acme", "100")
	w, replayed, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d01", Account: "acme", ToAddress: testAddr, Amount: jsonString("60"), By: "alice"})
	if err != nil || replayed || !w.Reserved || w.State != aggregate.StateRequested {
		t.Fatalf("first request: %+v replayed=%v err=%v", w.View(), replayed, err)
	}
	w, _, err = s.intake.Request(ctx, sagas.RequestInput{OperationID: "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d02", Account: "acme", ToAddress: testAddr, Amount: jsonString("60"), By: "alice"})
	if err != nil || w.State != aggregate.StateRejected || w.Reason != aggregate.ReasonInsufficientFunds {
		t.Fatalf("second request: state %s reason %s err %v", w.State, w.Reason, err)
	}
	a, err := s.intake.Account(ctx, "acme")
	if err != nil || a.Available != "40" || a.Reserved != "60" {
		t.Fatalf("balance %+v err %v", a, err)
	}
	// Cancel releases the reservation.
	if _, err := s.intake.Cancel(ctx, "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d01", "alice", false); err != nil {
		t.Fatal(err)
	}
	a, _ = s.intake.Account(ctx, "acme")
	if a.Available != "100" || a.Reserved != "0" {
		t.Fatalf("after cancel %+v", a)
	}
}

func TestDailyLimitRejects(t *testing.T) {
	s := newStack(t, "50")
	ctx := context.Background()
	s.credit(t, "acme", "100")
	w, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d03", Account: "acme", ToAddress: testAddr, Amount: jsonString("60"), By: "alice"})
	if err != nil || w.State != aggregate.StateRejected || w.Reason != aggregate.ReasonDailyLimit {
		t.Fatalf("state %s reason %s err %v", w.State, w.Reason, err)
	}
	a, _ := s.intake.Account(ctx, "acme")
	if a.Available != "100" {
		t.Fatalf("balance touched: %+v", a)
	}
}

// A process that dies between creating a withdrawal and reserving it leaves
// a requested event with no reservation; the ledger's durable consumer
// completes the reservation when the next process starts — no scan.
func TestLedgerCompletesReservationAfterCrash(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acme", "100")
	id := "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d04"
	policy, _ := s.intake.Policy(ctx)
	// The "crashed" intake: the creation event only.
	_, _, err := s.repo.UpdateWithdrawal(ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.RequestWithdrawal{ID: id, Account: "acme", ToAddress: testAddr,
			Amount: aggregate.MustParseAmount(aggregate.USDT, "25"), RequestedBy: "alice", Policy: policy, At: time.Now().UTC()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.ledger.Run(runCtx) }()
	waitForEvent(t, s.store, id, aggregate.EventFundsReserved)
	stop()
	<-done
	a, _ := s.intake.Account(ctx, "acme")
	if a.Reserved != "25" || a.Available != "75" {
		t.Fatalf("balance %+v", a)
	}
}
