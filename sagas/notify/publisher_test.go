package notify_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/tron"
)

// harness is a log with an intake writing to it and a publisher following
// it, on a real embedded nats-server.
type harness struct {
	t      *testing.T
	srv    *eventstoretest.Server
	store  *eventstore.Store
	intake *sagas.Intake
	js     jetstream.JetStream
	stream jetstream.Stream
	n      int
}

func newHarness(t *testing.T, opts ...eventstoretest.Option) *harness {
	t.Helper()
	srv := eventstoretest.Start(t, opts...)
	h := &harness{t: t, srv: srv}
	h.open()
	return h
}

// open (re)opens the store, the intake and the notification stream.
func (h *harness) open() {
	h.t.Helper()
	ctx := h.t.Context()
	h.store = h.srv.Store(ctx, eventlog.NewRegistry())
	repo := sagas.NewRepo(h.store)
	h.intake = sagas.NewIntake(repo, sagas.NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.DiscardHandler)), nil)
	h.intake.SetPolicyQuorum(1)
	if _, err := h.intake.SetPolicy(ctx, aggregate.DefaultPolicy(), "test"); err != nil {
		h.t.Fatal(err)
	}
	var err error
	if h.js, err = jetstream.New(h.srv.Conn()); err != nil {
		h.t.Fatal(err)
	}
	if h.stream, err = notify.EnsureStream(ctx, h.js, 1, true); err != nil {
		h.t.Fatal(err)
	}
}

// run starts a publisher until the returned stop is called; setup, if
// any, configures it before it runs.
func (h *harness) run(setup ...func(*notify.Publisher)) (*notify.Publisher, func()) {
	p := notify.NewPublisher(h.store, h.js, h.stream, slog.New(slog.DiscardHandler))
	for _, f := range setup {
		f(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return p, func() {
		cancel()
		<-done
	}
}

// caughtUp waits until p has handled everything in the log.
func (h *harness) caughtUp(p *notify.Publisher) {
	h.t.Helper()
	last, err := h.store.LastSequence(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
	defer cancel()
	if err := p.WaitFor(ctx, last); err != nil {
		h.t.Fatalf("publisher at %+v, log at %d: %v", p.Position(), last, err)
	}
}

func address(label string) string {
	sum := sha256.Sum256([]byte("weir notify test " + label))
	var a tron.Address
	a[0] = tron.AddressPrefix
	copy(a[1:], sum[:20])
	return a.String()
}

func (h *harness) credit(account, amount string) {
	h.t.Helper()
	h.n++
	if _, _, err := h.intake.Credit(h.t.Context(), sagas.CreditInput{Account: account, CreditID: fmt.Sprintf("c%d", h.n),
		Amount: json.RawMessage(`"` + amount + `"`), By: "olivia"}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) request(account, amount string) string {
	h.t.Helper()
	h.n++
	w, _, err := h.intake.Request(h.t.Context(), sagas.RequestInput{
		OperationID: fmt.Sprintf("0a1b2c3d-0000-4000-8000-%012d", h.n), Account: account, ToAddress: address(account),
		Amount: json.RawMessage(`"` + amount + `"`), Asset: aggregate.USDT.Code, By: "alice"})
	if err != nil {
		h.t.Fatal(err)
	}
	return w.ID
}

// all reads every message of WEIR_NOTIFY.
func (h *harness) all() []*jetstream.RawStreamMsg {
	h.t.Helper()
	info, err := h.stream.Info(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq >= 1 && seq <= info.State.LastSeq; seq++ {
		m, err := h.stream.GetMsg(h.t.Context(), seq)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

type seen struct {
	subject, eventID, state string
}

func (h *harness) seen() []seen {
	var out []seen
	for _, m := range h.all() {
		var n notify.Notification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			h.t.Fatal(err)
		}
		if n.Type != notify.TypeStateChanged || n.EventID == "" || n.At.IsZero() {
			h.t.Fatalf("notification %s: %+v", m.Data, n)
		}
		if id := m.Header.Get(nats.MsgIdHdr); id != n.EventID {
			h.t.Fatalf("Nats-Msg-Id %q, event_id %q", id, n.EventID)
		}
		out = append(out, seen{m.Subject, n.EventID, string(n.Withdrawal.State)})
	}
	return out
}

func TestEveryStateChangeIsPublishedOnceOnItsAccountAndStateSubject(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "100")
	p, stop := h.run()
	defer stop()

	ok := h.request("acme", "10")
	if _, err := h.intake.Approve(t.Context(), ok, "bob"); err != nil {
		t.Fatal(err)
	}
	broke := h.request("acme", "500") // more than acme holds: rejected
	h.caughtUp(p)

	got := h.seen()
	want := []struct{ subject, state string }{
		{"weir.notify.withdrawal.acme.requested", "requested"},
		{"weir.notify.withdrawal.acme.approved", "approved"},
		{"weir.notify.withdrawal.acme.requested", "requested"},
		{"weir.notify.withdrawal.acme.rejected", "rejected"},
	}
	if len(got) != len(want) {
		t.Fatalf("published %d notifications, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].subject != w.subject || got[i].state != w.state {
			t.Errorf("notification %d: %+v, want %+v", i, got[i], w)
		}
	}
	// Every event id is the log's: the events of each withdrawal.
	ids := map[string]bool{}
	for _, id := range []string{ok, broke} {
		recs, _, err := h.store.Load(t.Context(), eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ids[r.EventID] = true
		}
	}
	for _, s := range got {
		if !ids[s.eventID] {
			t.Errorf("event id %s is not an event of the log", s.eventID)
		}
	}
	if p.Published() != 4 {
		t.Errorf("Published() = %d", p.Published())
	}
}

func TestARestartedPublisherResumesWithoutRepeatingOrSkipping(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, eventstoretest.File(dir))
	h.credit("acme", "100")
	p, stop := h.run()
	first := h.request("acme", "10")
	h.caughtUp(p)
	stop()

	// While no publisher runs, the log moves on.
	if _, err := h.intake.Approve(t.Context(), first, "bob"); err != nil {
		t.Fatal(err)
	}
	h.request("acme", "20")

	p2, stop2 := h.run()
	defer stop2()
	h.caughtUp(p2)
	got := h.seen()
	if len(got) != 3 {
		t.Fatalf("published %+v, want requested, approved, requested", got)
	}
	if p2.Published() != 2 {
		t.Errorf("the second publisher published %d, want 2", p2.Published())
	}
}

// The de-duplication window (2 minutes) cannot stop a replay of the log
// that comes later than that, so the publishers do not rely on it: each
// resumes after the last message's source sequence, and a publish that
// expects an older end of the stream is refused by the server.
func TestRacingAndRestartedPublishersPublishNothingTwice(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "100")
	id := h.request("acme", "10")
	if _, err := h.intake.Approve(t.Context(), id, "bob"); err != nil {
		t.Fatal(err)
	}
	p, stop := h.run()
	h.caughtUp(p)
	stop()
	before := len(h.seen())

	// Replay: a new publisher, and a second one racing it on the same stream.
	pa, stopA := h.run()
	pb, stopB := h.run()
	h.request("acme", "5")
	h.caughtUp(pa)
	h.caughtUp(pb)
	stopA()
	stopB()
	if got := len(h.seen()); got != before+1 {
		t.Fatalf("%d notifications after the replay, want %d: %+v", got, before+1, h.seen())
	}
}

func TestAForgedEventIsNeverAnnounced(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "100")
	p, stop := h.run()
	defer stop()
	id := h.request("acme", "10")
	h.caughtUp(p)
	k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
	_, pos, err := h.store.Load(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	// A full-access identity appends "rejected" without the event key.
	forged := eventstoretest.Forged(h.store.Subject(k), pos, aggregate.EventRejected, aggregate.EventSchemaVersion,
		[]byte(`{"reason":"cancelled","at":"2026-01-01T00:00:00Z"}`))
	if _, err := h.js.PublishMsg(t.Context(), forged); err != nil {
		t.Fatal(err)
	}
	h.request("acme", "20")
	h.caughtUp(p)
	got := h.seen()
	if len(got) != 2 || got[0].state != "requested" || got[1].state != "requested" {
		t.Fatalf("published %+v, want the two stored requests only", got)
	}
}
