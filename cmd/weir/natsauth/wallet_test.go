package natsauth_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas/notify"
)

// Wallet notifications (weir.notify.wallet.>) are for the principals that
// see every account: operators and unscoped requesters and approvers, who
// may also read GET /v1/wallet. A principal scoped to accounts hears only
// its accounts' withdrawals: it can neither subscribe the wallet subjects
// nor keep a consumer on them, and nobody but weir can publish one.
func TestScopedPrincipalsCannotReadWalletNotificationsAndNobodyForgesThem(t *testing.T) {
	ps, err := api.NewPrincipals([]api.Principal{
		{Name: "olivia", Token: "olivia-token-01", Roles: []api.Role{api.RoleOperator}},
		{Name: "any", Token: "any-token-0001", Roles: []api.Role{api.RoleRequester}},
		{Name: "acme", Token: "acme-token-002", Roles: []api.Role{api.RoleRequester, api.RoleApprover}, Accounts: []string{"acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstoretest.Start(t, eventstoretest.Listen(), eventstoretest.Auth(natsauth.New(ps, nil)))
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := notify.EnsureStream(t.Context(), js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	connect := func(token string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.Token(token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	// Who hears a wallet notification weir publishes?
	subs := map[string]*nats.Subscription{}
	for _, tok := range []string{"olivia-token-01", "any-token-0001", "acme-token-002"} {
		nc := connect(tok)
		sub, err := nc.SubscribeSync(notify.WalletSubjectPrefix + ".>")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		denied := nc.LastError() != nil && strings.Contains(nc.LastError().Error(), "Permissions Violation")
		if want := tok == "acme-token-002"; denied != want {
			t.Fatalf("%s subscribing %s.>: denied %v, want %v", tok, notify.WalletSubjectPrefix, denied, want)
		}
		subs[tok] = sub
	}
	if ok, err := notify.NewWalletAnnouncer(js, stream, nil).Announce(t.Context(), walletLow()); !ok || err != nil {
		t.Fatalf("weir's announcement: %v %v", ok, err)
	}
	for tok, sub := range subs {
		wait := 5 * time.Second
		if tok == "acme-token-002" {
			wait = 300 * time.Millisecond // the others have heard it by now
		}
		_, err := sub.NextMsg(wait)
		if heard := err == nil; heard != (tok != "acme-token-002") {
			t.Fatalf("%s heard the wallet notification: %v (%v)", tok, heard, err)
		}
	}

	// The scoped principal tries a consumer on the wallet subjects.
	acme := connect("acme-token-002")
	ajs, err := jetstream.New(acme)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(t.Context(), time.Second)
	defer ccancel()
	if _, err := ajs.CreateConsumer(cctx, notify.Stream, jetstream.ConsumerConfig{Durable: "acme", // a name it owns
		FilterSubject: notify.WalletSubjectPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy}); err == nil {
		t.Fatal("a scoped principal created a consumer on the wallet notifications")
	}
	// ...and its own accounts' consumer still works.
	if _, err := ajs.CreateConsumer(t.Context(), notify.Stream, jetstream.ConsumerConfig{Durable: "acme",
		FilterSubject: notify.SubjectPrefix + ".acme.>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("a scoped principal's own consumer: %v", err)
	}

	// Forgery: an operator publishes a wallet notification into the stream.
	before, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ojs, err := jetstream.New(connect("olivia-token-01"))
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = ojs.Publish(pctx, notify.WalletSubjectPrefix+".sending.resumed", []byte(`{"type":"sending.resumed"}`))
	if err == nil {
		t.Fatal("an operator published a wallet notification")
	}
	// The stream takes atomic batches (weir's publisher sends a backlog as
	// one): a batch is published on the stream's subjects like anything
	// else, and refused the same way.
	onc := ojs.Conn()
	for i := 1; i <= 2; i++ {
		m := nats.NewMsg(notify.SubjectPrefix + ".acme.confirmed")
		m.Data = []byte(`{"type":"withdrawal.state_changed"}`)
		m.Header.Set("Nats-Batch-Id", "forged-batch")
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
		if i == 2 {
			m.Header.Set("Nats-Batch-Commit", "1")
			if r, err := onc.RequestMsg(m, time.Second); err == nil {
				t.Fatalf("an operator's atomic batch was answered: %s", r.Data)
			}
		} else if err := onc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	after, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.State.Msgs {
		t.Fatalf("the stream went from %d to %d messages", before.State.Msgs, after.State.Msgs)
	}
}

func walletLow() notify.WalletNotification {
	n := notify.WalletNotification{Type: "wallet.low", Asset: "USDT", LowMark: "50"}
	n.Wallet.Address = "TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy"
	return n
}
