package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// defaultStartupWait bounds how long start-up waits for NATS to answer its
// JetStream calls (--startup-wait).
const defaultStartupWait = 60 * time.Second

// startup retries start-up's JetStream calls (create or update the stream,
// the KV bucket, durable consumers, the first reads and writes) while NATS
// says "not now" — a just-formed cluster still electing its leaders, a
// busy one timing out a request — so that `weir serve` waits for the
// cluster instead of exiting on the first timeout. It gives up on the
// first error that is not about availability, and after wait has passed.
// The TRON node's first answer (its genesis block) waits the same way.
type startup struct {
	log  *slog.Logger
	wait time.Duration
	now  func() time.Time
	// pause waits d or until ctx is done; tests replace it to play a
	// cluster that becomes ready between attempts.
	pause func(ctx context.Context, d time.Duration) error

	start time.Time
}

func newStartup(log *slog.Logger, wait time.Duration, pause func(context.Context, time.Duration) error) *startup {
	if wait <= 0 {
		wait = defaultStartupWait
	}
	if pause == nil {
		pause = sleepCtx
	}
	return &startup{log: log, wait: wait, now: time.Now, pause: pause, start: time.Now()}
}

// Backoff between attempts: doubling from startupFirstPause up to
// startupMaxPause.
const (
	startupFirstPause = 250 * time.Millisecond
	startupMaxPause   = 5 * time.Second
)

// do runs op until it succeeds, fails for a reason waiting cannot fix, or
// the start-up wait (counted from newStartup) has passed. what names, for
// the log, what start-up is waiting for.
func (s *startup) do(ctx context.Context, what string, op func(context.Context) error) error {
	return s.doOn(ctx, "NATS", notReady, what, op)
}

// doOn is do for start-up's calls to who (NATS, the TRON node): retry
// says which of its errors waiting may fix; any other stops start-up at
// once. Every call shares the one start-up wait.
func (s *startup) doOn(ctx context.Context, who string, retry func(error) bool, what string, op func(context.Context) error) error {
	backoff := startupFirstPause
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			if attempt > 1 {
				s.log.Info("start-up: "+who+" answered", "waited_for", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil || !retry(err) {
			return err
		}
		left := s.wait - s.now().Sub(s.start)
		if left <= 0 {
			return fmt.Errorf("%s: %s still not ready after %s (--startup-wait): %w", what, who, s.wait, err)
		}
		d := min(backoff, left)
		s.log.Warn("start-up: waiting for "+who, "waiting_for", what, "attempt", attempt, "retry_in", d, "left", left.Round(time.Millisecond), "err", err)
		if err := s.pause(ctx, d); err != nil {
			return err
		}
		backoff = min(2*backoff, startupMaxPause)
	}
}

// notReady reports errors a slow or forming cluster gives before it can
// serve JetStream: no server listening yet, timeouts and lost connections
// (eventstore.Unavailable, and the same translated by sagas.Repo), and
// placement refused while the cluster's peers or leaders are not there yet.
func notReady(err error) bool {
	if eventstore.Unavailable(err) || errors.Is(err, sagas.ErrUnavailable) || errors.Is(err, nats.ErrNoServers) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case 10005, // no suitable peers for placement (peers not yet known)
		10008, // JetStream system temporarily unavailable (no meta leader yet)
		10009, // cluster can not handle request (leader changing)
		10023, // insufficient resources (peers not yet reporting)
		10118: // stream is offline (its group is still forming)
		return true
	}
	return false
}

// sleepCtx waits d, or less if ctx ends first (then it returns ctx.Err()).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
