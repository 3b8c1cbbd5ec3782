package eventstoretest_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

func registry() *eventstore.Registry {
	r := eventstore.NewRegistry()
	r.Register("noted", 1)
	return r
}

// TestFileServerKeepsEventsAcrossRestart: a server started again on the
// same directory serves what the previous one stored.
func TestFileServerKeepsEventsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k := eventstore.Key{Type: "thing", ID: "one"}

	first := eventstoretest.Start(t, eventstoretest.File(dir))
	if _, err := first.Store(ctx, registry()).Append(ctx, k, eventstore.Position{}, eventstore.Event{Type: "noted", Data: "hello"}); err != nil {
		t.Fatal(err)
	}
	first.Shutdown()

	second := eventstoretest.Start(t, eventstoretest.File(dir))
	recs, pos, err := second.Store(ctx, registry()).Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || pos.Version != 1 || string(recs[0].Payload) != `"hello"` {
		t.Fatalf("after restart: %d records at %+v, want the one event", len(recs), pos)
	}
}

// TestMemoryServerKeepsTheStreamInMemory: the default server's store puts
// the stream in memory storage, and Listen gives a dialable URL.
func TestMemoryServerKeepsTheStreamInMemory(t *testing.T) {
	ctx := context.Background()
	s := eventstoretest.Start(t, eventstoretest.Listen())
	if s.ClientURL() == "" {
		t.Fatal("Listen gave no client URL")
	}
	s.Store(ctx, registry())
	js, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "WEIR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Fatalf("storage %v, want memory", got)
	}
}
