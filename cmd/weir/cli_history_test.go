package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
)

// weir list and weir statement against a running stack with the history
// indexer.
func TestListAndStatementFromTheCLI(t *testing.T) {
	s := newStack(t, true)
	s.startHistory(t)
	code, out, errOut := s.weir(t, "credit", "--account", "acme", "--credit-id", "seed", "--amount", "100", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	id1, id2 := uuid.NewString(), uuid.NewString()
	code, out, errOut = s.weir(t, "request", "--id", id1, "--account", "acme", "--to", cliTestAddr, "--amount", "30", "--token", tokAlice)
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "request", "--id", id2, "--account", "acme", "--to", cliTestAddr, "--amount", "5", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	code, out, errOut = s.weir(t, "decline", id2, "--reason", "no", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)

	code, out, errOut = s.weir(t, "list", "--state", "rejected", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "list rejected", out, id2, "declined", "1 withdrawal(s)")
	code, out, errOut = s.weir(t, "list", "--account", "acme", "--limit", "1", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "list page", out, id2, "more: weir list --account acme --cursor ")
	code, out, errOut = s.weir(t, "list", "--state", "bogus", "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "bad state", errOut, "weir list: invalid_command")

	code, out, errOut = s.weir(t, "statement", "acme", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "statement", out, "credited", "seed", "olivia", "reserved", "released", id1, id2, "4 entr(ies)")
}

// startHistory restarts the stack's service with the history index (the
// indexer runs until the test ends), as serve wires it.
func (s *stack) startHistory(t *testing.T) {
	t.Helper()
	e := &engine{log: s.log, storeCfg: eventstore.Config{Memory: true, Sealer: s.emb.Sealer}, up: newStartup(s.log, time.Second, nil)}
	ctx, cancel := context.WithCancel(t.Context())
	connect := func(string) (*nats.Conn, error) { return s.emb.Conn(), nil }
	hist, err := e.startHistory(ctx, connect, serveConfig{Replicas: 1, memory: true}, s.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); e.wg.Wait() })
	if s.svc != nil {
		_ = s.svc.Stop()
	}
	if s.svc, err = api.StartService(s.nc, api.ServiceConfig{Intake: s.intake, Principals: s.principals, History: hist, Logger: s.log}); err != nil {
		t.Fatal(err)
	}
}
