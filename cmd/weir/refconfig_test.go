package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas/notify"
)

// referenceConfig is the server configuration docs/ ships.
var referenceConfig = filepath.Join("..", "..", "docs", "nats-server.conf")

// Passwords the reference config reads from the environment in tests.
const (
	refWeirPassword     = "weir-nats-password-for-tests"
	refAuditorPassword  = "auditor-nats-password-for-tests"
	refProducerPassword = "producer-nats-password-for-tests"
)

// startReferenceNATS runs nats-server in this process from the very file
// in docs/, on a free loopback port and a private store directory, and
// returns its client URL.
func startReferenceNATS(t *testing.T) string {
	t.Helper()
	t.Setenv("WEIR_NATS_PASSWORD", refWeirPassword)
	t.Setenv("WEIR_AUDITOR_NATS_PASSWORD", refAuditorPassword)
	t.Setenv("WEIR_PRODUCER_NATS_PASSWORD", refProducerPassword)
	opts, err := server.ProcessConfigFile(referenceConfig)
	if err != nil {
		t.Fatalf("reference config %s: %v", referenceConfig, err)
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	srv := eventstoretest.StartServer(t, opts)
	// The weir user's password is for the engine, not for every client
	// command a test runs later in this process.
	t.Setenv("WEIR_NATS_PASSWORD", "")
	return srv.ClientURL()
}

// startReferenceEngine starts serve in this process on the reference
// config's NATS at url, as its weir user, without --event-key.
func startReferenceEngine(t *testing.T, url string) *engine {
	t.Helper()
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSURL: url, Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
		NATSCreds: natsCreds{user: "weir", password: refWeirPassword},
	}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return eng
}

// refConfigOptions reads docs/nats-server.conf (passwords set to dummies).
func refConfigOptions(t *testing.T) *server.Options {
	t.Helper()
	t.Setenv("WEIR_NATS_PASSWORD", "x")
	t.Setenv("WEIR_AUDITOR_NATS_PASSWORD", "x")
	t.Setenv("WEIR_PRODUCER_NATS_PASSWORD", "x")
	opts, err := server.ProcessConfigFile(referenceConfig)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// dialRefWeir connects as the reference config's weir user, on weir's own
// inbox prefix, to look at what the attacks left.
func dialRefWeir(t *testing.T, url string) *nats.Conn {
	t.Helper()
	weir, err := nats.Connect(url, nats.UserInfo("weir", refWeirPassword), nats.CustomInboxPrefix(eventstore.InternalInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(weir.Close)
	return weir
}

// TestReferenceConfigGivesTheAuditorRoleExactly: the auditor user of
// docs/nats-server.conf has the permissions the embedded server gives the
// auditor role, so a new durable consumer protected in code is protected
// in the shipped config too.
func TestReferenceConfigGivesTheAuditorRoleExactly(t *testing.T) {
	opts := refConfigOptions(t)
	allow, deny := natsauth.AuditorPublish()
	for _, u := range opts.Users {
		if u.Username != "auditor" {
			continue
		}
		p := u.Permissions
		if p == nil || p.Publish == nil || !slices.Equal(p.Publish.Allow, allow) || !slices.Equal(p.Publish.Deny, deny) {
			t.Fatalf("auditor in %s:\n%+v\nwant publish allow %q deny %q", referenceConfig, p.Publish, allow, deny)
		}
		if p.Subscribe == nil || !slices.Equal(p.Subscribe.Allow, []string{natsauth.AuditInboxPrefix + ".>"}) {
			t.Fatalf("auditor subscribe %+v", p.Subscribe)
		}
		return
	}
	t.Fatalf("no auditor user in %s", referenceConfig)
}

// TestReferenceConfigGivesProducersWhatTheEmbeddedServerGives: the producer
// user of docs/nats-server.conf publishes what the embedded server lets an
// unscoped principal publish, through the imported API prefix (consumers
// on WEIR_NOTIFY under any name; never the nameless create).
func TestReferenceConfigGivesProducersWhatTheEmbeddedServerGives(t *testing.T) {
	opts := refConfigOptions(t)
	want := natsauth.ProducerPublish("$JS.WEIR.API")
	for _, u := range opts.Users {
		if u.Username != "producer" {
			continue
		}
		if p := u.Permissions; p == nil || p.Publish == nil || !slices.Equal(p.Publish.Allow, want) || len(p.Publish.Deny) > 0 {
			t.Fatalf("producer in %s:\n%+v\nwant publish allow %q", referenceConfig, u.Permissions, want)
		}
		return
	}
	t.Fatalf("no producer user in %s", referenceConfig)
}

// TestReferenceConfigRefusesProducersTheNamelessCreate: under
// docs/nats-server.conf the producer user (which all producers share, so
// they share consumer names too; per-principal users get the embedded
// server's deny rules) cannot redefine a consumer through the nameless
// create, whose body names it, nor through an API it was not given.
func TestReferenceConfigRefusesProducersTheNamelessCreate(t *testing.T) {
	url := startReferenceNATS(t)
	eng := startReferenceEngine(t, url)
	weir := dialRefWeir(t, url)
	ctx := t.Context()
	js, _ := jetstream.New(weir)
	requestDev(t, eng, 1)
	if _, err := js.CreateOrUpdateConsumer(ctx, notify.Stream, jetstream.ConsumerConfig{
		Durable: "bob", FilterSubject: notify.SubjectPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, notify.Stream, "bob")
	if err != nil {
		t.Fatal(err)
	}
	before := cons.CachedInfo()
	const api = "$JS.WEIR.API.CONSUMER."
	redefine := `{"stream_name":"WEIR_NOTIFY","config":{"name":"bob","ack_policy":"explicit","filter_subject":"weir.notify.nothing.>"}}`
	for _, a := range [][2]string{
		{api + "CREATE.WEIR_NOTIFY", redefine},
		{"$JS.WEIR.API.CONSUMER.CREATE.WEIR_EVENTS.x", `{"stream_name":"WEIR_EVENTS","config":{"name":"x"}}`},
		{"$JS.API.CONSUMER.DELETE.WEIR_NOTIFY.bob", ""},
	} {
		nc, err := nats.Connect(url, nats.UserInfo("producer", refProducerPassword), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(a[0])
		msg.Data, msg.Reply = []byte(a[1]), nc.NewRespInbox()
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if last := nc.LastError(); last == nil || !strings.Contains(last.Error(), "Permissions Violation") {
			t.Errorf("the producer user's %s was let through (%v)", a[0], last)
		}
		nc.Close()
	}
	after, err := js.Consumer(ctx, notify.Stream, "bob")
	if err != nil {
		t.Fatalf("bob's consumer after the attacks: %v", err)
	}
	// NumPending is not compared: notifications of the request above may
	// still be arriving; a pull, ack or redefinition shows in these fields.
	if a := after.CachedInfo(); a.Config.FilterSubject != before.Config.FilterSubject || a.Delivered != before.Delivered || a.AckFloor != before.AckFloor || a.NumAckPending != before.NumAckPending {
		t.Fatalf("bob's consumer changed: %+v, was %+v", a, before)
	}
}

// TestReferenceConfigRefusesEveryAttackOfTheThreatTable: weir serves on an
// external server running docs/nats-server.conf (WEIR account), producers
// connect in their own account, auditors in WEIR with read rights; every
// attack is refused there too, and the producer's commands and the
// auditor's audit still work.
func TestReferenceConfigRefusesEveryAttackOfTheThreatTable(t *testing.T) {
	url := startReferenceNATS(t)
	eng := startReferenceEngine(t, url)
	weir := dialRefWeir(t, url)
	users := map[string][2]string{
		roleProducer: {"producer", refProducerPassword},
		roleAuditor:  {"auditor", refAuditorPassword},
	}
	b := &boundary{weir: weir, kvBucket: "weir_projections", dial: func(t *testing.T, role string) *nats.Conn {
		nc, err := nats.Connect(url, nats.UserInfo(users[role][0], users[role][1]), nats.MaxReconnects(0))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		return nc
	}}
	runThreatTable(t, b)

	// What each may do still works: a producer's command through the
	// service import, and an audit as the auditor.
	code, out, errOut := runWeir(t, "credit", "--nats-url", url, "--nats-user", "producer", "--nats-password", refProducerPassword,
		"--token", "dev-olivia-token", "--account", "ref", "--credit-id", "c1", "--amount", "5")
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = runWeir(t, "audit", "--all", "--tron-node", "", "--nats-url", url, "--nats-user", "auditor", "--nats-password", refAuditorPassword)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit", out, "OK")
	// weir's own user is restricted too (its subjects, its inbox prefix,
	// replies by allow_responses): a withdrawal reaches the history stream
	// and everything weir runs is still healthy.
	code, out, errOut = runWeir(t, "request", "--nats-url", url, "--nats-user", "producer", "--nats-password", refProducerPassword,
		"--token", "dev-alice-token", "--id", "5e0b7c1a-1111-4222-8333-0000000000bb", "--account", "ref",
		"--to", "TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY", "--amount", "1")
	wantCode(t, code, 0, out, errOut)
	js, _ := jetstream.New(weir)
	for deadline := time.Now().Add(20 * time.Second); ; {
		st, err := js.Stream(t.Context(), "WEIR_HISTORY")
		if err == nil && st.CachedInfo().State.Msgs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing reached WEIR_HISTORY under the reference config: %v", err)
		}
		<-time.After(20 * time.Millisecond) // the history follows the log asynchronously
	}
	eng.verified = cachedCheck{}
	if code, _, body := (httpClient{t: t, base: "http://" + eng.httpAddr}).do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz under the reference config: %d %v", code, body)
	}
}

// TestNATSPasswordsAreNeverLogged: weir serve given its NATS password in
// --nats-url (as people do) logs the URL redacted, and a client command
// that cannot connect names the server without the password.
func TestNATSPasswordsAreNeverLogged(t *testing.T) {
	url := startReferenceNATS(t)
	withPassword := strings.Replace(url, "nats://", "nats://weir:"+refWeirPassword+"@", 1)
	var logs syncBuffer
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSURL: withPassword, Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "debug",
	}
	cfg.natsLog = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), &logs)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "weir:REDACTED@") {
		t.Fatalf("the external NATS URL is not logged (redacted):\n%s", logs.String())
	}
	code, out, errOut := runWeir(t, "show", "--nats-url", "nats://weir:"+refWeirPassword+"@127.0.0.1:1", "--token", "x", "11111111-2222-4333-8444-000000000001")
	if code == 0 {
		t.Fatalf("connected to nothing: %s", out)
	}
	for what, text := range map[string]string{"serve log": logs.String(), "client output": out + errOut} {
		if strings.Contains(text, refWeirPassword) {
			t.Fatalf("%s shows the NATS password:\n%s", what, text)
		}
	}
}

// TestReferenceConfigLetsProducersKeepADurableConsumerOnWEIR_NOTIFY: on
// docs/nats-server.conf a producer (its own account, no JetStream of its
// own) keeps a durable pull consumer on WEIR_NOTIFY through the WEIR
// account's exports, across its own restart, and can reach no other
// stream that way.
func TestReferenceConfigLetsProducersKeepADurableConsumerOnWEIR_NOTIFY(t *testing.T) {
	url := startReferenceNATS(t)
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSURL: url, Sync: "lazy", Workers: 0, memory: true,
		SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn", TronHTTP: "",
		NATSCreds: natsCreds{user: "weir", password: refWeirPassword},
	}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	dial := func() (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(url, nats.UserInfo("producer", refProducerPassword), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.NewWithAPIPrefix(nc, "$JS.WEIR.API")
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	ctx := t.Context()
	nc, js := dial()
	cons, err := js.CreateOrUpdateConsumer(ctx, notify.Stream, jetstream.ConsumerConfig{
		Durable: "producer_1", FilterSubject: notify.SubjectPrefix + ".>", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("durable consumer through the imports: %v", err)
	}
	first := requestDev(t, eng, 1)
	n, m := nextNotification(t, cons)
	if n.Withdrawal.ID != first {
		t.Fatalf("first: %+v", n)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatalf("ack through the import: %v", err)
	}
	nc.Close()
	second := requestDev(t, eng, 2)
	_, js2 := dial()
	cons2, err := js2.Consumer(ctx, notify.Stream, "producer_1")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := nextNotification(t, cons2); n.Withdrawal.ID != second {
		t.Fatalf("after the restart: %+v", n)
	}
	// The same prefix reaches nothing else: no consumer on the log.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js2.CreateOrUpdateConsumer(short, "WEIR_EVENTS", jetstream.ConsumerConfig{Durable: "peek", AckPolicy: jetstream.AckExplicitPolicy}); err == nil {
		t.Fatal("a producer created a consumer on WEIR_EVENTS")
	}
}
