package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// startTail opens the shared reader of the log's end on a connection of its
// own and runs it until the engine stops. The projector, the notification
// publisher and the history index each follow the whole log: through the
// Tail the server delivers every event once to this process, and its tag is
// verified once, instead of once per follower.
func (e *engine) startTail(ctx context.Context, connect func(string) (*nats.Conn, error), log *slog.Logger) error {
	nc, err := connect("weir-tail")
	if err != nil {
		return err
	}
	var store *eventstore.Store
	if err := e.up.do(ctx, "event stream (tail)", func(ctx context.Context) (err error) {
		store, err = eventstore.Open(ctx, nc, e.storeCfg, eventlog.NewRegistry())
		if err != nil {
			return err
		}
		e.tail, err = eventstore.NewTail(ctx, store, eventstore.DefaultTailSize, log.With("room", "tail"))
		return err
	}); err != nil {
		return err
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.tail.Run(ctx)
	}()
	return nil
}
