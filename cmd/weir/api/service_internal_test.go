package api

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// TestServiceHandlersRunConcurrently: a command that is still running does
// not hold up the next one on the same subject. The first handler waits
// until the second has run; served one at a time, the first would never
// finish.
func TestServiceHandlersRunConcurrently(t *testing.T) {
	emb := eventstoretest.Start(t)
	nc := emb.Conn()
	ps, err := NewPrincipals([]Principal{{Name: "p", Token: "token-token", Roles: []Role{RoleRequester}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "concurrency", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &natsService{
		Service: svc, nc: nc, log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: NewMetrics(),
		cfg: ServiceConfig{Principals: ps, CommandTimeout: time.Minute}, sem: make(chan struct{}, 4),
		idle: make(chan func()), done: make(chan struct{}),
	}
	started, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, _ Principal, body []byte) (result, error) {
		if string(body) == "first" {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return result{}, ctx.Err()
			}
			return result{body: "first done"}, nil
		}
		if string(body) == "second" {
			close(release)
		}
		return result{body: string(body) + " done"}, nil
	}
	if err := svc.AddEndpoint("slow", s.endpoint("test.slow", "test", slow), micro.WithEndpointSubject("test.slow")); err != nil {
		t.Fatal(err)
	}
	boom := func(context.Context, Principal, []byte) (result, error) { panic("boom") }
	if err := svc.AddEndpoint("boom", s.endpoint("test.boom", "test", boom), micro.WithEndpointSubject("test.boom")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	client := emb.Conn()
	send := func(body string) (*nats.Msg, error) {
		m := nats.NewMsg("test.slow")
		m.Header.Set("Authorization", "Bearer token-token")
		m.Data = []byte(body)
		return client.RequestMsg(m, 20*time.Second)
	}
	first := make(chan *nats.Msg, 1)
	go func() {
		m, err := send("first")
		if err != nil {
			t.Error(err)
		}
		first <- m
	}()
	<-started
	m, err := send("second")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `"second done"` {
		t.Fatalf("second: %s", m.Data)
	}
	if m := <-first; m == nil || string(m.Data) != `"first done"` {
		t.Fatalf("first: %v", m)
	}

	// A panicking handler answers 500 internal and the service lives on.
	pm := nats.NewMsg("test.boom")
	pm.Header.Set("Authorization", "Bearer token-token")
	m, err = client.RequestMsg(pm, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(micro.ErrorCodeHeader) != "500" || m.Header.Get(micro.ErrorHeader) != "internal" ||
		string(m.Data) != `{"error":{"code":"internal","message":"internal error"}}` {
		t.Fatalf("panic reply %v %s", m.Header, m.Data)
	}
	if m, err := send("third"); err != nil || string(m.Data) != `"third done"` {
		t.Fatalf("after panic: %v", err)
	}
}
