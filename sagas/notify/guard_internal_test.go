package notify

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/hotwallet"
)

// The guard step by step: two publishers read the same position, a wallet
// notification moves the stream's end, the first publisher is refused,
// reads again, finds only the wallet message new and publishes; the
// second, whose position no longer has the last withdrawal notification,
// is refused and publishes nothing, even for a message id the server's
// de-duplication no longer remembers (a replay after the window, stood in
// for here by a second id for the same event).
func TestAPublishExpectingAnOldEndIsRefusedUnlessOnlyWalletMessagesCame(t *testing.T) {
	ctx := t.Context()
	js, stream := notifyStream(t, StreamConfig(1, true))
	quiet := slog.New(slog.DiscardHandler)
	a := NewPublisher(nil, js, stream, quiet)
	b := NewPublisher(nil, js, stream, quiet)
	for _, p := range []*Publisher{a, b} {
		pos, err := ReadPosition(ctx, stream)
		if err != nil || pos != (Position{}) {
			t.Fatalf("position of an empty stream: %+v %v", pos, err)
		}
		p.setPos(pos)
	}
	wallet := NewWalletAnnouncer(js, stream, quiet)
	announce := func(typ string) {
		t.Helper()
		n := WalletNotification{Type: typ, Asset: "USDT", LowMark: "50", Wallet: hotwallet.Status{Address: "T1"}}
		if ok, err := wallet.Announce(ctx, n); !ok || err != nil {
			t.Fatalf("announce %s: %v %v", typ, ok, err)
		}
	}
	note := func(rec eventstore.Record, state aggregate.State) Notification {
		return Notification{EventID: rec.EventID, Type: TypeStateChanged,
			Withdrawal: aggregate.WithdrawalView{ID: "w1", Account: "acme", State: state}}
	}
	e10 := eventstore.Record{Sequence: 10, EventID: "e10"}
	e11 := eventstore.Record{Sequence: 11, EventID: "e11"}

	announce(hotwallet.ChangeLow) // stream seq 1
	if err := a.publish(ctx, e10, note(e10, aggregate.StateRequested)); err != nil {
		t.Fatalf("a wallet notification in between stopped the publish: %v", err)
	}
	if got, want := a.Position(), (Position{NotifySeq: 2, SourceSeq: 10, StreamSeq: 2}); got != want || a.Published() != 1 {
		t.Fatalf("after the publish: %+v (published %d), want %+v", got, a.Published(), want)
	}

	replay := e10
	replay.EventID = "e10-after-the-window"
	if err := b.publish(ctx, replay, note(replay, aggregate.StateRequested)); !errors.Is(err, errMoved) {
		t.Fatalf("a publisher behind the stream published again: %v", err)
	}
	announce(hotwallet.ChangeRecovered) // stream seq 3
	if err := b.publish(ctx, e11, note(e11, aggregate.StateApproved)); !errors.Is(err, errMoved) {
		t.Fatalf("a publisher behind the stream skipped ahead of what it had not seen: %v", err)
	}
	if b.Published() != 0 {
		t.Fatalf("b published %d", b.Published())
	}
	// Read again, b is where a left off, after the wallet message.
	pos, err := ReadPosition(ctx, stream)
	if want := (Position{NotifySeq: 2, SourceSeq: 10, StreamSeq: 3}); err != nil || pos != want {
		t.Fatalf("position %+v %v, want %+v", pos, err, want)
	}
	b.setPos(pos)
	if err := b.publish(ctx, e11, note(e11, aggregate.StateApproved)); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for seq := uint64(1); seq <= 4; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, m.Subject+"|"+m.Header.Get(HeaderSourceSeq))
	}
	want := []string{"weir.notify.wallet.usdt.low|", "weir.notify.withdrawal.acme.requested|10",
		"weir.notify.wallet.usdt.recovered|", "weir.notify.withdrawal.acme.approved|11"}
	for i := range want {
		if subjects[i] != want[i] {
			t.Fatalf("WEIR_NOTIFY holds %v, want %v", subjects, want)
		}
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 4 {
		t.Fatalf("WEIR_NOTIFY: %+v %v, want 4 messages", info, err)
	}
}
