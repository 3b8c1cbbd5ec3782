package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/notify"
)

// requestDev asks for a small withdrawal from the dev account as alice.
func requestDev(t *testing.T, eng *engine, n int) string {
	t.Helper()
	w, _, err := eng.intake.Request(t.Context(), sagas.RequestInput{
		OperationID: fmt.Sprintf("5e1f0000-0000-4000-8000-%012d", n), Account: devFundingAccount,
		ToAddress: "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy", Amount: json.RawMessage(`"1.5"`), Asset: "USDT-TRC20", By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID
}

func dialPrincipal(t *testing.T, eng *engine, token string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(eng.natsURL, nats.Token(token), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// nextNotification fetches one message from a consumer and decodes it.
func nextNotification(t *testing.T, c jetstream.Consumer) (notify.Notification, jetstream.Msg) {
	t.Helper()
	msgs, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		var n notify.Notification
		if err := json.Unmarshal(m.Data(), &n); err != nil {
			t.Fatal(err)
		}
		return n, m
	}
	t.Fatalf("no notification: %v", msgs.Error())
	return notify.Notification{}, nil
}

// TestAProducerKeepsADurableConsumerOnWEIR_NOTIFYAcrossItsRestart: alice,
// a plain principal, creates a durable pull consumer as `nats consumer add
// WEIR_NOTIFY` would, reads and acks, goes away, and on coming back finds
// exactly what happened meanwhile. Ordered consumers (pull and push) work
// too.
func TestAProducerKeepsADurableConsumerOnWEIR_NOTIFYAcrossItsRestart(t *testing.T) {
	eng := startDevEngine(t)
	nc := dialPrincipal(t, eng, "dev-alice-token")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cons, err := js.CreateOrUpdateConsumer(ctx, notify.Stream, jetstream.ConsumerConfig{
		Durable: "alice_1", FilterSubject: notify.SubjectPrefix + "." + devFundingAccount + ".requested",
		AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("a producer creates a durable consumer on %s: %v", notify.Stream, err)
	}
	first := requestDev(t, eng, 1)
	n, m := nextNotification(t, cons)
	if n.Withdrawal.ID != first || n.Withdrawal.State != "requested" || n.Type != notify.TypeStateChanged {
		t.Fatalf("first notification %+v", n)
	}
	if m.Headers().Get(nats.MsgIdHdr) != n.EventID {
		t.Fatalf("Nats-Msg-Id %q, event_id %q", m.Headers().Get(nats.MsgIdHdr), n.EventID)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatalf("a producer acks its delivery: %v", err)
	}
	nc.Close()

	second := requestDev(t, eng, 2)
	nc2 := dialPrincipal(t, eng, "dev-alice-token")
	js2, _ := jetstream.New(nc2)
	cons2, err := js2.Consumer(ctx, notify.Stream, "alice_1")
	if err != nil {
		t.Fatalf("the durable consumer survives the producer: %v", err)
	}
	if n, _ := nextNotification(t, cons2); n.Withdrawal.ID != second {
		t.Fatalf("after the restart: %+v, want the request of %s", n, second)
	}

	if err := nc2.LastError(); err != nil {
		t.Fatalf("the consumer needed something the principal may not do: %v", err)
	}

	// Ordered consumers name themselves (an unowned name): alice, not
	// scoped to accounts, may use them — nats.go's, and the push kind of
	// `nats sub --stream` (created by name, never the nameless create).
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	oc, err := js2.OrderedConsumer(short, notify.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{notify.SubjectPrefix + ".*.requested"}})
	if err != nil {
		t.Fatalf("alice's ordered consumer: %v", err)
	}
	if n, _ := nextNotification(t, oc); n.Withdrawal.ID == "" {
		t.Fatalf("the ordered consumer read %+v", n)
	}
	legacy, err := nc2.JetStream(nats.MaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := legacy.SubscribeSync(notify.SubjectPrefix+".>", nats.OrderedConsumer(), nats.BindStream(notify.Stream), nats.DeliverAll())
	if err != nil {
		t.Fatalf("the push ordered consumer of `nats sub --stream`: %v", err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("reading through the push ordered consumer: %v", err)
	}
}

// TestAPaymentAnnouncesEachStateChangeOnceInOrder: a withdrawal that goes
// all the way through the real pipeline (ledger, worker, simulated chain)
// appears on WEIR_NOTIFY once per state change of its event list, in that
// order, each with a distinct event id, ending with the terminal state.
func TestAPaymentAnnouncesEachStateChangeOnceInOrder(t *testing.T) {
	eng := startDevEngine(t)
	id := requestDev(t, eng, 7)
	if _, err := eng.intake.Approve(t.Context(), id, "bob"); err != nil {
		t.Fatal(err)
	}
	nc, err := eng.emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(t.Context(), notify.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{notify.SubjectPrefix + "." + devFundingAccount + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	ids := map[string]bool{}
	for {
		n, _ := nextNotification(t, cons)
		if n.Withdrawal.ID != id {
			continue
		}
		if ids[n.EventID] {
			t.Fatalf("event %s announced twice", n.EventID)
		}
		ids[n.EventID] = true
		states = append(states, string(n.Withdrawal.State))
		if n.Withdrawal.Terminal {
			break
		}
	}
	evs, err := eng.intake.Events(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	prev := ""
	for _, e := range evs {
		if s := string(e.State); s != prev {
			want = append(want, s)
			prev = s
		}
	}
	if strings.Join(states, ",") != strings.Join(want, ",") {
		t.Fatalf("announced %v, the log's state changes are %v", states, want)
	}
	if len(states) < 3 {
		t.Fatalf("only %v", states)
	}
	t.Logf("announced %v", states)
}
