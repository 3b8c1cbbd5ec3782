package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections/history"
)

// startHistory creates WEIR_HISTORY and starts the indexer that derives it
// from the log, on a connection of its own. It returns what the API lists
// withdrawals from.
func (e *engine) startHistory(ctx context.Context, connect func(string) (*nats.Conn, error), cfg serveConfig, log *slog.Logger) (api.History, error) {
	nc, err := connect("weir-history")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var store *eventstore.Store
	if err := e.up.do(ctx, "event stream (history)", func(ctx context.Context) (err error) {
		store, err = eventstore.Open(ctx, nc, e.storeCfg, eventlog.NewRegistry())
		return err
	}); err != nil {
		return nil, err
	}
	var stream jetstream.Stream
	if err := e.up.do(ctx, "history stream "+history.Stream, func(ctx context.Context) (err error) {
		stream, err = history.EnsureStream(ctx, js, cfg.Replicas, cfg.memory)
		return err
	}); err != nil {
		return nil, err
	}
	store.UseTail(e.tail) // whole-log reads through the shared Tail
	x := history.NewIndexer(store, js, stream, log.With("room", "history"))
	e.historyIndex = x
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := x.Run(ctx); err != nil && ctx.Err() == nil {
			e.fail("history indexer", err)
		}
	}()
	log.Info("withdrawal history", "stream", history.Stream)
	return historyReadYourWrites{store: store, x: x, r: history.NewReader(stream)}, nil
}

// historyReadYourWrites lets the indexer reach the log's end (at most a
// second) before a list is read, so a withdrawal just requested is listed.
type historyReadYourWrites struct {
	store *eventstore.Store
	x     *history.Indexer
	r     *history.Reader
}

func (h historyReadYourWrites) Walk(ctx context.Context, account string, before uint64, fn func(history.Entry) (bool, error)) error {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	if last, err := h.store.LastSequence(wctx); err == nil {
		_ = h.x.WaitFor(wctx, last)
	}
	cancel()
	return h.r.Walk(ctx, account, before, fn)
}
