package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/notify"
)

// startNotifications creates WEIR_NOTIFY and starts the publisher that
// derives it from the log, on a connection of its own.
func (e *engine) startNotifications(ctx context.Context, connect func(string) (*nats.Conn, error), cfg serveConfig, log *slog.Logger) error {
	nc, err := connect("weir-notify")
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	var store *eventstore.Store
	if err := e.up.do(ctx, "event stream (notifications)", func(ctx context.Context) (err error) {
		store, err = eventstore.Open(ctx, nc, e.storeCfg, eventlog.NewRegistry())
		return err
	}); err != nil {
		return err
	}
	var stream jetstream.Stream
	if err := e.up.do(ctx, "notification stream "+notify.Stream, func(ctx context.Context) (err error) {
		stream, err = notify.EnsureStream(ctx, js, cfg.Replicas, cfg.memory)
		return err
	}); err != nil {
		return err
	}
	e.notifyStream = stream
	e.publisher = notify.NewPublisher(store, js, stream, log.With("room", "notify"))
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.publisher.Run(ctx); err != nil && ctx.Err() == nil {
			e.fail("notification publisher", err)
		}
	}()
	log.Info("notifications", "stream", notify.Stream, "subjects", notify.SubjectPrefix+".<account>.<state>")
	return nil
}
