package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas/hotwallet"
)

// dues makes n notifications announcing log seqs from, from+1, …, with a
// record that announces nothing after each.
func dues(t *testing.T, from uint64, n int) ([]due, int) {
	t.Helper()
	var ds []due
	for i := range n {
		rec := eventstore.Record{Sequence: from + 2*uint64(i), EventID: fmt.Sprintf("e%d", from+2*uint64(i))}
		msg, err := message(rec, Notification{EventID: rec.EventID, Type: TypeStateChanged,
			Withdrawal: aggregate.WithdrawalView{ID: "w1", Account: "acme", State: aggregate.StateRequested}})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, due{seq: rec.Sequence, eventID: rec.EventID, msg: msg}, due{seq: rec.Sequence + 1})
	}
	return ds, n
}

// The batch keeps the single publish's guard: a wallet notification in
// between is read past, and a publisher whose position lost the race is
// refused, the whole batch, even for ids the de-duplication forgot.
func TestABatchExpectingAnOldEndIsRefusedWholeUnlessOnlyWalletMessagesCame(t *testing.T) {
	ctx := t.Context()
	js, stream := notifyStream(t, StreamConfig(1, true))
	quiet := slog.New(slog.DiscardHandler)
	a := NewPublisher(nil, js, stream, quiet)
	b := NewPublisher(nil, js, stream, quiet)
	wallet := NewWalletAnnouncer(js, stream, quiet)
	if ok, err := wallet.Announce(ctx, WalletNotification{Type: hotwallet.ChangeLow, Asset: "USDT", LowMark: "50",
		Wallet: hotwallet.Status{Address: "T1"}}); !ok || err != nil {
		t.Fatalf("announce: %v %v", ok, err)
	}
	// Both read the stream before the wallet message: it ended at 0.
	ds, n := dues(t, 10, 20)
	if done, err := a.publishBatch(ctx, ds, n); !done || err != nil {
		t.Fatalf("a wallet notification in between stopped the batch: %v %v", done, err)
	}
	if got, want := a.Position(), (Position{NotifySeq: 21, SourceSeq: 49, StreamSeq: 21}); got != want || a.Published() != 20 {
		t.Fatalf("after the batch: %+v (published %d), want %+v", got, a.Published(), want)
	}
	later, m := dues(t, 50, 20)
	later[0].eventID = "e10-after-the-window" // a replay the server's de-duplication cannot stop
	if _, err := b.publishBatch(ctx, later, m); !errors.Is(err, errMoved) {
		t.Fatalf("a publisher behind the stream published a batch: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != 21 || b.Published() != 0 {
		t.Fatalf("WEIR_NOTIFY: %+v %v, b published %d; want the wallet message and one batch of 20", info.State, err, b.Published())
	}
	for seq := uint64(2); seq <= 21; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := msg.Header.Get(HeaderSourceSeq), fmt.Sprint(10+2*(seq-2)); got != want {
			t.Fatalf("message %d announces %s, want %s", seq, got, want)
		}
	}
}

// A stream that does not take atomic batches (made by an older weir, or
// an operator's own config) costs the batching, not a notification: the
// publisher publishes one at a time from then on.
func TestAStreamWithoutAtomicBatchesGetsEveryNotificationOneAtATime(t *testing.T) {
	ctx := t.Context()
	cfg := StreamConfig(1, true)
	cfg.AllowAtomicPublish = false
	js, stream := notifyStream(t, cfg)
	p := NewPublisher(nil, js, stream, slog.New(slog.DiscardHandler))
	p.UseBatches()
	ds, n := dues(t, 10, 20)
	sendQueued(t, p, ds)
	info, ierr := stream.Info(ctx)
	if ierr != nil || info.State.Msgs != uint64(n) || p.Published() != uint64(n) || p.batches {
		t.Fatalf("WEIR_NOTIFY %+v %v, published %d, batching %v: want %d published one at a time", info.State, ierr, p.Published(), p.batches, n)
	}
}

// sendQueued runs p's sender over ds, all queued before it starts, until
// the position reaches the last of them.
func sendQueued(t *testing.T, p *Publisher, ds []due) {
	t.Helper()
	queue := make(chan due, len(ds))
	for _, d := range ds {
		queue <- d
	}
	ctx, cancel := context.WithCancel(t.Context())
	sent := make(chan error, 1)
	go func() { sent <- p.send(ctx, queue) }()
	waitCtx, waitDone := context.WithTimeout(ctx, 10*time.Second)
	defer waitDone()
	if err := p.WaitFor(waitCtx, ds[len(ds)-1].seq); err != nil {
		t.Fatalf("the publisher stopped at %+v: %v", p.Position(), err)
	}
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("send: %v", err)
	}
}

func TestAQueuedBacklogGoesOutAsOneBatch(t *testing.T) {
	ctx := t.Context()
	js, stream := notifyStream(t, StreamConfig(1, true))
	p := NewPublisher(nil, js, stream, slog.New(slog.DiscardHandler))
	p.UseBatches()
	few, _ := dues(t, 10, minBatch-1) // too few to be worth a batch
	sendQueued(t, p, few)
	many, n := dues(t, 100, 40)
	sendQueued(t, p, many)
	if p.Published() != uint64(minBatch-1+n) {
		t.Fatalf("published %d, want %d", p.Published(), minBatch-1+n)
	}
	batches := map[string]int{}
	for seq := uint64(1); seq <= p.Published(); seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		batches[m.Header.Get("Nats-Batch-Id")]++
	}
	if len(batches) != 2 || batches[""] != minBatch-1 {
		t.Fatalf("messages by batch: %v; want %d alone and one batch of %d", batches, minBatch-1, n)
	}
}

// notifyStream starts a server and creates WEIR_NOTIFY on it with cfg.
func notifyStream(t *testing.T, cfg jetstream.StreamConfig) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	srv := eventstoretest.Start(t)
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateOrUpdateStream(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return js, stream
}

// A publisher that lost the race re-sends ids the winner stored; inside a
// batch the server reports that (10201) before the stale expectation.
// It is the same news, "the stream moved": re-read, and keep batching.
func TestALosingBatchReadsTheStreamAgainAndKeepsBatching(t *testing.T) {
	ctx := t.Context()
	js, stream := notifyStream(t, StreamConfig(1, true))
	quiet := slog.New(slog.DiscardHandler)
	a, b := NewPublisher(nil, js, stream, quiet), NewPublisher(nil, js, stream, quiet)
	a.UseBatches()
	b.UseBatches()
	ds, n := dues(t, 10, 20)
	if done, err := a.publishBatch(ctx, ds, n); !done || err != nil {
		t.Fatalf("a: %v %v", done, err)
	}
	same, _ := dues(t, 10, 20)
	if done, err := b.publishBatch(ctx, same, n); done || !errors.Is(err, errMoved) || !b.batches {
		t.Fatalf("b, behind the stream: done %v, err %v, batching %v; want errMoved, still batching", done, err, b.batches)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != uint64(n) {
		t.Fatalf("WEIR_NOTIFY: %+v %v, want %d messages", info.State, err, n)
	}
}

// The position says what is published: a notification that cannot be
// published holds it, and the records after it, which announce nothing,
// do not move it past.
func TestThePositionNeverPassesANotificationNotYetPublished(t *testing.T) {
	js, stream := notifyStream(t, StreamConfig(1, true))
	p := NewPublisher(nil, js, stream, slog.New(slog.DiscardHandler))
	ds, _ := dues(t, 10, 2)                           // 10: published; 11: nothing; 12: cannot be; 13: nothing
	ds[2].msg.Subject = "weir.nowhere.acme.requested" // no stream takes it
	queue := make(chan due, len(ds))
	for _, d := range ds {
		queue <- d
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.send(ctx, queue); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send: %v, want the failed publish", err)
	}
	if got := p.Position().SourceSeq; got != 11 {
		t.Fatalf("position at log seq %d, want 11 (before the notification that failed)", got)
	}
}
