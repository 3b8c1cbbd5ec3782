package projections

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

const (
	wSmall  = "11111111-1111-4111-8111-111111111111" // 200: one approval
	wLarge  = "22222222-2222-4222-8222-222222222222" // 1500: four eyes
	wBroke  = "33333333-3333-4333-8333-333333333333" // more than the account holds
	wCancel = "44444444-4444-4444-8444-444444444444"
)

// request creates a withdrawal and reserves its amount on the account, the
// way intake does: request, reserve on the account, record the reservation
// (or reject with insufficient_funds). It returns the last sequence written.
func (w *world) request(id, account, amount string, at time.Time) uint64 {
	w.t.Helper()
	w.do(id, aggregate.RequestWithdrawal{ID: id, Account: account, ToAddress: toAddr, Amount: usdt(amount),
		Asset: aggregate.USDT.Code, RequestedBy: "alice", Policy: w.policy, At: at})
	_, err := w.tryAcct(account, aggregate.Reserve{Account: account, WithdrawalID: id, Amount: usdt(amount), At: at})
	if errors.Is(err, aggregate.ErrInsufficientFunds) {
		return w.do(id, aggregate.Reject{Reason: aggregate.ReasonInsufficientFunds, Detail: err.Error(), At: at})
	}
	if err != nil {
		w.t.Fatalf("reserve %s: %v", id, err)
	}
	return w.do(id, aggregate.RecordReservation{At: at})
}

func TestViewsFollowAScriptedHistory(t *testing.T) {
	w := newWorld(t)
	p := w.start(Options{})
	upTo := func(seq uint64) { t.Helper(); waitFor(t, p, seq) }

	upTo(w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)}))
	upTo(w.acct("acct-b", aggregate.Credit{Account: "acct-b", CreditID: "c1", Amount: usdt("50"), At: minutes(0)}))

	upTo(w.request(wSmall, "acct-a", "200", minutes(1)))
	upTo(w.request(wLarge, "acct-a", "1500", minutes(2)))
	pend := p.PendingApprovals()
	if got := ids(pend); !slices.Equal(got, []string{wSmall, wLarge}) {
		t.Fatalf("pending = %v, want small then large (request order)", got)
	}
	if pend[1].RequiredApprovals != 2 || len(pend[1].Approvals) != 0 || !pend[1].Reserved {
		t.Fatalf("large: required %d given %d reserved %v, want 2/0/true", pend[1].RequiredApprovals, len(pend[1].Approvals), pend[1].Reserved)
	}
	if bal, _ := p.Balance("acct-a"); bal.Available != "3300" || bal.Reserved != "1700" || bal.Settled != "0" {
		t.Fatalf("acct-a after two reservations: %+v", bal)
	}

	// One of two approvals: still pending, with the count visible.
	upTo(w.do(wLarge, aggregate.Approve{By: "bob", Policy: w.policy, At: minutes(3)}))
	if pend := p.PendingApprovals(); len(pend) != 2 || len(pend[1].Approvals) != 1 || pend[1].Approvals[0].By != "bob" {
		t.Fatalf("pending after one approval of large: %+v", pend)
	}
	if r := p.Ready(minutes(3)); len(r) != 0 {
		t.Fatalf("ready before any approval completed: %v", ids(r))
	}

	// The small one is approved first, the large one second: ready is
	// ordered by approval time, not request time or id.
	upTo(w.do(wSmall, aggregate.Approve{By: "carol", Policy: w.policy, At: minutes(4)}))
	upTo(w.do(wLarge, aggregate.Approve{By: "carol", Policy: w.policy, At: minutes(5)}))
	if pend := p.PendingApprovals(); len(pend) != 0 {
		t.Fatalf("pending after approvals: %v", ids(pend))
	}
	if got := ids(p.Ready(minutes(5))); !slices.Equal(got, []string{wSmall, wLarge}) {
		t.Fatalf("ready = %v, want small then large", got)
	}

	// A live claim takes it off the ready queue; a lapsed one puts it back.
	upTo(w.do(wSmall, aggregate.ClaimWithdrawal{Worker: "worker-1", LeaseUntil: minutes(16), At: minutes(6)}))
	if got := ids(p.Ready(minutes(6))); !slices.Equal(got, []string{wLarge}) {
		t.Fatalf("ready with small claimed = %v", got)
	}
	if got := ids(p.Ready(minutes(17))); !slices.Equal(got, []string{wSmall, wLarge}) {
		t.Fatalf("ready after small's lease lapsed = %v", got)
	}

	env := envelope("small", minutes(20).UnixMilli())
	upTo(w.do(wSmall, aggregate.ChooseRoute{Route: externalRoute(t), At: minutes(6)}))
	upTo(w.do(wSmall, aggregate.BuildEnvelope{Envelope: env, Policy: w.policy, At: minutes(7)}))
	item := onlyInFlight(t, p, minutes(8))
	if item.State != aggregate.StateSigning || item.TxID != env.TxID || item.Attempt != 1 ||
		item.Age != time.Minute || item.EnvelopeAge != time.Minute || item.ClaimedBy != "worker-1" ||
		!item.LeaseLive || item.Ambiguous {
		t.Fatalf("in flight after the envelope: %+v", item)
	}
	if got := ids(p.Ready(minutes(17))); !slices.Equal(got, []string{wLarge}) {
		t.Fatalf("ready must not hold an in-flight withdrawal: %v", got)
	}
	if lapsed := onlyInFlight(t, p, minutes(17)); !lapsed.LeaseLapsed || !lapsed.Ambiguous || lapsed.Unacknowledged {
		t.Fatalf("lease lapsed mid-flight must be ambiguous: %+v", lapsed)
	}

	upTo(w.do(wSmall, aggregate.RecordSignature{Policy: w.policy, TxID: env.TxID, Signature: signature(0xaa), At: minutes(8)}))
	upTo(w.do(wSmall, aggregate.RecordBroadcastIntent{TxID: env.TxID, Send: 1, At: minutes(9)}))
	// Sent, no acceptance in the log: a worker holding the lease keeps its
	// node's answer in hand, so this is not ambiguous while the lease is
	// live, and is once it lapsed (nobody knows the answer any more).
	if item := onlyInFlight(t, p, minutes(10)); item.State != aggregate.StateBroadcasting || !item.Unacknowledged || item.Ambiguous ||
		item.Age != time.Minute || item.EnvelopeAge != 3*time.Minute || item.Sends != 1 {
		t.Fatalf("an intent without acceptance, lease live: %+v", item)
	}
	if item := onlyInFlight(t, p, minutes(17)); !item.Unacknowledged || !item.Ambiguous {
		t.Fatalf("an intent without acceptance, lease lapsed, must be ambiguous: %+v", item)
	}
	upTo(w.do(wSmall, aggregate.RecordAccepted{TxID: env.TxID, Send: 1, Result: "SUCCESS", At: minutes(10)}))
	if item := onlyInFlight(t, p, minutes(11)); item.State != aggregate.StateBroadcast || item.Ambiguous {
		t.Fatalf("accepted, lease live: %+v", item)
	}
	if got := p.InFlightWithdrawals(minutes(11)); len(got) != 1 || got[0].ID != wSmall || got[0].View().TxID == nil {
		t.Fatalf("in-flight withdrawals: %+v", got)
	}

	upTo(w.do(wSmall, aggregate.Confirm{TxID: env.TxID, BlockNumber: 100, BlockTime: minutes(11).UnixMilli(), Receipt: aggregate.ReceiptSuccess, At: minutes(12)}))
	upTo(w.acct("acct-a", aggregate.Settle{Account: "acct-a", WithdrawalID: wSmall, At: minutes(12)}))
	if got := p.InFlight(minutes(12)); len(got) != 0 {
		t.Fatalf("confirmed withdrawal still in flight: %+v", got)
	}
	if _, ok := p.Withdrawal(wSmall); ok {
		t.Fatal("a terminal withdrawal must leave the projection")
	}

	// Insufficient funds: requested, then rejected by intake at once.
	upTo(w.request(wBroke, "acct-a", "4000", minutes(13)))
	// A cancellation releases the reservation.
	upTo(w.request(wCancel, "acct-a", "100", minutes(14)))
	if got := ids(p.PendingApprovals()); !slices.Equal(got, []string{wCancel}) {
		t.Fatalf("pending = %v, want only the cancellable one (the broke one was rejected)", got)
	}
	upTo(w.do(wCancel, aggregate.Cancel{By: "alice", At: minutes(15)}))
	upTo(w.acct("acct-a", aggregate.Release{Account: "acct-a", WithdrawalID: wCancel, Reason: aggregate.ReasonCancelled, At: minutes(15)}))
	if got := p.PendingApprovals(); len(got) != 0 {
		t.Fatalf("pending after cancel: %v", ids(got))
	}

	want := []aggregate.AccountView{
		{ID: "acct-a", Available: "3300", Reserved: "1500", Settled: "200"},
		{ID: "acct-b", Available: "50", Reserved: "0", Settled: "0"},
	}
	if got := p.Balances(); !slices.Equal(got, want) {
		t.Fatalf("balances = %+v, want %+v", got, want)
	}
	if _, ok := p.Balance("acct-none"); ok {
		t.Fatal("an account without events has no balance")
	}
	st := p.Stats()
	if st.Ended[aggregate.StateConfirmed] != 1 || st.Ended[aggregate.StateRejected] != 2 || st.Open[aggregate.StateApproved] != 1 {
		t.Fatalf("stats = %+v", st)
	}
	sameSnapshot(t, "live vs rebuilt", w.rebuilt().Snapshot(), p.Snapshot())
}

func onlyInFlight(t *testing.T, p *Projector, now time.Time) InFlightItem {
	t.Helper()
	items := p.InFlight(now)
	if len(items) != 1 {
		t.Fatalf("in flight: %d items, want 1", len(items))
	}
	return items[0]
}

func TestViewsAreCopies(t *testing.T) {
	w := newWorld(t)
	p := w.start(Options{})
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)})
	w.request(wLarge, "acct-a", "1500", minutes(1))
	waitFor(t, p, w.do(wLarge, aggregate.Approve{By: "bob", Policy: w.policy, At: minutes(2)}))

	got := p.PendingApprovals()
	got[0].Approvals[0].By = "mallory"
	got[0].State = aggregate.StateConfirmed
	if again := p.PendingApprovals(); again[0].Approvals[0].By != "bob" || again[0].State != aggregate.StateRequested {
		t.Fatalf("changing a returned view changed the projection: %+v", again[0])
	}
}

// Records folded once must not be folded again, however they come back: the
// same records redelivered (a resubscription from an older position), or the
// same aggregate version under another stream sequence.
func TestRedeliveryChangesNothing(t *testing.T) {
	w := newWorld(t)
	p := w.start(Options{})
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)})
	w.request(wSmall, "acct-a", "200", minutes(1))
	w.request(wLarge, "acct-a", "1500", minutes(2))
	waitFor(t, p, w.do(wLarge, aggregate.Approve{By: "bob", Policy: w.policy, At: minutes(3)}))
	before := p.Snapshot()

	var recs []eventstore.Record
	if _, err := w.store.ReadAll(testCtx(t), 1, "", func(r eventstore.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := p.handle(r); err != nil {
			t.Fatalf("redelivered seq %d: %v", r.Sequence, err)
		}
	}
	sameSnapshot(t, "after redelivering every record", before, p.Snapshot())

	// The same event again under a fresh sequence (as a duplicate append
	// would look): the per-aggregate version check skips it.
	p2 := New(w.store, Options{Logger: quietLogger()})
	for _, r := range recs {
		if err := p2.handle(r); err != nil {
			t.Fatal(err)
		}
	}
	dup := recs[len(recs)-1]
	dup.Sequence = recs[len(recs)-1].Sequence + 100
	if err := p2.handle(dup); err != nil {
		t.Fatalf("duplicate aggregate version: %v", err)
	}
	got := p2.Snapshot()
	if got.Applied != dup.Sequence {
		t.Fatalf("applied = %d, want the duplicate's sequence %d", got.Applied, dup.Sequence)
	}
	got.Applied = before.Applied
	sameSnapshot(t, "after a duplicate aggregate version", before, got)
}

func TestOutOfOrderRecordStopsTheProjection(t *testing.T) {
	w := newWorld(t)
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)})
	w.request(wSmall, "acct-a", "200", minutes(1))
	w.do(wSmall, aggregate.Approve{By: "bob", Policy: w.policy, At: minutes(2)})
	var recs []eventstore.Record
	if _, err := w.store.ReadAll(testCtx(t), 1, "", func(r eventstore.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	p := New(w.store, Options{Logger: quietLogger()})
	// Skip the withdrawal's second event (its reservation): its third
	// arrives over a gap.
	var skipped bool
	for _, r := range recs {
		if r.Key.Type == eventlog.TypeWithdrawal && r.AggregateVersion == 2 && !skipped {
			skipped = true
			continue
		}
		err := p.handle(r)
		if r.Key.Type == eventlog.TypeWithdrawal && r.AggregateVersion == 3 {
			var ae *ApplyError
			if !errors.As(err, &ae) || !errors.Is(err, ErrOutOfOrder) || ae.Sequence != r.Sequence {
				t.Fatalf("gap: err = %v, want an ApplyError wrapping ErrOutOfOrder at seq %d", err, r.Sequence)
			}
			if p.Applied() >= r.Sequence {
				t.Fatal("a record that was refused must not count as applied")
			}
			return
		}
		if err != nil {
			t.Fatalf("seq %d: %v", r.Sequence, err)
		}
	}
	t.Fatal("never reached the record after the gap")
}

func TestWaitForAndLag(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	p := New(w.store, Options{Logger: quietLogger()})
	if err := p.WaitFor(ctx, 0); err != nil {
		t.Fatalf("WaitFor(0) on a fresh projector: %v", err)
	}
	if err := p.WaitFor(ctx, 1); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("WaitFor on a stopped projector: %v, want ErrNotRunning", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())

	// A waiter for a record not yet written is released by its arrival.
	released := make(chan error, 1)
	go func() { released <- p.WaitFor(ctx, 2) }()
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("10"), At: minutes(0)})
	select {
	case err := <-released:
		t.Fatalf("WaitFor(2) returned after seq 1 only: %v", err)
	default:
	}
	seq := w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c2", Amount: usdt("10"), At: minutes(0)})
	if seq != 2 {
		t.Fatalf("second append at seq %d", seq)
	}
	if err := <-released; err != nil {
		t.Fatalf("WaitFor(2): %v", err)
	}
	if bal, _ := p.Balance("acct-a"); bal.Available != "20" {
		t.Fatalf("read-your-writes: balance %+v after WaitFor", bal)
	}
	if lag, err := p.Lag(ctx); err != nil || lag != 0 {
		t.Fatalf("lag when caught up = %d, %v", lag, err)
	}

	// A cancelled wait returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.WaitFor(cctx, 99); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitFor: %v", err)
	}

	// Stopped, the projector falls behind by exactly what was written.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "later-" + string(rune('a'+i)), Amount: usdt("1"), At: minutes(1)})
	}
	if lag, err := p.Lag(ctx); err != nil || lag != 3 {
		t.Fatalf("lag while stopped = %d, %v; want 3", lag, err)
	}
	if err := p.WaitFor(ctx, w.last()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("WaitFor after Stop: %v", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if lag, _ := p.Lag(ctx); lag != 0 || p.Applied() != 5 {
		t.Fatalf("after restart: lag %d applied %d", lag, p.Applied())
	}
	if bal, _ := p.Balance("acct-a"); bal.Available != "23" {
		t.Fatalf("balance after catching up: %+v", bal)
	}
}

// A waiter is released, not left hanging, when the projector stops.
func TestWaitForReleasedByStop(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	p := w.start(Options{})
	released := make(chan error, 1)
	go func() { released <- p.WaitFor(ctx, 1000) }()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; !errors.Is(err, ErrNotRunning) {
		t.Fatalf("WaitFor across Stop: %v", err)
	}
}
