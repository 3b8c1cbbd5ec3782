package eventstoretest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/eventstore"
)

// Server is an embedded nats-server with JetStream, owned by one test.
type Server struct {
	*eventstore.Embedded
	t      testing.TB
	memory bool
	// groupCommit, minBatch: stores opened from now on gather appends
	// (GroupCommit).
	groupCommit bool
	minBatch    int
	// Sealer is what stores opened from now on seal and verify events
	// with: Keyring() by default; nil opens them without event
	// authentication (weir run without an event key).
	Sealer eventstore.Sealer
}

// Option changes how Start runs the server.
type Option func(*settings)

type settings struct {
	emb         eventstore.EmbeddedConfig
	groupCommit bool
	minBatch    int
}

// File stores streams on disk in dir instead of in memory; a server started
// again on the same dir finds what the previous one wrote.
func File(dir string) Option {
	return func(c *settings) { c.emb.Memory, c.emb.StoreDir = false, dir }
}

// GroupCommit makes the server fsync every write, as weir serve's default,
// and the stores opened on it gather concurrent appends into atomic
// batches (eventstore.Config.GroupCommit), as weir serve does there, from
// minBatch waiting messages on (0: the store's default). With File only.
func GroupCommit(minBatch int) Option {
	return func(c *settings) { c.emb.SyncAlways, c.groupCommit, c.minBatch = true, true, minBatch }
}

// Listen adds a TCP listener on a free loopback port (ClientURL), for code
// that dials the server as a separate process would.
func Listen() Option {
	return func(c *settings) { c.emb.ClientListen = "127.0.0.1:0" }
}

// Auth lets the listener admit the TCP clients a admits (with the
// permissions it gives them); without it every TCP client is refused.
func Auth(a server.Authentication) Option {
	return func(c *settings) { c.emb.ClientAuth = a }
}

// Start starts a server with memory storage (unless File is given) and shuts
// it down when the test ends. Shutdown may also be called earlier, to cut
// the server away from its clients mid-test.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := settings{emb: eventstore.EmbeddedConfig{Memory: true}}
	for _, o := range opts {
		o(&cfg)
	}
	emb, err := eventstore.StartEmbedded(cfg.emb)
	if err != nil {
		t.Fatalf("eventstoretest: start embedded nats-server: %v", err)
	}
	t.Cleanup(emb.Shutdown)
	return &Server{Embedded: emb, t: t, memory: cfg.emb.Memory, groupCommit: cfg.groupCommit, minBatch: cfg.minBatch, Sealer: Keyring()}
}

// Conn returns a new in-process connection, closed when the test ends.
func (s *Server) Conn() *nats.Conn {
	s.t.Helper()
	nc, err := s.Connect()
	if err != nil {
		s.t.Fatalf("eventstoretest: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// Keyring is the event key every test store seals and verifies with (the
// same for every store, so stores on one server read each other's events).
// A test that forges events publishes without it.
func Keyring() *eventstore.Keyring {
	kr, err := eventstore.NewKeyring("test", map[string][]byte{"test": bytes.Repeat([]byte{7}, eventstore.MinKeyBytes)})
	if err != nil {
		panic(err)
	}
	return kr
}

// Store opens the event store with reg on a connection of its own (as a
// separate process would), with the stream in memory when the server keeps
// memory storage.
func (s *Server) Store(ctx context.Context, reg *eventstore.Registry) *eventstore.Store {
	s.t.Helper()
	return s.StoreOn(ctx, s.Conn(), reg)
}

// StoreOn opens the event store with reg on the connection nc.
func (s *Server) StoreOn(ctx context.Context, nc *nats.Conn, reg *eventstore.Registry) *eventstore.Store {
	s.t.Helper()
	store, err := eventstore.Open(ctx, nc, eventstore.Config{Memory: s.memory, Sealer: s.Sealer, GroupCommit: s.groupCommit, GroupCommitMinBatch: s.minBatch}, reg)
	if err != nil {
		s.t.Fatalf("eventstoretest: open store: %v", err)
	}
	return store
}

// StartServer starts a plain nats-server with opts as given — users and
// permissions, a reference config file, JetStream off — on a free loopback
// port unless opts names one, and shuts it down when the test ends. It is
// for tests about the server's configuration; Start is for tests that
// need the event store.
func StartServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.JetStream && opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("eventstoretest: new nats-server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatalf("eventstoretest: nats-server %s not ready", opts.ServerName)
	}
	return srv
}
