package eventstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Event types used by the tests; the store itself knows none of them.
const (
	evOpened = "opened"
	evNoted  = "noted"
	evClosed = "closed"
)

func testRegistry() *Registry {
	r := NewRegistry()
	r.Register(evOpened, 1)
	r.Register(evNoted, 1)
	r.Register(evClosed, 1)
	return r
}

type note struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startMem starts an in-process server with memory storage.
func startMem(t testing.TB) *Embedded {
	t.Helper()
	e, err := StartEmbedded(EmbeddedConfig{Memory: true})
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t testing.TB, e *Embedded) *nats.Conn {
	t.Helper()
	nc, err := e.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func openStore(t testing.TB, nc *nats.Conn, cfg Config, reg *Registry) *Store {
	t.Helper()
	s, err := Open(testCtx(t), nc, cfg, reg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// newMemStore is the common fixture: a fresh server, one connection, a
// memory stream and the test registry.
func newMemStore(t testing.TB) (*Embedded, *Store) {
	t.Helper()
	e := startMem(t)
	return e, openStore(t, connect(t, e), Config{Memory: true}, testRegistry())
}

func mustAppend(t testing.TB, s *Store, k Key, at Position, evs ...Event) Position {
	t.Helper()
	pos, err := s.Append(testCtx(t), k, at, evs...)
	if err != nil {
		t.Fatalf("append %v at %+v: %v", k, at, err)
	}
	return pos
}

func mustLoad(t testing.TB, s *Store, k Key) ([]Record, Position) {
	t.Helper()
	recs, pos, err := s.Load(testCtx(t), k)
	if err != nil {
		t.Fatalf("load %v: %v", k, err)
	}
	return recs, pos
}

func noteEv(text string, n int) Event {
	return Event{Type: evNoted, Data: note{Text: text, N: n}}
}

func payloadNote(t testing.TB, r Record) note {
	t.Helper()
	var n note
	if err := json.Unmarshal(r.Payload, &n); err != nil {
		t.Fatalf("payload of seq %d: %v", r.Sequence, err)
	}
	return n
}

func lastSeq(t testing.TB, s *Store) uint64 {
	t.Helper()
	seq, err := s.LastSequence(testCtx(t))
	if err != nil {
		t.Fatalf("last sequence: %v", err)
	}
	return seq
}

// testClientToken admits a TCP test client with every permission
// (testClientAuth); tests that need a network connection (a proxy to cut,
// a listener to find) use it.
const testClientToken = "eventstore-test-client"

var testClientAuth server.Authentication = tokenAuth(testClientToken)

type tokenAuth string

func (a tokenAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil || o.Token != string(a) {
		return false
	}
	c.RegisterUser(&server.User{Username: "test-client"})
	return true
}
