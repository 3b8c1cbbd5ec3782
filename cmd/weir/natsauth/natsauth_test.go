package natsauth_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// TestScopedPrincipalsHearOnlyTheirAccountsNotifications: a principal
// scoped to "acme" may subscribe acme's notifications and not the others';
// an unscoped one may subscribe them all; a glob scope gets none over NATS.
func TestScopedPrincipalsHearOnlyTheirAccountsNotifications(t *testing.T) {
	ps, err := api.NewPrincipals([]api.Principal{
		{Name: "any", Token: "any-token-0001", Roles: []api.Role{api.RoleRequester}},
		{Name: "acme", Token: "acme-token-002", Roles: []api.Role{api.RoleRequester}, Accounts: []string{"acme"}},
		{Name: "ops", Token: "ops-token-0003", Roles: []api.Role{api.RoleRequester}, Accounts: []string{"ops-*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstoretest.Start(t, eventstoretest.Listen(), eventstoretest.Auth(natsauth.New(ps, nil)))
	try := func(token, subject string) bool {
		nc, err := nats.Connect(srv.ClientURL(), nats.Token(token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		last := nc.LastError()
		return last == nil || !strings.Contains(last.Error(), "Permissions Violation")
	}
	for _, c := range []struct {
		token, subject string
		allowed        bool
	}{
		{"any-token-0001", "weir.notify.>", true},
		{"acme-token-002", "weir.notify.withdrawal.acme.>", true},
		{"acme-token-002", "weir.notify.withdrawal.acme.confirmed", true},
		{"acme-token-002", "weir.notify.>", false},
		{"acme-token-002", "weir.notify.withdrawal.globex.>", false},
		{"acme-token-002", "weir.notify.withdrawal.*.confirmed", false},
		{"ops-token-0003", "weir.notify.withdrawal.ops-east.>", false},
		{"acme-token-002", "_INBOX.>", true},
	} {
		if got := try(c.token, c.subject); got != c.allowed {
			t.Errorf("%s subscribing %s: allowed %v, want %v", c.token, c.subject, got, c.allowed)
		}
	}
}

// TestEachPrincipalOwnsItsNotifyConsumersAndNoOneElses: on WEIR_NOTIFY,
// alice can create, read, pull from, ack on and delete consumers named
// alice and alice_1 … alice_9, and nothing of bob's: not create or redefine his durable
// (not even through the nameless legacy create whose body names it), not
// read its info, pull from it, ack its deliveries or delete it. bob's
// consumer is untouched afterwards and still delivers everything. A
// scoped principal keeps its own consumers only with a filter on its
// accounts. Consumers that name themselves (ordered ones) are refused.
func TestEachPrincipalOwnsItsNotifyConsumersAndNoOneElses(t *testing.T) {
	ps, err := api.NewPrincipals([]api.Principal{
		{Name: "alice", Token: "alice-token-01", Roles: []api.Role{api.RoleRequester}},
		{Name: "bob", Token: "bob-token-0002", Roles: []api.Role{api.RoleRequester}},
		{Name: "alice_2", Token: "alice2-token-3", Roles: []api.Role{api.RoleRequester}},
		{Name: "carol", Token: "carol-token-04", Roles: []api.Role{api.RoleRequester}, Accounts: []string{"acme"}},
		{Name: "olivia", Token: "olivia-token-5", Roles: []api.Role{api.RoleOperator}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstoretest.Start(t, eventstoretest.Listen(), eventstoretest.Auth(natsauth.New(ps, nil)))
	ctx := t.Context()
	weir, _ := jetstream.New(srv.Conn())
	stream, err := weir.CreateStream(ctx, jetstream.StreamConfig{Name: natsauth.NotifyStream, Subjects: []string{"weir.notify.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, acct := range []string{"acme", "globex", "acme"} {
		if _, err := weir.Publish(ctx, "weir.notify.withdrawal."+acct+".requested", []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	dial := func(token string) (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(srv.ClientURL(), nats.Token(token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js
	}
	_, bobJS := dial("bob-token-0002")
	bobCfg := jetstream.ConsumerConfig{Durable: "bob", FilterSubject: "weir.notify.withdrawal.acme.>", AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := bobJS.CreateOrUpdateConsumer(ctx, natsauth.NotifyStream, bobCfg); err != nil {
		t.Fatalf("bob keeps his own durable: %v", err)
	}
	before, err := stream.Consumer(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}

	// refused reports whether the server refused a publish as a
	// permissions violation (each try on a fresh connection).
	refused := func(token, subject, body string) bool {
		t.Helper()
		nc, _ := dial(token)
		msg := nats.NewMsg(subject)
		msg.Data, msg.Reply = []byte(body), nc.NewRespInbox()
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		last := nc.LastError()
		return last != nil && strings.Contains(last.Error(), "Permissions Violation")
	}
	const api = "$JS.API.CONSUMER."
	redefine := `{"stream_name":"WEIR_NOTIFY","config":{"name":"bob","ack_policy":"explicit","filter_subject":"weir.notify.withdrawal.nothing.>"}}`
	for _, a := range []struct{ who, token, subject, body string }{
		{"alice", "alice-token-01", api + "CREATE.WEIR_NOTIFY.bob", redefine},
		{"alice", "alice-token-01", api + "CREATE.WEIR_NOTIFY.bob.weir.notify.withdrawal.nothing.>", redefine},
		{"alice", "alice-token-01", api + "DURABLE.CREATE.WEIR_NOTIFY.bob", redefine},
		{"alice (nameless create naming bob in the body)", "alice-token-01", api + "CREATE.WEIR_NOTIFY", redefine},
		{"alice", "alice-token-01", api + "INFO.WEIR_NOTIFY.bob", ""},
		{"alice", "alice-token-01", api + "MSG.NEXT.WEIR_NOTIFY.bob", `{"batch":10}`},
		{"alice", "alice-token-01", api + "DELETE.WEIR_NOTIFY.bob", ""},
		{"alice", "alice-token-01", "$JS.ACK.WEIR_NOTIFY.bob.1.1.1.1.0", "+ACK"},
		{"alice", "alice-token-01", "$JS.FC.WEIR_NOTIFY.bob.x", ""},
		{"alice (another principal's own name)", "alice-token-01", api + "CREATE.WEIR_NOTIFY.alice_2", `{}`},
		{"alice (one of bob's numbered names)", "alice-token-01", api + "MSG.NEXT.WEIR_NOTIFY.bob_3", `{"batch":10}`},
		{"alice (bob's, with a filter)", "alice-token-01", api + "CREATE.WEIR_NOTIFY.bob_1.weir.notify.>", `{}`},
		{"carol (scoped, a shared name)", "carol-token-04", api + "MSG.NEXT.WEIR_NOTIFY.shared-feed", `{"batch":10}`},
		{"carol (scoped, beyond her names)", "carol-token-04", api + "CREATE.WEIR_NOTIFY.carol-app.weir.notify.withdrawal.acme.>", `{}`},
		{"carol (scoped)", "carol-token-04", api + "MSG.NEXT.WEIR_NOTIFY.bob", `{"batch":10}`},
		{"carol (scoped, her name, no filter)", "carol-token-04", api + "CREATE.WEIR_NOTIFY.carol", `{}`},
		{"carol (scoped, her name, another account)", "carol-token-04", api + "CREATE.WEIR_NOTIFY.carol.weir.notify.withdrawal.globex.>", `{}`},
		{"carol (scoped, listing everyone's filters)", "carol-token-04", api + "LIST.WEIR_NOTIFY", `{}`},
		{"olivia (operator)", "olivia-token-5", api + "DELETE.WEIR_NOTIFY.bob", ""},
	} {
		if !refused(a.token, a.subject, a.body) {
			t.Errorf("%s: %s was let through", a.who, a.subject)
		}
	}
	after, err := stream.Consumer(ctx, "bob")
	if err != nil {
		t.Fatalf("bob's consumer after the attacks: %v", err)
	}
	if b, a := before.CachedInfo(), after.CachedInfo(); a.Config.FilterSubject != b.Config.FilterSubject || a.Delivered != b.Delivered || a.NumPending != 2 {
		t.Fatalf("bob's consumer changed: %+v, was %+v", a, b)
	}
	bobCons, err := bobJS.Consumer(ctx, natsauth.NotifyStream, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if batch, err := bobCons.FetchNoWait(10); err != nil {
		t.Fatal(err)
	} else if n := countMsgs(batch); n != 2 {
		t.Fatalf("bob pulled %d messages, want his 2", n)
	}

	// What alice owns works: a durable, a numbered one, an ordered consumer.
	aliceNC, aliceJS := dial("alice-token-01")
	for _, name := range []string{"alice", "alice_1", "alice_9"} {
		c, err := aliceJS.CreateOrUpdateConsumer(ctx, natsauth.NotifyStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("alice creates %s: %v", name, err)
		}
		msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("alice pulls from %s: %v", name, err)
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("alice acks on %s: %v", name, err)
		}
		if _, err := c.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if err := aliceJS.DeleteConsumer(ctx, natsauth.NotifyStream, name); err != nil {
			t.Fatalf("alice deletes %s: %v", name, err)
		}
	}
	if err := aliceNC.LastError(); err != nil {
		t.Fatalf("alice needed a right she lacks: %v", err)
	}
	// Not scoped, she may also use any name no other principal owns:
	// natscli's durables and nats.go's ordered consumers work.
	for _, name := range []string{"shared-feed", "alice_10", "alice-app"} {
		if _, err := aliceJS.CreateOrUpdateConsumer(ctx, natsauth.NotifyStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatalf("alice creates %s: %v", name, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	oc, err := aliceJS.OrderedConsumer(short, natsauth.NotifyStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("alice's ordered consumer: %v", err)
	}
	if _, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatalf("alice reads through her ordered consumer: %v", err)
	}
	if !refused("carol-token-04", api+"INFO.WEIR_NOTIFY.shared-feed", "") {
		t.Error("scoped carol read alice's shared-feed")
	}
	// carol, scoped, keeps hers on her account.
	_, carolJS := dial("carol-token-04")
	c, err := carolJS.CreateOrUpdateConsumer(ctx, natsauth.NotifyStream, jetstream.ConsumerConfig{Durable: "carol_1", FilterSubject: "weir.notify.withdrawal.acme.>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("carol's own consumer on acme: %v", err)
	}
	if batch, err := c.FetchNoWait(10); err != nil || countMsgs(batch) != 2 {
		t.Fatalf("carol pulls acme's two: %v", err)
	}
}

func countMsgs(b jetstream.MessageBatch) int {
	n := 0
	for range b.Messages() {
		n++
	}
	return n
}

// TestNotifyConsumerNamesAreTheNameAndNineNumberedOnes: the names a
// principal owns, without another principal's own name, and none for a
// name that cannot be a consumer name.
func TestNotifyConsumerNamesAreTheNameAndNineNumberedOnes(t *testing.T) {
	got := natsauth.NotifyConsumerNames("alice", func(n string) bool { return n == "alice_3" })
	want := []string{"alice", "alice_1", "alice_2", "alice_4", "alice_5", "alice_6", "alice_7", "alice_8", "alice_9"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", "a/b", `a\b`} {
		if got := natsauth.NotifyConsumerNames(bad, nil); got != nil {
			t.Errorf("%q owns %q", bad, got)
		}
	}
}
