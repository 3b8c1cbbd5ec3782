package webhook_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
)

// A webhook that asked for sending.paused gets the wallet's pause (whatever
// its account filter: the wallet is no account's) and nothing else; one
// that asked for withdrawal changes only never sees the wallet's.
func TestWalletNotificationsReachTheWebhooksThatAskedForThem(t *testing.T) {
	w := newWorld(t)
	wallet, withdrawals := newReceiver(t), newReceiver(t)
	g := webhook.Guard{AllowPrivate: true}
	hookW, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: wallet.url(),
		Events: []string{aggregate.WebhookEventSendingPaused, aggregate.WebhookEventWalletLow}, Accounts: []string{"acme"}, By: "olivia"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: withdrawals.url(),
		Events: []string{aggregate.WebhookEventStateChanged}, By: "olivia"}); err != nil {
		t.Fatal(err)
	}
	w.dispatch(w.svc, g)

	an := notify.NewWalletAnnouncer(w.js, w.stream, nil)
	for _, n := range []notify.WalletNotification{
		{Type: hotwallet.ChangeLow, Asset: "TRX", LowMark: "100"}, // asked for
		{Type: hotwallet.ChangeRecovered, Asset: "TRX"},           // not asked for
		{Type: hotwallet.ChangePaused},                            // asked for
	} {
		n.Wallet.Address = "TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy"
		if ok, err := an.Announce(t.Context(), n); !ok || err != nil {
			t.Fatalf("announce %s: %v %v", n.Type, ok, err)
		}
	}
	id := w.request("acme", "10")

	for _, want := range []string{hotwallet.ChangeLow, hotwallet.ChangePaused} {
		d := wallet.next(t)
		var n notify.WalletNotification
		if err := json.Unmarshal(d.body, &n); err != nil {
			t.Fatal(err)
		}
		if n.Type != want || d.eventID != n.EventID || n.Wallet.Address == "" {
			t.Fatalf("wallet webhook got %s (event id %q, header %q), want %s", n.Type, n.EventID, d.eventID, want)
		}
		if err := verifyWeirSignature(hookW.Secret, d.signature, d.body, w.clock.Now(), 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	d := withdrawals.next(t)
	var n notify.Notification
	if err := json.Unmarshal(d.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != aggregate.WebhookEventStateChanged || n.Withdrawal.ID != id {
		t.Fatalf("the withdrawal webhook's first delivery is %s %s, want the request of %s", n.Type, n.Withdrawal.ID, id)
	}
	select {
	case extra := <-wallet.got:
		t.Fatalf("the wallet webhook got more: %s", extra.body)
	case extra := <-withdrawals.got:
		t.Fatalf("the withdrawal webhook got more: %s", extra.body)
	case <-time.After(300 * time.Millisecond):
	}
	ds, _, err := w.svc.Deliveries(t.Context(), hookW.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Type != hotwallet.ChangePaused || ds[0].WithdrawalID != "" || ds[1].Type != hotwallet.ChangeLow {
		t.Fatalf("deliveries %+v", ds)
	}
}

func TestRegistrationAcceptsTheWalletEventsAndRefusesUnknownOnes(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	for _, ev := range aggregate.WebhookEventKinds {
		if _, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: rcv.url(), Events: []string{ev}, By: "olivia"}); err != nil {
			t.Fatalf("%s: %v", ev, err)
		}
	}
	_, err := w.svc.Register(t.Context(), webhook.RegisterInput{URL: rcv.url(), Events: []string{"wallet.stolen"}, By: "olivia"})
	var ae *aggregate.Error
	if !errors.As(err, &ae) || ae.Code != aggregate.CodeInvalidCommand || ae.Field != "events" {
		t.Fatalf("unknown event type: %v", err)
	}
}
