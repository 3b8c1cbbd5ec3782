package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
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
	store.UseTail(e.tail) // whole-log reads through the shared Tail
	e.publisher = notify.NewPublisher(store, js, stream, log.With("room", "notify"))
	if e.storeCfg.GroupCommit {
		// The server fsyncs every write of its one-node streams, where the
		// log commits in groups: a backlog of notifications goes out as
		// one batch too, one sync (see UseBatches).
		e.publisher.UseBatches()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.publisher.Run(ctx); err != nil && ctx.Err() == nil {
			e.fail("notification publisher", err)
		}
	}()
	e.walletNotes = notify.NewWalletAnnouncer(js, stream, log.With("room", "notify"))
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.walletNotes.Run(ctx) // retries until ctx ends
	}()
	log.Info("notifications", "stream", notify.Stream, "subjects", notify.SubjectPrefix+".<account>.<state>",
		"wallet_subjects", notify.WalletSubjectPrefix+".<usdt|trx|sending>.<state>")
	return e.startWebhooks(ctx, js, store, stream, cfg, log)
}

// startWebhooks opens the webhook room and starts its dispatcher, which
// delivers WEIR_NOTIFY to every registered webhook.
func (e *engine) startWebhooks(ctx context.Context, js jetstream.JetStream, store *eventstore.Store, stream jetstream.Stream, cfg serveConfig, log *slog.Logger) error {
	guard := webhook.Guard{AllowPrivate: cfg.WebhookAllowPrivate}
	if err := e.up.do(ctx, "webhook buckets", func(ctx context.Context) (err error) {
		e.webhooks, err = webhook.Open(ctx, js, store, stream, webhook.Config{Replicas: cfg.Replicas, Memory: cfg.memory, Guard: guard})
		return err
	}); err != nil {
		return err
	}
	e.webhookOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_webhook_deliveries_total",
		Help: "Webhook delivery attempts by outcome (delivered, failed, refused: the target address is not allowed; abandoned: given up after the retry age).",
	}, []string{"outcome"})
	for _, o := range []string{webhook.OutcomeDelivered, webhook.OutcomeFailed, webhook.OutcomeRefused, webhook.OutcomeAbandoned} {
		e.webhookOutcomes.WithLabelValues(o)
	}
	d := webhook.NewDispatcher(webhook.DispatcherConfig{
		Service: e.webhooks, Store: store, JS: js, Guard: guard, Logger: log.With("room", "webhooks"),
		FirstRetry: cfg.webhookFirstRetry,
		OnOutcome:  func(o string) { e.webhookOutcomes.WithLabelValues(o).Inc() },
	})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := d.Run(ctx); err != nil && ctx.Err() == nil {
			e.fail("webhook dispatcher", err)
		}
	}()
	if cfg.WebhookAllowPrivate {
		log.Warn("webhooks may target loopback, private and link-local addresses (--webhook-allow-private)")
	}
	return nil
}

// notifyCollectors: webhook outcomes, and how far the notification
// publisher trails the log (announcements that stall are an alert).
func (e *engine) notifyCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		e.webhookOutcomes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_notify_lag_events",
			Help: "Events in the log the notification publisher has not examined yet (-1: the log could not be read).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			last, err := e.store.LastSequence(ctx)
			if err != nil {
				return -1
			}
			if done := e.publisher.Position().SourceSeq; done < last {
				return float64(last - done)
			}
			return 0
		}),
	}
}
