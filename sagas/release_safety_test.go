package sagas_test

// Tests for the review findings: a node's hard reject is not proof of
// death; a reservation made for a withdrawal cancelled meanwhile is given
// back; a receipt that says nothing releases nothing; the API does not
// show signatures.

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// hardRejects answers the worker's broadcasts whose call numbers (from 1)
// are in at with a hard reject, without passing them on; every other call
// goes to the node unchanged.
type hardRejects struct {
	tron.Node
	code tron.BroadcastCode
	msg  string
	at   map[int]bool

	mu       sync.Mutex
	calls    int
	rejected int
}

func (n *hardRejects) Broadcast(ctx context.Context, tx tron.SignedTx) (tron.BroadcastResult, error) {
	n.mu.Lock()
	n.calls++
	reject := n.at[n.calls]
	if reject {
		n.rejected++
	}
	n.mu.Unlock()
	if reject {
		return tron.BroadcastResult{Code: n.code, Message: n.msg, TxID: tx.TxID()}, nil
	}
	return n.Node.Broadcast(ctx, tx)
}

func (n *hardRejects) counts() (calls, rejected int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls, n.rejected
}

// reservation returns the payer's reservation for the withdrawal.
func (r *bcRig) reservation(id string) aggregate.Reservation {
	r.t.Helper()
	a, _, err := r.repo.AccountWithHistory(r.ctx, bcAccount)
	if err != nil {
		r.t.Fatal(err)
	}
	res, ok := a.Reservation(id)
	if !ok {
		r.t.Fatalf("no reservation for %s", id)
	}
	return res
}

// untilProvenFailed runs rounds until the withdrawal is terminal, doing
// after each round what the ledger's consumer does (Finish), and checks on
// the way that the reservation stays held while it is not terminal and
// that it did not fail before the chain-time proof point (judged on the
// solid head the worker saw during the round).
func (r *bcRig) untilProvenFailed(id string, rounds int, workers ...*sagas.Worker) aggregate.Withdrawal {
	r.t.Helper()
	for range rounds {
		solid := r.sim.CurrentSolidHead()
		r.round(workers...)
		w := r.load(id)
		if err := r.ledger.Finish(r.ctx, w); err != nil {
			r.t.Fatal(err)
		}
		if !w.Terminal() {
			if res := r.reservation(id); res.Status != aggregate.ReservationHeld {
				r.t.Fatalf("%s is %s but its reservation is %s", id, w.State, res.Status)
			}
			continue
		}
		if w.State == aggregate.StateFailed && solid.Timestamp < w.Envelope.Expiration+bcMargin.Milliseconds() {
			r.t.Fatalf("failed with the solid head at %d, before the proof point %d", solid.Timestamp, w.Envelope.Expiration+bcMargin.Milliseconds())
		}
		return w
	}
	r.t.Fatalf("%s not terminal after %d rounds", id, rounds)
	return aggregate.Withdrawal{}
}

// wantNodeRejectedWithProof checks the failure names the node's refusal and
// carries the whole chain-time evidence.
func wantNodeRejectedWithProof(t *testing.T, r *bcRig, w aggregate.Withdrawal, code tron.BroadcastCode) {
	t.Helper()
	if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonNodeRejected {
		t.Fatalf("%s %s %q, want failed node_rejected", w.State, w.Reason, w.Detail)
	}
	if !strings.HasPrefix(w.Detail, string(code)+": ") || !strings.Contains(w.Detail, "; proof: solid blocks ") {
		t.Fatalf("detail %q does not carry the refusal (%s) and the proof's summary", w.Detail, code)
	}
	r.wantFailureProven(w)
}

// wantFailureProven checks the Failed event of w carries its proof in
// structured form, and that the proof holds on the simulated chain
// (sagas.VerifyFailure, what the audit calls).
func (r *bcRig) wantFailureProven(w aggregate.Withdrawal) aggregate.Failed {
	r.t.Helper()
	fs := bcOfType[aggregate.Failed](r.events(w.ID))
	if len(fs) != 1 {
		r.t.Fatalf("%d failed events", len(fs))
	}
	f := fs[0]
	if f.Evidence == nil && f.Receipt == nil {
		r.t.Fatalf("failed %s without a proof: %+v", f.Reason, f)
	}
	if f.Evidence != nil && f.Evidence.Margin != bcMargin.Milliseconds() {
		r.t.Fatalf("margin %d", f.Evidence.Margin)
	}
	if err := sagas.VerifyFailure(r.ctx, r.sim, w.Envelope, true, f); err != nil {
		r.t.Fatalf("the failure's proof does not hold on the chain: %v", err)
	}
	return f
}

// The reviewer's scenario: the node hard-rejects the first send; the
// withdrawal does not fail, the money stays reserved, the worker does not
// send the bytes again — and when someone else broadcasts the logged bytes
// before they expire, they land and the withdrawal is confirmed (and the
// reservation settled), not failed with the money released.
func TestHardRejectedBytesBroadcastByAnotherAreConfirmed(t *testing.T) {
	r := newBCRig(t)
	node := &hardRejects{Node: r.node, code: tron.CodeBandwidthError, msg: "account resource insufficient", at: map[int]bool{1: true}}
	id := r.ready(bcAddress("dest"), "10")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Node = node })
	r.until(5, func() bool { _, rej := node.counts(); return rej == 1 }, w1)
	for range 5 {
		r.round(w1)
	}
	w := r.load(id)
	if w.State != aggregate.StateBroadcasting {
		t.Fatalf("%s (%s %s) after a hard reject, want broadcasting", w.State, w.Reason, w.Detail)
	}
	if calls, _ := node.counts(); calls != 1 {
		t.Fatalf("the worker sent %d times; a hard-rejected txid must not be sent again by it", calls)
	}
	if res := r.reservation(id); res.Status != aggregate.ReservationHeld {
		t.Fatalf("reservation %s while the signed bytes are alive", res.Status)
	}
	// Anyone who can read the log (or a node that saw the bytes) sends them.
	if head := r.sim.CurrentHead(); head.Timestamp >= w.Envelope.Expiration {
		t.Fatalf("head %d already past expiration %d", head.Timestamp, w.Envelope.Expiration)
	}
	raw, err := hex.DecodeString(w.Envelope.RawDataHex)
	if err != nil {
		t.Fatal(err)
	}
	br, err := r.sim.Broadcast(r.ctx, tron.SignedTx{Raw: raw, Signature: bcHex(t, w.Signature)})
	if err != nil || !br.IsAccepted() {
		t.Fatalf("third-party broadcast: %v %v", br, err)
	}
	r.until(60, r.terminal(id), w1)
	w = r.paidOnce(id)
	if calls, _ := node.counts(); calls != 1 {
		t.Fatalf("the worker sent %d times", calls)
	}
	if evs := r.events(id); bcCount(evs, aggregate.EventRebuilt) != 0 || bcCount(evs, aggregate.EventFailed) != 0 {
		t.Fatal("rebuilt or failed a transaction that landed")
	}
}

// A hard reject of a resend (the first send's answer was lost) stops this
// worker's sends just the same, and the withdrawal fails with node_rejected
// only once the chain-time proof holds — not rebuilt, no second txid.
func TestHardRejectOfAResendStopsSendingAndFailsOnlyWithProof(t *testing.T) {
	r := newBCRig(t)
	r.sim.Script(tron.ChannelBroadcast, tron.FaultTimeoutBeforeAccept)
	node := &hardRejects{Node: r.node, code: tron.CodeTaposError, msg: "Tapos check error", at: map[int]bool{2: true}}
	id := r.ready(bcAddress("resend-rejected"), "13")
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Node = node })
	w := r.untilProvenFailed(id, 120, w1)
	wantNodeRejectedWithProof(t, r, w, tron.CodeTaposError)
	if calls, rej := node.counts(); calls != 2 || rej != 1 {
		t.Fatalf("%d sends (%d rejected), want the lost one and the rejected resend only", calls, rej)
	}
	evs := r.events(id)
	if bcCount(evs, aggregate.EventRebuilt) != 0 || bcCount(evs, aggregate.EventEnvelopeBuilt) != 1 {
		t.Fatal("a hard-rejected envelope was replaced")
	}
	r.nothingOnChain(w)
	r.settled(w)
}

// A worker that restarts forgets the refusal: it sends the same bytes once
// more, is refused again, remembers, and fails on the proof like the first.
func TestHardRejectForgottenByARestartIsSentOnceMore(t *testing.T) {
	r := newBCRig(t, func(c *tron.SimConfig) { c.Verifiers = nil })
	id := r.ready(bcAddress("restart"), "14")
	r.until(5, func() bool { return len(r.sends(r.load(id))) == 1 }, r.worker("w1"))
	restarted := r.worker("w1")
	w := r.untilProvenFailed(id, 120, restarted)
	wantNodeRejectedWithProof(t, r, w, tron.CodeSigError)
	s := r.sends(w)
	if len(s) != 2 || s[0].Code != tron.CodeSigError || s[1].Code != tron.CodeSigError || s[0].TxID != s[1].TxID {
		t.Fatalf("send log %+v, want the same txid refused twice", s)
	}
	r.nothingOnChain(w)
	r.settled(w)
}

// blankReceipts makes the solidity view report an included transaction
// with a receipt that proves nothing, the first n times.
type blankReceipts struct {
	tron.Node
	receipt tron.ReceiptResult
	mu      sync.Mutex
	left    int
	served  int
}

// SolidTxInfosByBlockNum blanks the receipts of a block the worker scans,
// from the same budget: the block scan is how confirmations arrive first.
func (n *blankReceipts) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	infos, err := n.Node.SolidTxInfosByBlockNum(ctx, num)
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range infos {
		if n.left > 0 {
			n.left--
			n.served++
			infos[i].Receipt, infos[i].Message = n.receipt, ""
		}
	}
	return infos, err
}

func (n *blankReceipts) SolidLookup(ctx context.Context, id [32]byte) (tron.TxStatus, error) {
	st, err := n.Node.SolidLookup(ctx, id)
	if err != nil || st.State != tron.TxIncluded {
		return st, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.left > 0 {
		n.left--
		n.served++
		st.Receipt, st.Message = n.receipt, ""
	}
	return st, err
}

// An included transaction whose receipt is empty (or DEFAULT, or a result
// nobody knows) has not been shown to fail: the worker logs an error and
// waits for a later lookup instead of failing and releasing money that may
// have left; when the receipt arrives it confirms.
func TestBlankReceiptWaitsInsteadOfFailing(t *testing.T) {
	for _, receipt := range []tron.ReceiptResult{"", tron.ReceiptDefault, "SOMETHING_NEW"} {
		t.Run(cmp.Or(string(receipt), "empty"), func(t *testing.T) {
			r := newBCRig(t)
			r.allowErrors = true
			node := &blankReceipts{Node: r.node, receipt: receipt, left: 3}
			id := r.ready(bcAddress("blank-receipt"), "15")
			w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Node = node })
			r.until(60, r.terminal(id), w1)
			r.paidOnce(id)
			node.mu.Lock()
			served := node.served
			node.mu.Unlock()
			if served != 3 {
				t.Fatalf("served %d blank receipts", served)
			}
			if n := len(r.logs.Errors()); n < served {
				t.Fatalf("%d error lines for %d blank receipts", n, served)
			}
		})
	}
}

// The API's event list does not show the signature (with the raw bytes it
// would be a transaction anyone could send); the stored event keeps it.
func TestEventsRedactTheSignature(t *testing.T) {
	r := newBCRig(t)
	id := r.ready(bcAddress("redact"), "16")
	r.until(40, r.terminal(id), r.worker("w1"))
	w := r.paidOnce(id)
	views, err := sagas.NewIntake(r.repo, r.ledger, r.clock.Now).Events(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	all, err := json.Marshal(views)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(all), w.Signature) {
		t.Fatal("the event list shows the signature")
	}
	var signed, built int
	for _, v := range views {
		switch v.Type {
		case aggregate.EventSigned:
			signed++
			var d map[string]any
			if err := json.Unmarshal(v.Data, &d); err != nil {
				t.Fatal(err)
			}
			// txid, signature, at, and send 1: the event is also the
			// first send's intent.
			if d["signature"] != sagas.Redacted || d["txid"] != w.TxID() || d["at"] == nil || d["send"] != 1.0 || len(d) != 4 {
				t.Fatalf("signed event shown as %s", v.Data)
			}
		case aggregate.EventEnvelopeBuilt:
			built++
			var d aggregate.EnvelopeBuilt
			if err := json.Unmarshal(v.Data, &d); err != nil || d.Envelope.RawDataHex != w.Envelope.RawDataHex {
				t.Fatalf("envelope shown as %s (%v)", v.Data, err)
			}
		}
	}
	if signed != 1 || built != 1 {
		t.Fatalf("%d signed and %d envelope events shown", signed, built)
	}
	recs, err := r.repo.WithdrawalRecords(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, rec := range recs {
		if rec.Type == aggregate.EventSigned && strings.Contains(string(rec.Payload), w.Signature) {
			stored++
		}
	}
	if stored != 1 {
		t.Fatal("the stored signed event lost its signature")
	}
	r.events(id) // the stored stream still passes the audit
}

// waitForAccountEvent blocks until an event of type typ for withdrawal id
// appears on an account subject (read from the log, not polled).
func waitForAccountEvent(t *testing.T, store *eventstore.Store, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	found := errFound{}
	err := store.Subscribe(ctx, 1, eventlog.TypeAccount, func(r eventstore.Record) error {
		if r.Type != typ {
			return nil
		}
		var e struct {
			WithdrawalID string `json:"withdrawal_id"`
		}
		if json.Unmarshal(r.Payload, &e) == nil && e.WithdrawalID == id {
			return found
		}
		return nil
	})
	if err != found {
		t.Fatalf("waiting for %s of %s: %v", typ, id, err)
	}
}

// requestOnly appends withdrawal.requested as the intake does, without its
// inline reservation (the process "died" before it).
func (s *stack) requestOnly(t *testing.T, id, account, amount string) {
	t.Helper()
	if _, _, err := s.repo.UpdateWithdrawal(context.Background(), id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.RequestWithdrawal{ID: id, Account: account, ToAddress: testAddr, Amount: aggregate.MustParseAmount(aggregate.USDT, amount),
			RequestedBy: "alice", Policy: aggregate.DefaultPolicy(), At: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// reserveOnAccount is the first of a reserving path's two appends: the
// account's reservation, with the withdrawal's funds_reserved never
// following (the path died).
func (s *stack) reserveOnAccount(t *testing.T, id, account, amount string) {
	t.Helper()
	if _, _, err := s.repo.UpdateAccount(context.Background(), account, aggregate.Reserve{
		Account: account, WithdrawalID: id, Amount: aggregate.MustParseAmount(aggregate.USDT, amount), At: time.Now().UTC(),
	}); err != nil {
		t.Fatal(err)
	}
}

func (s *stack) reservationOf(t *testing.T, account, id string) aggregate.Reservation {
	t.Helper()
	a, _, err := s.repo.AccountWithHistory(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := a.Reservation(id)
	if !ok {
		t.Fatalf("no reservation of %s on %s", id, account)
	}
	return res
}

func (s *stack) runLedger(t *testing.T) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ledger.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ledger: %v", err)
		}
	})
}

// The reviewer's race: a reserving path loads the requested withdrawal,
// the requester cancels (nothing to release yet), the ledger's consumer
// handles requested and rejected, and only then the reserving path appends
// the account's reservation and dies. Only the account event is left to
// notice: the consumer releases on it.
func TestReservationReleasedWhenCancelRacesReserve(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acct-a", "100")
	id := "c0ffee00-0000-4000-8000-000000000001"
	s.requestOnly(t, id, "acct-a", "40")
	if _, err := s.intake.Cancel(ctx, id, "alice", false); err != nil {
		t.Fatal(err)
	}
	s.runLedger(t)
	// A later withdrawal, reserved by the consumer: once its funds_reserved
	// is in the log, the consumer (which handles one event at a time, in
	// stream order) is past the cancelled one's events.
	marker := "c0ffee00-0000-4000-8000-000000000002"
	s.requestOnly(t, marker, "acct-a", "1")
	waitForEvent(t, s.store, marker, aggregate.EventFundsReserved)
	s.reserveOnAccount(t, id, "acct-a", "40")
	waitForAccountEvent(t, s.store, id, aggregate.EventAccountReleased)
	w, err := s.intake.Withdrawal(ctx, id)
	if err != nil || w.State != aggregate.StateRejected {
		t.Fatalf("%s %v", w.State, err)
	}
	if res := s.reservationOf(t, "acct-a", id); res.Status != aggregate.ReservationReleased {
		t.Fatalf("LEAK: rejected withdrawal still holds %s (%s)", res.Amount, res.Status)
	}
	if a, _ := s.intake.Account(ctx, "acct-a"); a.Available != "99" || a.Reserved != "1" {
		t.Fatalf("balance %+v", a)
	}
}

// The redelivered withdrawal.requested (or a late Reserve call) for a
// withdrawal that ended releases the reservation it holds instead of
// returning early.
func TestReserveOfAnEndedWithdrawalReleases(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acct-a", "100")
	id := "c0ffee00-0000-4000-8000-000000000003"
	s.requestOnly(t, id, "acct-a", "40")
	if _, err := s.intake.Cancel(ctx, id, "alice", false); err != nil {
		t.Fatal(err)
	}
	s.reserveOnAccount(t, id, "acct-a", "40")
	w, err := s.ledger.Reserve(ctx, id)
	if err != nil || w.State != aggregate.StateRejected || w.Reserved {
		t.Fatalf("%s reserved=%v err=%v", w.State, w.Reserved, err)
	}
	if res := s.reservationOf(t, "acct-a", id); res.Status != aggregate.ReservationReleased {
		t.Fatalf("LEAK: rejected withdrawal still holds %s (%s)", res.Amount, res.Status)
	}
	// Again (a second redelivery): nothing more happens.
	if _, err := s.ledger.Reserve(ctx, id); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.intake.Account(ctx, "acct-a"); a.Available != "100" || a.Reserved != "0" {
		t.Fatalf("balance %+v", a)
	}
}

// An existing ledger durable consumer, created when it read withdrawal
// events only, is widened in place on upgrade: it goes on from where it
// was and now sees account events too.
func TestLedgerConsumerWidensAnExistingDurable(t *testing.T) {
	s := newStack(t, "")
	ctx := context.Background()
	s.credit(t, "acct-a", "100")
	id := "c0ffee00-0000-4000-8000-000000000005"
	s.requestOnly(t, id, "acct-a", "40")
	if _, err := s.intake.Cancel(ctx, id, "alice", false); err != nil {
		t.Fatal(err)
	}
	marker := "c0ffee00-0000-4000-8000-000000000006"
	s.requestOnly(t, marker, "acct-a", "1")
	// The old consumer: withdrawal events only; stopped once it reached the
	// marker, so it has handled (and acknowledged) the cancelled one's.
	octx, ostop := context.WithCancel(ctx)
	defer ostop()
	seen := make(chan struct{})
	odone := make(chan error, 1)
	go func() {
		var once sync.Once
		odone <- s.store.Consume(octx, sagas.LedgerConsumer, eventlog.TypeWithdrawal, func(r eventstore.Record) error {
			if r.Key.ID == marker {
				once.Do(func() { close(seen) })
			}
			return nil
		})
	}()
	<-seen
	ostop()
	if err := <-odone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s.reserveOnAccount(t, id, "acct-a", "40")
	s.runLedger(t)
	waitForAccountEvent(t, s.store, id, aggregate.EventAccountReleased)
	if res := s.reservationOf(t, "acct-a", id); res.Status != aggregate.ReservationReleased {
		t.Fatalf("reservation %s", res.Status)
	}
}
