package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStreamRefusesDeleteAndPurge(t *testing.T) {
	e, s := newMemStore(t)
	ctx := testCtx(t)
	k := Key{Type: "thing", ID: "kept"}
	pos := mustAppend(t, s, k, Position{}, Event{Type: evOpened}, noteEv("a", 1))

	// The raw JetStream API, as `nats stream rmm` / `nats stream purge` use it.
	nc := connect(t, e)
	for _, tc := range []struct {
		subject string
		body    string
	}{
		{"$JS.API.STREAM.MSG.DELETE." + s.StreamName(), fmt.Sprintf(`{"seq":%d}`, pos.Sequence)},
		{"$JS.API.STREAM.MSG.DELETE." + s.StreamName(), fmt.Sprintf(`{"seq":%d,"no_erase":true}`, pos.Sequence)},
		{"$JS.API.STREAM.PURGE." + s.StreamName(), `{}`},
		{"$JS.API.STREAM.PURGE." + s.StreamName(), fmt.Sprintf(`{"filter":%q}`, s.Subject(k))},
	} {
		resp, err := nc.Request(tc.subject, []byte(tc.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.subject, err)
		}
		var r struct {
			Error   *jetstream.APIError `json:"error"`
			Success bool                `json:"success"`
		}
		if err := json.Unmarshal(resp.Data, &r); err != nil {
			t.Fatalf("%s: %v", tc.subject, err)
		}
		if r.Error == nil || r.Success {
			t.Fatalf("%s %s was accepted: %s", tc.subject, tc.body, resp.Data)
		}
	}
	if recs, got := mustLoad(t, s, k); len(recs) != 2 || got != pos {
		t.Fatalf("after refused delete/purge: %d records at %+v", len(recs), got)
	}

	// The append-only settings cannot be lifted by a config update either.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, s.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if !cfg.DenyDelete || !cfg.DenyPurge || !cfg.AllowDirect || !cfg.AllowAtomicPublish || cfg.Duplicates != 2*time.Minute || cfg.Replicas != 1 {
		t.Fatalf("stream config = %+v", cfg)
	}
	cfg.DenyDelete, cfg.DenyPurge = false, false
	if _, err := js.UpdateStream(ctx, cfg); err == nil {
		t.Fatal("server accepted lifting DenyDelete/DenyPurge")
	}
}

func TestOpenUpgradesAnExistingStream(t *testing.T) {
	e := startMem(t)
	nc := connect(t, e)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A stream created by hand (or by an older weir) without the guards.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "LEGACY",
		Subjects: []string{"legacy.*.*"},
		Storage:  jetstream.MemoryStorage,
		MaxBytes: 1 << 30, // an operator's limit must survive the upgrade
	}); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, nc, Config{Stream: "LEGACY", SubjectPrefix: "legacy", Memory: true, DedupWindow: time.Minute}, testRegistry())
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if !c.DenyDelete || !c.DenyPurge || !c.AllowDirect || !c.AllowAtomicPublish || c.Duplicates != time.Minute || c.MaxBytes != 1<<30 {
		t.Fatalf("upgraded config = %+v", c)
	}
	// Opening again changes nothing and works.
	openStore(t, nc, Config{Stream: "LEGACY", SubjectPrefix: "legacy", Memory: true, DedupWindow: time.Minute}, testRegistry())

	for name, cfg := range map[string]Config{
		"other storage":  {Stream: "LEGACY", SubjectPrefix: "legacy"},
		"other subjects": {Stream: "LEGACY", SubjectPrefix: "elsewhere", Memory: true},
	} {
		if _, err := Open(ctx, nc, cfg, testRegistry()); !errors.Is(err, ErrStreamMismatch) {
			t.Errorf("%s: Open = %v, want ErrStreamMismatch", name, err)
		}
	}
}

func TestEmbeddedServerListensOnlyWhenAsked(t *testing.T) {
	inproc := startMem(t)
	if inproc.ClientURL() != "" {
		t.Fatalf("in-process server has client URL %q", inproc.ClientURL())
	}
	if inproc.Server().Addr() != nil {
		t.Fatalf("in-process server listens on %v", inproc.Server().Addr())
	}

	tcp, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "127.0.0.1:0", ServerName: "tcp-test", ClientAuth: testClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tcp.Shutdown)
	url := tcp.ClientURL()
	if url == "" || url == "nats://127.0.0.1:0" || url == "nats://127.0.0.1:4222" {
		t.Fatalf("client URL %q is not the picked free port", url)
	}
	nc, err := ConnectURL(url, nats.Token(testClientToken))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := openStore(t, nc, Config{Memory: true}, testRegistry())
	mustAppend(t, s, Key{Type: "thing", ID: "over-tcp"}, Position{}, Event{Type: evOpened})
	if got := tcp.Server().Name(); got != "tcp-test" {
		t.Fatalf("server name %q", got)
	}

	if _, err := StartEmbedded(EmbeddedConfig{}); err == nil {
		t.Fatal("file storage without a store dir was accepted")
	}
	if _, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "nonsense"}); err == nil {
		t.Fatal("a bad listen address was accepted")
	}
}

func TestEachConnectIsASeparateConnection(t *testing.T) {
	e := startMem(t)
	a, b := connect(t, e), connect(t, e)
	a.Close()
	if !b.IsConnected() {
		t.Fatal("closing one in-process connection closed another")
	}
	if _, err := b.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatalf("second connection unusable: %v", err)
	}
}

// TestEmbeddedListenerRefusesWhatClientAuthDoesNot: an anonymous client, a
// wrong token, and — with no ClientAuth at all — every TCP client are
// refused; weir's own in-process connections are not affected.
func TestEmbeddedListenerRefusesWhatClientAuthDoesNot(t *testing.T) {
	guarded, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "127.0.0.1:0", ClientAuth: testClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(guarded.Shutdown)
	closed, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closed.Shutdown)
	for name, try := range map[string]struct {
		e    *Embedded
		opts []nats.Option
	}{
		"anonymous":                {guarded, nil},
		"wrong token":              {guarded, []nats.Option{nats.Token("not-the-token")}},
		"user and password":        {guarded, []nats.Option{nats.UserInfo("weir", testClientToken)}},
		"no ClientAuth, any token": {closed, []nats.Option{nats.Token(testClientToken)}},
		"no ClientAuth, anonymous": {closed, nil},
		"internal identity's user": {guarded, []nats.Option{nats.UserInfo(InternalUser, "x")}},
	} {
		nc, err := nats.Connect(try.e.ClientURL(), append(try.opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(err.Error(), "Authorization") {
			t.Errorf("%s: %v, want an authorization refusal", name, err)
		}
	}
	for _, e := range []*Embedded{guarded, closed} {
		nc, err := e.Connect()
		if err != nil {
			t.Fatalf("in-process: %v", err)
		}
		s := openStore(t, nc, Config{Memory: true}, testRegistry())
		mustAppend(t, s, Key{Type: "thing", ID: "inproc"}, Position{}, Event{Type: evOpened})
		nc.Close()
	}
}

// TestVerifyProbesWritesWithoutStoringAndNamesAnEdit: a healthy stream
// verifies and the write probe leaves the log as it was; a stream an admin
// gave a retention limit, or deleted, is named.
func TestVerifyProbesWritesWithoutStoringAndNamesAnEdit(t *testing.T) {
	e := startMem(t)
	nc, err := e.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := testCtx(t)
	s := openStore(t, nc, Config{Memory: true}, testRegistry())
	mustAppend(t, s, Key{Type: "thing", ID: "probe"}, Position{}, Event{Type: evOpened})
	before, _ := s.LastSequence(ctx)
	for range 3 {
		if err := s.Verify(ctx); err != nil {
			t.Fatalf("healthy stream: %v", err)
		}
	}
	if after, _ := s.LastSequence(ctx); after != before {
		t.Fatalf("the write probe stored something: last sequence %d → %d", before, after)
	}

	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, "WEIR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); !errors.Is(err, ErrStreamMismatch) || !strings.Contains(err.Error(), "max_age") {
		t.Fatalf("max_age edit: %v", err)
	}
	if err := js.DeleteStream(ctx, "WEIR_EVENTS"); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); !errors.Is(err, ErrStoreUnhealthy) {
		t.Fatalf("deleted stream: %v", err)
	}
}
