package sagas_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

// forger is a full-access NATS identity (a leaked admin credential): a raw
// connection to the server that can publish anything to the event stream,
// with every header weir writes, but without the event key.
type forger struct {
	t     *testing.T
	js    jetstream.JetStream
	store *eventstore.Store
}

func newForger(t *testing.T, s *stack) *forger {
	js, err := jetstream.New(s.emb.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return &forger{t: t, js: js, store: s.store}
}

// event publishes a well-formed event at the end of k's subject; tag ""
// leaves the tag headers out, anything else is sent as the tag.
func (f *forger) event(k eventstore.Key, at eventstore.Position, typ, data, tag string) uint64 {
	f.t.Helper()
	m := eventstoretest.WithTag(eventstoretest.Forged(f.store.Subject(k), at, typ, aggregate.EventSchemaVersion, []byte(data)), tag)
	ack, err := f.js.PublishMsg(context.Background(), m)
	if err != nil {
		f.t.Fatalf("forge %s on %s: %v", typ, m.Subject, err)
	}
	return ack.Sequence
}

func (f *forger) credit(account string, at eventstore.Position, amount, tag string) uint64 {
	return f.event(eventstore.Key{Type: eventlog.TypeAccount, ID: account}, at, aggregate.EventAccountCredited,
		`{"account":"`+account+`","credit_id":"forged","amount":"`+amount+`","at":"2026-01-01T00:00:00Z"}`, tag)
}

func wantViolation(t *testing.T, what string, err error, seq uint64) {
	t.Helper()
	var ae *aggregate.Error
	if !errors.Is(err, sagas.ErrIntegrityViolation) || !errors.As(err, &ae) || ae.Code != "integrity_violation" {
		t.Fatalf("%s: %v, want integrity_violation", what, err)
	}
	if !strings.Contains(ae.Message, "seq "+strconv.FormatUint(seq, 10)) {
		t.Fatalf("%s: %q does not name stream seq %d", what, ae.Message, seq)
	}
}

// The attack of issue 10: with a leaked admin credential, publish a credit
// of 5,000,000 to a new account with every header right, then request a
// payout from it. The credit is caught on every read and never becomes
// spendable; accounts it did not touch keep working.
func TestForgedCreditFromAFullAccessIdentityNeverBecomesSpendable(t *testing.T) {
	for _, tc := range []struct{ name, tag string }{
		{"no tag", ""},
		{"made-up tag", strings.Repeat("5a", 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, "")
			ctx := context.Background()
			s.credit(t, "acme", "100")
			f := newForger(t, s)
			forged := f.credit("mallory", eventstore.Position{}, "5000000.000000", tc.tag)

			_, err := s.intake.Account(ctx, "mallory")
			wantViolation(t, "GET mallory", err, forged)

			id := "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d21"
			_, _, err = s.intake.Request(ctx, sagas.RequestInput{OperationID: id, Account: "mallory", ToAddress: testAddr, Amount: jsonString("90"), By: "alice"})
			wantViolation(t, "request on mallory", err, forged)
			w, _, err := s.repo.Withdrawal(ctx, id)
			if err != nil || w.Reserved || w.State != aggregate.StateRequested {
				t.Fatalf("withdrawal on mallory: %+v (%v), want requested and not reserved", w.View(), err)
			}
			if _, err := s.intake.Approve(ctx, id, "bob"); err != nil {
				t.Fatalf("approve: %v", err)
			}
			w, _, _ = s.repo.Withdrawal(ctx, id)
			if w.ReadyToSend() {
				t.Fatalf("the withdrawal on the forged credit is ready to send: %+v", w.View())
			}
			// The ledger's durable consumer sees the forged event and the
			// request; it reserves nothing either.
			runLedgerPast(t, s, "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d2f")
			if w, _, _ = s.repo.Withdrawal(ctx, id); w.Reserved {
				t.Fatalf("the ledger reserved on the forged credit: %+v", w.View())
			}
			if _, n := s.store.Violations(); n != 1 {
				t.Fatalf("violations counted %d, want 1", n)
			}

			// Another account is untouched.
			w, _, err = s.intake.Request(ctx, sagas.RequestInput{OperationID: "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d22", Account: "acme", ToAddress: testAddr, Amount: jsonString("60"), By: "alice"})
			if err != nil || !w.Reserved {
				t.Fatalf("request on acme: %+v %v", w.View(), err)
			}

			// A forged credit onto an existing account quarantines that
			// account: it cannot be spent from or credited past.
			_, apos, err := s.repo.Account(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			onAcme := f.credit("acme", apos, "5000000", tc.tag)
			_, _, err = s.intake.Request(ctx, sagas.RequestInput{OperationID: "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d23", Account: "acme", ToAddress: testAddr, Amount: jsonString("30"), By: "alice"})
			wantViolation(t, "request on acme after the forgery", err, onAcme)
			_, _, err = s.intake.Credit(ctx, sagas.CreditInput{Account: "acme", CreditID: "c-more", Amount: jsonString("5"), By: "ops"})
			wantViolation(t, "credit on acme after the forgery", err, onAcme)
		})
	}
}

// runLedgerPast runs the ledger's durable consumer until it has handled
// everything in the log so far: it writes a withdrawal whose intake
// "crashed" before reserving (id, on a funded account of its own) and
// waits until the consumer reserved it. The consumer works in stream
// order, so everything before that withdrawal was handled by then.
func runLedgerPast(t *testing.T, s *stack, id string) {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if _, _, err := s.intake.Credit(ctx, sagas.CreditInput{Account: "sentinel", CreditID: "c-" + id, Amount: jsonString("1"), By: "ops"}); err != nil {
		t.Fatal(err)
	}
	policy, _ := s.intake.Policy(ctx)
	if _, _, err := s.repo.UpdateWithdrawal(ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.RequestWithdrawal{ID: id, Account: "sentinel", ToAddress: testAddr,
			Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), RequestedBy: "alice", Policy: policy, At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ledger.Run(ctx) }()
	waitForEvent(t, s.store, id, aggregate.EventFundsReserved)
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("ledger: %v", err)
	}
}

// Consumer-level attack: forged events delivered to the ledger's durable
// consumer — a 7-byte publish of an unknown type (which used to stop the
// ledger for good), a confirmation of a withdrawal that was never sent (to
// settle its reservation), and a reservation record for it. None moves
// money, and the ledger keeps serving the events after them.
func TestLedgerConsumerQuarantinesForgedEventsAndKeepsGoing(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acme", "100")
	f := newForger(t, s)
	paid := "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d31"
	if _, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: paid, Account: "acme", ToAddress: testAddr, Amount: jsonString("60"), By: "alice"}); err != nil {
		t.Fatal(err)
	}

	junk := nats.NewMsg(s.store.Subject(eventstore.Key{Type: eventlog.TypeAccount, ID: "junk"}))
	junk.Data = []byte("garbage")
	junk.Header.Set(eventstore.HeaderEventType, "no.such")
	if _, err := f.js.PublishMsg(ctx, junk); err != nil {
		t.Fatal(err)
	}
	_, wpos, err := s.repo.Withdrawal(ctx, paid)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := f.event(eventstore.Key{Type: eventlog.TypeWithdrawal, ID: paid}, wpos, aggregate.EventConfirmed,
		`{"txid":"`+strings.Repeat("ab", 32)+`","block_number":100,"block_time":1767225600000,"receipt":"SUCCESS","at":"2026-01-01T00:00:00Z"}`, strings.Repeat("00", 32))

	// After the forgeries, a withdrawal whose intake "crashed" before
	// reserving: only the ledger's consumer, still running, can complete it.
	runLedgerPast(t, s, "2b1c7a52-4b43-4c55-9a2e-7b0f3b0c1d32")
	a, err := s.intake.Account(ctx, "acme")
	if err != nil || a.Settled != "0" || a.Reserved != "60" {
		t.Fatalf("acme %+v (%v): want the 60 still reserved and nothing settled", a, err)
	}
	_, err = s.intake.Withdrawal(ctx, paid)
	wantViolation(t, "GET the withdrawal with the forged confirmation", err, confirmed)
	vs, n := s.store.Violations()
	if n != 2 || vs[1].Sequence != confirmed {
		t.Fatalf("violations %+v (%d), want the junk and seq %d", vs, n, confirmed)
	}
}
