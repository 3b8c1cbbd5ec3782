package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/sagas"
)

// The attacks of docs/SECURITY.md's threat table, each run through a real
// NATS connection as a principal would with the nats CLI, against weir's
// embedded server and against the reference server config (accounts).
// Every one must be refused by the NATS server itself, and afterwards the
// event stream, weir's durable consumer and the checkpoint bucket must be
// exactly as they were.

// boundary is one NATS deployment under attack.
type boundary struct {
	// dial connects as a principal of the role ("producer" or "auditor").
	dial func(t *testing.T, role string) *nats.Conn
	// weir is weir's own connection, to look at the state.
	weir *nats.Conn
	// kvBucket is the projections' checkpoint bucket.
	kvBucket string
}

// attack is one row of the threat table: what a principal tries over NATS.
type attack struct {
	name  string
	roles []string // who tries it; default both
	try   func(t *testing.T, nc *nats.Conn, b *boundary)
}

const (
	roleProducer = "producer"
	roleAuditor  = "auditor"
)

func pub(t *testing.T, nc *nats.Conn, subject string, body any) {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case nil:
	default:
		data, _ = json.Marshal(b)
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Reply = nc.NewRespInbox()
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}

func sub(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	if _, err := nc.SubscribeSync(subject); err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
}

// streamConfig is the event stream's config as JSON, with an edit applied.
func streamConfig(t *testing.T, b *boundary, edit func(*jetstream.StreamConfig)) jetstream.StreamConfig {
	t.Helper()
	js, _ := jetstream.New(b.weir)
	s, err := js.Stream(t.Context(), "WEIR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	edit(&cfg)
	return cfg
}

var threatTable = []attack{
	{name: "forge an event (nats pub weir.evt…)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		msg := nats.NewMsg("weir.evt.account.mallory")
		msg.Data = []byte(`{"account":"mallory","credit_id":"forged","amount":"5000000.000000","at":"2026-01-01T00:00:00Z"}`)
		msg.Header.Set("Weir-Event-Type", "account.credited")
		msg.Header.Set("Weir-Schema", "1")
		msg.Header.Set("Weir-Version", "1")
		msg.Header.Set("Weir-Prev-Seq", "0")
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
		msg.Header.Set("Nats-Msg-Id", "01JFORGEDFORGEDFORGEDFORGED")
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "forge a configuration (nats pub weir.evt.config.current: mallory an approver)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		msg := nats.NewMsg("weir.evt.config.current")
		msg.Data = []byte(`{"version":99,"config":{"principals":[{"name":"mallory","roles":["approver","operator"]}],"hot_wallets":[],"custody":[],"daily_limit":"0","credit_review_above":"0","policy_quorum":1},"by":"weir-serve","at":"2026-01-01T00:00:00Z"}`)
		msg.Header.Set("Weir-Event-Type", "config.changed")
		msg.Header.Set("Weir-Schema", "1")
		msg.Header.Set("Nats-Msg-Id", "01JFORGEDCONFIGFORGEDCONFIG")
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "forge a notification (nats pub weir.notify…)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "weir.notify.withdrawal.dev.confirmed", `{"type":"withdrawal.state_changed"}`)
	}},
	{name: "forge a history entry (nats pub weir.history…)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "weir.history.withdrawal.dev", `{"id":"6f1c2a1e-8d4b-4a51-9a7e-2f0c5b7d9e10","account":"dev"}`)
	}},
	{name: "delete the history index (nats stream rm WEIR_HISTORY)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.DELETE.WEIR_HISTORY", nil)
	}},
	{name: "cut the log (nats stream edit --max-msgs=5)", try: func(t *testing.T, nc *nats.Conn, b *boundary) {
		pub(t, nc, "$JS.API.STREAM.UPDATE.WEIR_EVENTS", streamConfig(t, b, func(c *jetstream.StreamConfig) { c.MaxMsgs = 5 }))
	}},
	{name: "seal the log (nats stream seal)", try: func(t *testing.T, nc *nats.Conn, b *boundary) {
		pub(t, nc, "$JS.API.STREAM.UPDATE.WEIR_EVENTS", streamConfig(t, b, func(c *jetstream.StreamConfig) { c.Sealed = true }))
	}},
	{name: "delete the log (nats stream rm)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.DELETE.WEIR_EVENTS", nil)
	}},
	{name: "purge the log (nats stream purge)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.PURGE.WEIR_EVENTS", `{}`)
	}},
	{name: "delete one event (nats stream rmm)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.MSG.DELETE.WEIR_EVENTS", `{"seq":1,"no_erase":true}`)
	}},
	{name: "shadow the log with a stream of one's own", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.CREATE.EVIL", `{"name":"EVIL","subjects":["weir.cmd.>"],"storage":"memory"}`)
	}},
	{name: "steal bearer tokens (nats sub 'weir.cmd.>')", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		sub(t, nc, "weir.cmd.>")
	}},
	{name: "answer commands (nats reply weir.cmd.withdrawal.approve)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		if _, err := nc.QueueSubscribeSync("weir.cmd.withdrawal.approve", "q"); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "forge a reply into another client's inbox", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "_INBOX.someoneelse.1", `{"state":"approved"}`)
	}},
	{name: "read weir's own JetStream traffic (sub _WEIR_INBOX.>)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		sub(t, nc, "_WEIR_INBOX.>")
	}},
	{name: "listen to everything (nats sub '>')", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		sub(t, nc, ">")
	}},
	{name: "steal the ledger's deliveries (nats consumer next WEIR_EVENTS weir-ledger --ack)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.CONSUMER.MSG.NEXT.WEIR_EVENTS."+sagas.LedgerConsumer, `{"batch":1}`)
	}},
	{name: "acknowledge a ledger delivery", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.ACK.WEIR_EVENTS."+sagas.LedgerConsumer+".1.1.1.1.0", "+ACK")
	}},
	{name: "stop settlement (nats consumer rm WEIR_EVENTS weir-ledger)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.CONSUMER.DELETE.WEIR_EVENTS."+sagas.LedgerConsumer, nil)
	}},
	{name: "redefine the ledger's consumer (nats consumer edit)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.CONSUMER.CREATE.WEIR_EVENTS."+sagas.LedgerConsumer,
			`{"stream_name":"WEIR_EVENTS","config":{"durable_name":"weir-ledger","name":"weir-ledger","filter_subject":"weir.evt.nothing.*","ack_policy":"explicit","deliver_policy":"all"}}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.WEIR_EVENTS."+sagas.LedgerConsumer+".weir.evt.nothing.*", `{}`)
	}},
	{name: "rewrite the projections' checkpoint (nats kv put)", try: func(t *testing.T, nc *nats.Conn, b *boundary) {
		pub(t, nc, "$KV."+b.kvBucket+".views-forged", `{}`)
	}},
	{name: "delete the checkpoint bucket (nats kv del)", try: func(t *testing.T, nc *nats.Conn, b *boundary) {
		pub(t, nc, "$JS.API.STREAM.DELETE.KV_"+b.kvBucket, nil)
	}},
	{name: "delete the notification stream (nats stream rm WEIR_NOTIFY)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.DELETE.WEIR_NOTIFY", nil)
	}},
	{name: "purge or edit the notification stream", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.STREAM.PURGE.WEIR_NOTIFY", `{}`)
		pub(t, nc, "$JS.API.STREAM.UPDATE.WEIR_NOTIFY", `{"name":"WEIR_NOTIFY","subjects":["weir.notify.>"],"max_msgs":1}`)
	}},
	{name: "keep a durable consumer on the event log (the notification stream's rights, on WEIR_EVENTS)", roles: []string{roleProducer}, try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.CONSUMER.DURABLE.CREATE.WEIR_EVENTS.mine", `{"stream_name":"WEIR_EVENTS","config":{"durable_name":"mine","ack_policy":"explicit"}}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.WEIR_EVENTS.mine.weir.evt.>", `{"stream_name":"WEIR_EVENTS","config":{"durable_name":"mine","ack_policy":"explicit"}}`)
	}},
	{name: "read webhook secrets (nats kv get weir_webhooks secret.ID)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.DIRECT.GET.KV_weir_webhooks.$KV.weir_webhooks.secret.wh_x", nil)
		pub(t, nc, "$JS.API.STREAM.MSG.GET.KV_weir_webhooks", `{"last_by_subj":"$KV.weir_webhooks.secret.wh_x"}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.KV_weir_webhooks.peek", `{"stream_name":"KV_weir_webhooks","config":{"name":"peek","ack_policy":"none"}}`)
	}},
	{name: "read the shared event key (nats kv get WEIR_KEYS event-key)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.DIRECT.GET.KV_"+natsauth.KeyBucket+".$KV."+natsauth.KeyBucket+"."+sharedKeyName, nil)
		pub(t, nc, "$JS.API.STREAM.MSG.GET.KV_"+natsauth.KeyBucket, `{"last_by_subj":"$KV.`+natsauth.KeyBucket+`.`+sharedKeyName+`"}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.KV_"+natsauth.KeyBucket+".peek", `{"stream_name":"KV_`+natsauth.KeyBucket+`","config":{"name":"peek","ack_policy":"none"}}`)
		sub(t, nc, "$KV."+natsauth.KeyBucket+".>")
	}},
	{name: "replace the shared event key (nats kv put WEIR_KEYS event-key)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$KV."+natsauth.KeyBucket+"."+sharedKeyName, "k-forged "+strings.Repeat("00", 32))
		pub(t, nc, "$JS.API.STREAM.DELETE.KV_"+natsauth.KeyBucket, nil)
	}},
	{name: "write a forged account snapshot (nats kv put WEIR_SNAPSHOTS account.dev)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$KV."+natsauth.SnapshotBucket+".account.dev", `{"schema":1,"type":"account","id":"dev","seq":1,"version":1,"state":{},"key_id":"k","tag":"00"}`)
		pub(t, nc, "$JS.API.STREAM.PURGE.KV_"+natsauth.SnapshotBucket, `{}`)
		pub(t, nc, "$JS.API.STREAM.DELETE.KV_"+natsauth.SnapshotBucket, nil)
	}},
	{name: "read account snapshots (nats kv get WEIR_SNAPSHOTS account.dev)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.DIRECT.GET.KV_"+natsauth.SnapshotBucket+".$KV."+natsauth.SnapshotBucket+".account.dev", nil)
		pub(t, nc, "$JS.API.STREAM.MSG.GET.KV_"+natsauth.SnapshotBucket, `{"last_by_subj":"$KV.`+natsauth.SnapshotBucket+`.account.dev"}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.KV_"+natsauth.SnapshotBucket+".peek", `{"stream_name":"KV_`+natsauth.SnapshotBucket+`","config":{"name":"peek","ack_policy":"none"}}`)
		sub(t, nc, "$KV."+natsauth.SnapshotBucket+".>")
	}},
	{name: "rewrite a webhook's cursor or delivery record (skip or replay deliveries)", try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$KV.weir_webhooks.cursor.wh_x", "999999")
		pub(t, nc, "$KV.weir_webhook_deliveries.wh_x.00000000000000000001", `{"status":"delivered"}`)
	}},
	{name: "read the event log without the auditor role", roles: []string{roleProducer}, try: func(t *testing.T, nc *nats.Conn, _ *boundary) {
		pub(t, nc, "$JS.API.DIRECT.GET.WEIR_EVENTS", `{"seq":1}`)
		pub(t, nc, "$JS.API.CONSUMER.CREATE.WEIR_EVENTS.peek", `{"stream_name":"WEIR_EVENTS","config":{"name":"peek","ack_policy":"none"}}`)
	}},
}

// runThreatTable runs every attack on a fresh connection and checks that
// the server refused it with a permissions violation, then that nothing
// weir relies on changed.
func runThreatTable(t *testing.T, b *boundary) {
	ledgerCaughtUp(t, b)
	before := boundaryState(t, b)
	for _, a := range threatTable {
		roles := a.roles
		if roles == nil {
			roles = []string{roleProducer, roleAuditor}
		}
		for _, role := range roles {
			t.Run(a.name+" as "+role, func(t *testing.T) {
				nc := b.dial(t, role)
				defer nc.Close()
				a.try(t, nc, b)
				// The server answers a refused PUB or SUB with -ERR before
				// the PONG of this flush; the client records it on arrival.
				if err := nc.Flush(); err != nil {
					t.Fatalf("flush: %v", err)
				}
				if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
					t.Fatalf("not refused by the NATS server: last error %v", err)
				}
			})
		}
	}
	if after := boundaryState(t, b); after != before {
		t.Fatalf("state changed under attack:\nbefore %s\nafter  %s", before, after)
	}
}

// ledgerCaughtUp waits until weir's ledger has taken and acknowledged
// everything in the log (the dev funding at start), so that its progress
// stands still while the attacks run.
func ledgerCaughtUp(t *testing.T, b *boundary) {
	t.Helper()
	js, _ := jetstream.New(b.weir)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var last uint64
		s, err := js.Stream(t.Context(), "WEIR_EVENTS")
		if err == nil {
			last = s.CachedInfo().State.LastSeq
		}
		c, err := js.Consumer(t.Context(), "WEIR_EVENTS", sagas.LedgerConsumer)
		if err == nil {
			if ci := c.CachedInfo(); ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream >= last {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger did not catch up with the log: %v", err)
		}
		<-time.After(10 * time.Millisecond) // the ledger acks on its own schedule
	}
}

// boundaryState summarises what the attacks aim at: the stream's config
// and contents, the ledger consumer's config and progress, the bucket.
func boundaryState(t *testing.T, b *boundary) string {
	t.Helper()
	ctx := t.Context()
	js, _ := jetstream.New(b.weir)
	s, err := js.Stream(ctx, "WEIR_EVENTS")
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	si := s.CachedInfo()
	c, err := s.Consumer(ctx, sagas.LedgerConsumer)
	if err != nil {
		t.Fatalf("ledger consumer: %v", err)
	}
	ci := c.CachedInfo()
	kv, err := js.KeyValue(ctx, b.kvBucket)
	if err != nil {
		t.Fatalf("checkpoint bucket: %v", err)
	}
	// weir itself may checkpoint meanwhile; the attack's key must not be.
	forged := "absent"
	if _, err := kv.Get(ctx, "views-forged"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		forged = fmt.Sprintf("present (%v)", err)
	}
	cfgJSON, _ := json.Marshal(si.Config)
	ccfgJSON, _ := json.Marshal(ci.Config)
	return strings.Join([]string{
		string(cfgJSON),
		"msgs=" + itoa(si.State.Msgs) + " last=" + itoa(si.State.LastSeq),
		string(ccfgJSON),
		"delivered=" + itoa(ci.Delivered.Stream) + " ackfloor=" + itoa(ci.AckFloor.Stream),
		"forged checkpoint " + forged,
	}, "\n")
}

// startDevEngine runs `weir serve` in this process with no flags that
// matter (dev principals) and a TCP NATS listener.
func startDevEngine(t *testing.T) *engine {
	t.Helper()
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
	}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return eng
}

// TestEmbeddedNATSRefusesEveryAttackOfTheThreatTable: dev principals
// connecting with their tokens (alice a requester/approver, olivia an
// operator and so an auditor) try every row; the server refuses each.
func TestEmbeddedNATSRefusesEveryAttackOfTheThreatTable(t *testing.T) {
	eng := startDevEngine(t)
	weir, err := eng.emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(weir.Close)
	b := &boundary{weir: weir, kvBucket: "weir_projections", dial: func(t *testing.T, role string) *nats.Conn {
		token := map[string]string{roleProducer: "dev-alice-token", roleAuditor: "dev-olivia-token"}[role]
		nc, err := nats.Connect(eng.natsURL, nats.Token(token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatalf("%s connects with its token: %v", role, err)
		}
		return nc
	}}
	runThreatTable(t, b)
}

// TestEmbeddedNATSAdmitsPrincipalsOnlyByToken: anonymous clients and
// unknown tokens are refused; a principal's token works as the connect's
// token and as the password of its name, and its commands are served.
func TestEmbeddedNATSAdmitsPrincipalsOnlyByToken(t *testing.T) {
	eng := startDevEngine(t)
	for name, opts := range map[string][]nats.Option{
		"anonymous":                 nil,
		"unknown token":             {nats.Token("dev-mallory-token")},
		"another principal's name":  {nats.UserInfo("bob", "dev-alice-token")},
		"name without the password": {nats.UserInfo("alice", "wrong-password")},
	} {
		nc, err := nats.Connect(eng.natsURL, append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: admitted", name)
		}
	}
	for name, opt := range map[string]nats.Option{
		"token":             nats.Token("dev-alice-token"),
		"user and password": nats.UserInfo("alice", "dev-alice-token"),
	} {
		nc, err := nats.Connect(eng.natsURL, opt, nats.MaxReconnects(0))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg := nats.NewMsg("weir.cmd.policy.get")
		msg.Data = []byte(`{}`)
		msg.Header.Set("Authorization", "Bearer dev-alice-token")
		m, err := nc.RequestMsg(msg, 10*time.Second)
		nc.Close()
		if err != nil || !strings.Contains(string(m.Data), `"rules"`) {
			t.Fatalf("%s: policy.get = %v %v", name, m, err)
		}
	}
}

// TestPrincipalsCannotReadWeirsInternalTraffic: a principal may subscribe
// _INBOX.>, so weir's own JetStream replies (events it loads, deliveries
// to its consumers) must not travel there.
func TestPrincipalsCannotReadWeirsInternalTraffic(t *testing.T) {
	eng := startDevEngine(t)
	nc, err := nats.Connect(eng.natsURL, nats.Token("dev-alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	spy, err := nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/spied/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"10"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	if code, _, body := c.do("GET", "/v1/accounts/spied", "dev-alice-token", ""); code != 200 {
		t.Fatalf("balance: %d %v", code, body)
	}
	// Whatever weir's reads put on an inbox was queued to the spy before
	// weir got its answer, so before this flush's PONG.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := spy.Pending(); n != 0 {
		m, _ := spy.NextMsg(0)
		t.Fatalf("a principal read %d of weir's internal messages, e.g. %s: %q", n, m.Subject, m.Data)
	}
}

// TestAuditNeedsTheAuditorRole: a requester's token may not read the event
// log; the audit says so at once and names the role to use.
func TestAuditNeedsTheAuditorRole(t *testing.T) {
	s := newStack(t, false)
	code, out, errOut := s.weir(t, "audit", "--all", "--tron-node", "", "--token", tokAlice)
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "stderr", errOut, "not authorised to read the event log", "auditor")
}
