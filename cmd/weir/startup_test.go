package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/tron"
)

// fakeStartup is a startup on a clock that only its pauses move.
func fakeStartup(wait time.Duration, logs io.Writer) (*startup, *[]time.Duration) {
	var pauses []time.Duration
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newStartup(slog.New(slog.NewTextHandler(logs, nil)), wait, func(_ context.Context, d time.Duration) error {
		pauses = append(pauses, d)
		clock = clock.Add(d)
		return nil
	})
	s.now = func() time.Time { return clock }
	s.start = clock
	return s, &pauses
}

// TestStartupWaitsForASlowClusterThenGoesOn: a stream create that times out
// twice (as on a just-formed cluster) is tried again with a growing pause,
// and start-up logs what it is waiting for.
func TestStartupWaitsForASlowClusterThenGoesOn(t *testing.T) {
	var logs syncBuffer
	s, pauses := fakeStartup(time.Minute, &logs)
	calls := 0
	err := s.do(context.Background(), "event stream", func(context.Context) error {
		calls++
		if calls <= 2 {
			return fmt.Errorf("eventstore: create stream WEIR_EVENTS: %w", context.DeadlineExceeded)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("start-up gave up: %v", err)
	}
	if calls != 3 || len(*pauses) != 2 || (*pauses)[0] != startupFirstPause || (*pauses)[1] != 2*startupFirstPause {
		t.Fatalf("%d calls, pauses %v; want 3 calls and pauses %v, %v", calls, *pauses, startupFirstPause, 2*startupFirstPause)
	}
	out := logs.String()
	if strings.Count(out, `msg="start-up: waiting for NATS" waiting_for="event stream"`) != 2 || !strings.Contains(out, "create stream WEIR_EVENTS") ||
		!strings.Contains(out, `msg="start-up: NATS answered" waited_for="event stream" attempts=3`) {
		t.Fatalf("log does not say what start-up waited for:\n%s", out)
	}
}

// TestStartupGivesUpAfterTheWait: a cluster that never answers stops
// start-up once --startup-wait has passed, with the last error kept.
func TestStartupGivesUpAfterTheWait(t *testing.T) {
	s, pauses := fakeStartup(10*time.Second, io.Discard)
	err := s.do(context.Background(), "event stream", func(context.Context) error {
		return fmt.Errorf("eventstore: create stream WEIR_EVENTS: %w", jetstream.ErrNoStreamResponse)
	})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || !strings.Contains(err.Error(), "--startup-wait") {
		t.Fatalf("err %v, want the cause and the flag named", err)
	}
	var total time.Duration
	for _, p := range *pauses {
		total += p
		if p > startupMaxPause {
			t.Errorf("paused %s, more than %s", p, startupMaxPause)
		}
	}
	if total != 10*time.Second {
		t.Fatalf("waited %s in all (%v), want exactly the 10s budget", total, *pauses)
	}
}

// TestStartupDoesNotRetryAMisconfiguration: an error waiting cannot fix
// (an existing stream that does not match, replicas a single server cannot
// give) stops start-up at once.
func TestStartupDoesNotRetryAMisconfiguration(t *testing.T) {
	for _, bad := range []error{
		fmt.Errorf("open: %w", eventstore.ErrStreamMismatch),
		&jetstream.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"},
	} {
		s, pauses := fakeStartup(time.Minute, io.Discard)
		calls := 0
		err := s.do(context.Background(), "event stream", func(context.Context) error { calls++; return bad })
		if !errors.Is(err, bad) || calls != 1 || len(*pauses) != 0 {
			t.Errorf("%v: %d calls, %d pauses, err %v; want one call and the error", bad, calls, len(*pauses), err)
		}
	}
}

// serveWhileNATSComesUp starts the engine against url; ready runs in
// start-up's first pause (and only then), playing the cluster that becomes
// ready meanwhile. It returns the engine and start-up's log.
func serveWhileNATSComesUp(t *testing.T, url string, ready func() error) (*engine, string) {
	t.Helper()
	pauses := 0
	var logs syncBuffer
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSURL: url, Replicas: 1, Sync: "lazy", Workers: 1,
		memory: true, StartupWait: time.Minute, DailyLimit: "0",
		startupPause: func(context.Context, time.Duration) error {
			if pauses++; pauses == 1 {
				return ready()
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := startEngine(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard)
	if err != nil {
		t.Fatalf("weir serve did not wait for NATS: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return eng, logs.String()
}

// TestServeWaitsForJetStreamToComeUp: `weir serve` pointed at a NATS whose
// JetStream is not up yet waits for it (logging so) instead of exiting,
// and serves once it is. The server's JetStream is switched on during
// start-up's first pause, so the first attempt fails every time.
func TestServeWaitsForJetStreamToComeUp(t *testing.T) {
	srv := eventstoretest.StartServer(t, &server.Options{})
	eng, logs := serveWhileNATSComesUp(t, srv.ClientURL(), func() error {
		return srv.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()})
	})
	// Its first JetStream call without --event-key is the shared key's bucket.
	if !strings.Contains(logs, `msg="start-up: waiting for NATS" waiting_for="event key bucket"`) {
		t.Fatalf("start-up did not say what it waited for:\n%s", logs)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/ops/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"5"}`); code != 201 {
		t.Fatalf("credit after start-up: %d %v", code, body)
	}
}

// TestServeWaitsForNATSToComeUp: `weir serve --nats-url` started before
// its NATS server listens waits for it instead of exiting. The server
// starts during start-up's first pause.
func TestServeWaitsForNATSToComeUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, logs := serveWhileNATSComesUp(t, fmt.Sprintf("nats://127.0.0.1:%d", port), func() error {
		eventstoretest.StartServer(t, &server.Options{Port: port, JetStream: true})
		return nil
	})
	want := fmt.Sprintf(`msg="start-up: waiting for NATS" waiting_for="NATS at nats://127.0.0.1:%d"`, port)
	if strings.Count(logs, "start-up: waiting for NATS") != 1 || !strings.Contains(logs, want) {
		t.Fatalf("want one wait, for the connection:\n%s", logs)
	}
}

// genesisNode is a node whose Genesis fails until fails calls have been
// made; the other Node methods are not there (nil).
type genesisNode struct {
	tron.Node
	fails, calls int
}

func (n *genesisNode) Genesis(context.Context) (tron.BlockHeader, error) {
	if n.calls++; n.calls <= n.fails {
		return tron.BlockHeader{}, errors.New("connection refused")
	}
	return tron.BlockHeader{Number: 0}, nil
}

func (n *genesisNode) SolidBlockTransfers(context.Context, int64) ([]tron.ChainTransfer, error) {
	return nil, nil
}

// TestStartWaitsForTheNodeToTellItsGenesis: a node that cannot answer yet
// is asked again, with start-up's backoff, and the start goes on once it
// tells its genesis block.
func TestStartWaitsForTheNodeToTellItsGenesis(t *testing.T) {
	var logs syncBuffer
	s, pauses := fakeStartup(time.Minute, &logs)
	node := &genesisNode{fails: 2}
	e := &engine{up: s, node: tron.NewLimited(tron.NewObserved(node), 0, 1)}
	g, err := e.chainGenesis(context.Background(), serveConfig{TronNode: "http://node"}, s.log)
	if err != nil || g != (tron.BlockHeader{}).IDHex() {
		t.Fatalf("genesis %q, %v", g, err)
	}
	if node.calls != 3 || len(*pauses) != 2 {
		t.Fatalf("%d calls, pauses %v; want 3 calls, 2 pauses", node.calls, *pauses)
	}
	if out := logs.String(); strings.Count(out, `msg="start-up: waiting for the TRON node" waiting_for="genesis block"`) != 2 || !strings.Contains(out, "attempts=3") {
		t.Fatalf("log does not say start-up waited for the node:\n%s", out)
	}
}

// TestStartRefusesANodeThatReadsNoChainAtOnce: the node under the engine's
// wrappers reads no chain; the wrappers are ChainReaders all the same, so
// it is its ErrNotSupported that refuses the start: on the first answer,
// without waiting --startup-wait for a genesis block it cannot tell.
func TestStartRefusesANodeThatReadsNoChainAtOnce(t *testing.T) {
	s, pauses := fakeStartup(time.Minute, io.Discard)
	type nodeOnly struct{ tron.Node }
	e := &engine{up: s, node: tron.NewLimited(tron.NewObserved(nodeOnly{}), 0, 1)}
	_, err := e.chainGenesis(context.Background(), serveConfig{TronNode: "http://node"}, s.log)
	if !errors.Is(err, tron.ErrNotSupported) || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "--tron-node http://node") {
		t.Fatalf("err %v; want the start refused, naming the node", err)
	}
	if len(*pauses) != 0 {
		t.Fatalf("waited %v for a node that reads no chain", *pauses)
	}
}
