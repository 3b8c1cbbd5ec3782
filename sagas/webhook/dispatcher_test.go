package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
	"github.com/weir-payouts/weir/tron"
)

// receiver is a real HTTP endpoint on a fixed loopback address that can go
// down (its listener closed: connection refused) and come back.
type receiver struct {
	t    *testing.T
	addr string
	got  chan delivered
	mu   sync.Mutex
	srv  *http.Server
}

type delivered struct {
	eventID, signature string
	body               []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, got: make(chan delivered, 100)}
	r.up("")
	t.Cleanup(r.down)
	return r
}

func (r *receiver) up(addr string) {
	r.t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.got <- delivered{req.Header.Get(webhook.HeaderEventID), req.Header.Get(webhook.HeaderSignature), body}
		w.WriteHeader(http.StatusNoContent)
	})}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *receiver) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

func (r *receiver) url() string { return "http://" + r.addr + "/weir" }

// world is a log, its notifications and the webhook room on a real
// embedded nats-server.
type world struct {
	t         *testing.T
	srv       *eventstoretest.Server
	store     *eventstore.Store
	intake    *sagas.Intake
	js        jetstream.JetStream
	stream    jetstream.Stream
	svc       *webhook.Service
	clock     *fakeClock
	n         int
	outcomes  map[string]int
	outcomeMu sync.Mutex
	recorded  chan string // each outcome, once recorded
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	w := &world{t: t, srv: eventstoretest.Start(t), clock: newFakeClock(), outcomes: map[string]int{}, recorded: make(chan string, 1000)}
	w.store = w.srv.Store(ctx, eventlog.NewRegistry())
	repo := sagas.NewRepo(w.store)
	w.intake = sagas.NewIntake(repo, sagas.NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.DiscardHandler)), nil)
	w.intake.SetPolicyQuorum(1)
	if _, err := w.intake.SetPolicy(ctx, aggregate.DefaultPolicy(), "test"); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.js, err = jetstream.New(w.srv.Conn()); err != nil {
		t.Fatal(err)
	}
	if w.stream, err = notify.EnsureStream(ctx, w.js, 1, true); err != nil {
		t.Fatal(err)
	}
	w.svc = w.openService(webhook.Guard{AllowPrivate: true})
	p := notify.NewPublisher(w.store, w.js, w.stream, slog.New(slog.DiscardHandler))
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(pctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, _, err := w.intake.Credit(ctx, sagas.CreditInput{Account: "acme", CreditID: "c0", Amount: json.RawMessage(`"1000"`), By: "olivia"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// openService opens the room on a connection of its own, as a restarted
// process would.
func (w *world) openService(g webhook.Guard) *webhook.Service {
	w.t.Helper()
	js, err := jetstream.New(w.srv.Conn())
	if err != nil {
		w.t.Fatal(err)
	}
	stream, err := js.Stream(w.t.Context(), notify.Stream)
	if err != nil {
		w.t.Fatal(err)
	}
	svc, err := webhook.Open(w.t.Context(), js, w.srv.Store(w.t.Context(), eventlog.NewRegistry()), stream, webhook.Config{Memory: true, Guard: g, Now: w.clock.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	return svc
}

// dispatch runs a dispatcher until the returned stop is called.
func (w *world) dispatch(svc *webhook.Service, g webhook.Guard) (stop func()) {
	w.t.Helper()
	js, _ := jetstream.New(w.srv.Conn())
	d := webhook.NewDispatcher(webhook.DispatcherConfig{
		Service: svc, Store: w.srv.Store(w.t.Context(), eventlog.NewRegistry()), JS: js, Guard: g, Clock: w.clock,
		Logger: slog.New(slog.DiscardHandler),
		OnOutcome: func(o string) {
			w.outcomeMu.Lock()
			w.outcomes[o]++
			w.outcomeMu.Unlock()
			w.recorded <- o
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	w.t.Cleanup(stop)
	return stop
}

func (w *world) outcome(o string) int {
	w.outcomeMu.Lock()
	defer w.outcomeMu.Unlock()
	return w.outcomes[o]
}

func address(label string) string {
	sum := sha256.Sum256([]byte("weir webhook test " + label))
	var a tron.Address
	a[0] = tron.AddressPrefix
	copy(a[1:], sum[:20])
	return a.String()
}

func (w *world) request(account, amount string) string {
	w.t.Helper()
	w.n++
	wd, _, err := w.intake.Request(w.t.Context(), sagas.RequestInput{
		OperationID: fmt.Sprintf("7e000000-0000-4000-8000-%012d", w.n), Account: account, ToAddress: address(account),
		Amount: json.RawMessage(`"` + amount + `"`), Asset: aggregate.USDT.Code, By: "alice"})
	if err != nil {
		w.t.Fatal(err)
	}
	return wd.ID
}

func (r *receiver) next(t *testing.T) delivered {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-t.Context().Done():
		t.Fatal("test ended waiting for a delivery")
	}
	return delivered{}
}

// TestAReceiverDownThenBackGetsEverythingInOrderAcrossARestart: the
// receiver is down while a withdrawal goes requested → approved →
// rejected and another is requested; the first delivery is retried on the
// backoff (2 s, then 4 s), weir's dispatcher restarts in between and goes
// on counting the same delivery's attempts; once the receiver is back,
// everything arrives once, in order, signed as documented.
func TestAReceiverDownThenBackGetsEverythingInOrderAcrossARestart(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	addr := rcv.addr
	rcv.down()

	hook, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: rcv.url(), Events: []string{"withdrawal.state_changed"}, Accounts: []string{"acme"}, By: "olivia"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hook.Secret, "whsec_") || hook.ID == "" {
		t.Fatalf("registration %+v", hook)
	}
	g := webhook.Guard{AllowPrivate: true}
	stop := w.dispatch(w.svc, g)

	first := w.request("acme", "10")
	if _, err := w.intake.Approve(t.Context(), first, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.intake.Cancel(t.Context(), first, "alice", false); err != nil {
		t.Fatal(err)
	}
	second := w.request("acme", "20")

	if d := w.clock.awaitWait(t); d != webhook.DefaultFirstRetry {
		t.Fatalf("first retry after %v, want %v", d, webhook.DefaultFirstRetry)
	}
	w.clock.Advance(webhook.DefaultFirstRetry)
	if d := w.clock.awaitWait(t); d != 2*webhook.DefaultFirstRetry {
		t.Fatalf("second retry after %v, want %v", d, 2*webhook.DefaultFirstRetry)
	}
	ds, _, err := w.svc.Deliveries(t.Context(), hook.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Attempts != 2 || ds[0].Status != webhook.StatusPending || ds[0].WithdrawalID != first || ds[0].NextAttempt == nil {
		t.Fatalf("deliveries while down: %+v", ds)
	}

	// weir restarts mid-delivery: a new dispatcher on new connections.
	stop()
	svc2 := w.openService(g)
	w.dispatch(svc2, g)
	if d := w.clock.awaitWait(t); d != 2*webhook.DefaultFirstRetry {
		t.Fatalf("after the restart the retry waits %v, want the remaining %v", d, 2*webhook.DefaultFirstRetry)
	}

	rcv.up(addr)
	w.clock.Advance(2 * webhook.DefaultFirstRetry)
	want := []struct{ id, state string }{{first, "requested"}, {first, "approved"}, {first, "rejected"}, {second, "requested"}}
	for i, wt := range want {
		d := rcv.next(t)
		var n notify.Notification
		if err := json.Unmarshal(d.body, &n); err != nil {
			t.Fatal(err)
		}
		if n.Withdrawal.ID != wt.id || string(n.Withdrawal.State) != wt.state || n.Type != "withdrawal.state_changed" {
			t.Fatalf("delivery %d: %s %s, want %s %s", i, n.Withdrawal.ID, n.Withdrawal.State, wt.id, wt.state)
		}
		if d.eventID != n.EventID {
			t.Fatalf("Weir-Event-Id %q, body event_id %q", d.eventID, n.EventID)
		}
		if err := verifyWeirSignature(hook.Secret, d.signature, d.body, w.clock.Now(), 5*60e9); err != nil {
			t.Fatalf("delivery %d: %v (%s)", i, err, d.signature)
		}
		if err := verifyWeirSignature("whsec_other", d.signature, d.body, w.clock.Now(), 5*60e9); err == nil {
			t.Fatal("a signature verifies under another secret")
		}
		tampered := append([]byte(nil), d.body...)
		tampered[len(tampered)-2] ^= 1
		if err := verifyWeirSignature(hook.Secret, d.signature, tampered, w.clock.Now(), 5*60e9); err == nil {
			t.Fatal("a tampered body verifies")
		}
	}
	for delivered := 0; delivered < 4; {
		select {
		case o := <-w.recorded:
			if o == webhook.OutcomeDelivered {
				delivered++
			}
		case <-t.Context().Done():
			return
		}
	}
	select {
	case d := <-rcv.got:
		t.Fatalf("a fifth delivery: %s", d.body)
	default:
	}
	ds, _, err = svc2.Deliveries(t.Context(), hook.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 4 {
		t.Fatalf("%d deliveries recorded: %+v", len(ds), ds)
	}
	oldest := ds[len(ds)-1]
	if oldest.Attempts != 3 || oldest.Status != webhook.StatusDelivered || len(oldest.RecentHistory) != 3 ||
		oldest.RecentHistory[0].Outcome != webhook.OutcomeFailed || oldest.RecentHistory[2].Outcome != webhook.OutcomeDelivered {
		t.Fatalf("first delivery's record: %+v", oldest)
	}
	if w.outcome(webhook.OutcomeFailed) != 2 || w.outcome(webhook.OutcomeDelivered) != 4 {
		t.Fatalf("outcomes %v", w.outcomes)
	}
}

// TestADeliveryIsGivenUpAfterMaxRetryAgeAndTheNextGoesOn: a receiver that
// never answers 2xx is retried with a capped backoff for MaxRetryAge (72 h,
// ≥ 24 h), then the delivery is abandoned and the next notification is
// tried.
func TestADeliveryIsGivenUpAfterMaxRetryAgeAndTheNextGoesOn(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	rcv.down()
	hook, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: rcv.url(), Events: []string{"withdrawal.state_changed"}, By: "olivia"})
	if err != nil {
		t.Fatal(err)
	}
	w.dispatch(w.svc, webhook.Guard{AllowPrivate: true})
	w.request("acme", "10")
	var waited, longest int64
	for waited < int64(webhook.DefaultMaxRetryAge) {
		d := w.clock.awaitWait(t)
		if int64(d) > longest {
			longest = int64(d)
		}
		waited += int64(d)
		w.clock.Advance(d)
	}
	if longest != int64(webhook.DefaultMaxBackoff) {
		t.Fatalf("longest wait %v, want the cap %v", longest, webhook.DefaultMaxBackoff)
	}
	// The next notification's first attempt fails too and waits 2 s.
	w.request("acme", "11")
	if d := w.clock.awaitWait(t); d != webhook.DefaultFirstRetry {
		t.Fatalf("the next delivery waits %v", d)
	}
	ds, _, err := w.svc.Deliveries(t.Context(), hook.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[1].Status != webhook.StatusAbandoned || ds[0].Status != webhook.StatusPending {
		t.Fatalf("deliveries %+v", ds)
	}
	if w.outcome(webhook.OutcomeAbandoned) != 1 {
		t.Fatalf("outcomes %v", w.outcomes)
	}
}

// TestTheDocumentedSnippetIsTheOneTested: docs/API.md shows receivers the
// verification function these tests run.
func TestTheDocumentedSnippetIsTheOneTested(t *testing.T) {
	src, err := os.ReadFile("snippet_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	snippet := s[strings.Index(s, "// --- snippet start ---")+len("// --- snippet start ---") : strings.Index(s, "// --- snippet end ---")]
	doc, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), strings.TrimSpace(snippet)) {
		t.Fatalf("docs/API.md does not show the tested snippet:\n%s", strings.TrimSpace(snippet))
	}
}
