package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/console"
)

// withConsole serves the web console at /console/ beside the HTTP API:
// the same principals, application layer and rate limiter as the API
// (api.App), live pages fed from WEIR_NOTIFY on a connection of its own
// (read only while a live page is open).
// closeStreams ends the console's live streams; the HTTP server's
// shutdown must call it (they never go idle).
func (e *engine) withConsole(ctx context.Context, apiHandler http.Handler, connect func(string) (*nats.Conn, error),
	cfg serveConfig, app *api.App, log *slog.Logger) (_ http.Handler, closeStreams func(), _ error) {
	nc, err := connect("weir-console")
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, fmt.Errorf("console: %w", err)
	}
	feed := console.NewFeed()
	var stop func()
	if err := e.up.do(ctx, "console notification stream", func(ctx context.Context) (err error) {
		stop, err = console.Follow(ctx, js, feed, log.With("room", "console"))
		return err
	}); err != nil {
		return nil, nil, err
	}
	e.stops = append(e.stops, func(context.Context) error { stop(); return nil })
	c, err := console.New(console.Config{App: app, Feed: feed, Logger: log.With("room", "console"), TxLink: cfg.ConsoleTxLink})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(console.Path, c)
	mux.Handle("GET /console", http.RedirectHandler(console.Path, http.StatusMovedPermanently))
	mux.Handle("/", apiHandler)
	return mux, c.Close, nil
}
