package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/notify"
)

// Delivery outcomes (the outcome label of weir_webhook_deliveries_total):
// one per attempt, and abandoned once per delivery given up.
const (
	OutcomeDelivered = "delivered" // 2xx
	OutcomeFailed    = "failed"    // non-2xx, timeout, connection refused: retried
	OutcomeRefused   = "refused"   // the target address is not allowed (Guard): retried, in case DNS changes back
	OutcomeAbandoned = "abandoned" // retried for MaxRetryAge without success: the cursor moves on
)

// Retry defaults.
const (
	DefaultFirstRetry  = 2 * time.Second
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultMaxRetryAge = 72 * time.Hour
	DefaultTimeout     = 10 * time.Second
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	Service *Service
	Store   *eventstore.Store   // the log, for registrations
	JS      jetstream.JetStream // reads WEIR_NOTIFY
	Guard   Guard               // the dial-time check (the same rule as registration)
	Clock   Clock               // nil: the wall clock
	// Client sends deliveries; nil builds one whose dialer applies Guard,
	// with no proxy and no redirects.
	Client *http.Client
	// FirstRetry, MaxBackoff, MaxRetryAge: the backoff (FirstRetry·2ⁿ up to
	// MaxBackoff) and how long a delivery is retried before it is given up.
	FirstRetry, MaxBackoff, MaxRetryAge time.Duration
	// Timeout bounds one POST.
	Timeout time.Duration
	// OnOutcome counts each attempt's outcome (metrics); nil ignores them.
	OnOutcome func(outcome string)
	Logger    *slog.Logger
}

// Dispatcher delivers WEIR_NOTIFY to every registered webhook: one loop
// per webhook, each in WEIR_NOTIFY order.
type Dispatcher struct {
	cfg    DispatcherConfig
	client *http.Client
	log    *slog.Logger

	mu    sync.Mutex
	loops map[string]context.CancelFunc
	wg    sync.WaitGroup
}

// NewDispatcher returns a stopped dispatcher.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = DefaultFirstRetry
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxRetryAge <= 0 {
		cfg.MaxRetryAge = DefaultMaxRetryAge
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.OnOutcome == nil {
		cfg.OnOutcome = func(string) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client := cfg.Client
	if client == nil {
		client = NewClient(cfg.Guard, cfg.Timeout)
	}
	return &Dispatcher{cfg: cfg, client: client, log: cfg.Logger, loops: map[string]context.CancelFunc{}}
}

// NewClient is the HTTP client deliveries use: every connection is checked
// by guard on the address dialled, no proxy from the environment, no
// redirects followed (a 3xx is a failed attempt).
func NewClient(guard Guard, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, Control: guard.Control}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Run follows the registrations in the log and runs one delivery loop per
// live webhook, until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.wg.Wait()
	hooks := map[string]aggregate.Webhook{}
	err := d.cfg.Store.Subscribe(ctx, 1, eventlog.TypeWebhook, func(r eventstore.Record) error {
		e, err := aggregate.DecodeWebhookEvent(r.Type, r.Payload)
		if err != nil {
			return err
		}
		h := aggregate.EvolveWebhook(hooks[r.Key.ID], e)
		hooks[r.Key.ID] = h
		if h.Deleted {
			d.stop(h.ID)
		} else {
			d.start(ctx, h)
		}
		return nil
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		d.log.Error("webhook: registration event quarantined, ignored", "seq", v.Sequence, "subject", v.Subject, "err", v.Err)
		return nil
	}))
	d.mu.Lock()
	for _, cancel := range d.loops {
		cancel()
	}
	d.mu.Unlock()
	return err
}

func (d *Dispatcher) start(ctx context.Context, h aggregate.Webhook) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.loops[h.ID]; ok {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	d.loops[h.ID] = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.loop(lctx, h)
	}()
}

func (d *Dispatcher) stop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cancel, ok := d.loops[id]; ok {
		cancel()
		delete(d.loops, id)
	}
}

// loop delivers to one webhook until ctx is done, resuming after its cursor.
func (d *Dispatcher) loop(ctx context.Context, h aggregate.Webhook) {
	log := d.log.With("webhook", h.ID)
	for ctx.Err() == nil {
		err := d.follow(ctx, h)
		if ctx.Err() != nil {
			return
		}
		log.Warn("webhook: delivery loop will resume", "err", err)
		select {
		case <-ctx.Done():
		case <-d.cfg.Clock.After(time.Second):
		}
	}
}

// subjects are the parts of WEIR_NOTIFY a webhook reads: the withdrawal
// notifications of its accounts (all without a filter) if it asked for
// them, the wallet's if it asked for any wallet event.
func subjects(h aggregate.Webhook) []string {
	var out []string
	if slices.Contains(h.Events, aggregate.WebhookEventStateChanged) {
		if len(h.Accounts) == 0 {
			out = append(out, notify.SubjectPrefix+".>")
		}
		for _, a := range h.Accounts {
			out = append(out, notify.SubjectPrefix+"."+a+".>")
		}
	}
	if slices.ContainsFunc(h.Events, aggregate.IsWalletEvent) {
		out = append(out, notify.WalletSubjectPrefix+".>")
	}
	return out
}

func (d *Dispatcher) follow(ctx context.Context, h aggregate.Webhook) error {
	svc := d.cfg.Service
	cursor, err := svc.cursor(ctx, h)
	if err != nil {
		return err
	}
	secret, err := svc.secret(ctx, h.ID)
	if err != nil {
		return err
	}
	cons, err := d.cfg.JS.OrderedConsumer(ctx, notify.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects(h), DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: cursor + 1,
	})
	if err != nil {
		return fmt.Errorf("webhook %s: reading %s: %w", h.ID, notify.Stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("webhook %s: reading %s: %w", h.ID, notify.Stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return fmt.Errorf("webhook %s: reading %s: %w", h.ID, notify.Stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("webhook %s: %w", h.ID, err)
		}
		seq := md.Sequence.Stream
		var n notify.Notification
		if err := json.Unmarshal(msg.Data(), &n); err != nil {
			return fmt.Errorf("webhook %s: notification %d: %w", h.ID, seq, err)
		}
		if h.Wants(n.Type, n.Withdrawal.Account) {
			if err := d.deliver(ctx, h, secret, seq, n, msg.Data()); err != nil {
				return err
			}
		}
		if err := svc.setCursor(ctx, h.ID, seq); err != nil {
			return err
		}
	}
}

// backoff is the wait after the n-th failed attempt (n ≥ 1).
func (d *Dispatcher) backoff(n int) time.Duration {
	wait := d.cfg.FirstRetry
	for i := 1; i < n && wait < d.cfg.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, d.cfg.MaxBackoff)
}

// deliver POSTs one notification until it is delivered or given up,
// recording every attempt; it returns an error only when ctx is done or
// the record cannot be kept.
func (d *Dispatcher) deliver(ctx context.Context, h aggregate.Webhook, secret string, seq uint64, n notify.Notification, body []byte) error {
	svc := d.cfg.Service
	rec, found, err := svc.delivery(ctx, h.ID, seq)
	if err != nil {
		return err
	}
	if !found {
		rec = Delivery{WebhookID: h.ID, EventID: n.EventID, Type: n.Type, WithdrawalID: n.Withdrawal.ID, State: string(n.Withdrawal.State),
			NotifySeq: seq, Status: StatusPending}
	}
	if rec.Status != StatusPending {
		return nil // done before a restart
	}
	for {
		if rec.Attempts > 0 {
			due := rec.LastAttempt.Add(d.backoff(rec.Attempts))
			if wait := due.Sub(d.cfg.Clock.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-d.cfg.Clock.After(wait):
				}
			}
		}
		now := d.cfg.Clock.Now().UTC()
		status, postErr := d.post(ctx, h, secret, n.EventID, body, now)
		if ctx.Err() != nil {
			return ctx.Err() // stopping: this attempt does not count
		}
		a := Attempt{At: now, StatusCode: status, Outcome: OutcomeDelivered}
		switch {
		case errors.Is(postErr, ErrPrivateTarget):
			a.Outcome, a.Error = OutcomeRefused, postErr.Error()
		case postErr != nil:
			a.Outcome, a.Error = OutcomeFailed, postErr.Error()
		case status < 200 || status > 299:
			a.Outcome, a.Error = OutcomeFailed, fmt.Sprintf("HTTP %d", status)
		}
		if rec.Attempts == 0 {
			rec.FirstAttempt = now
		}
		rec.Attempts++
		rec.LastAttempt = now
		rec.RecentHistory = append(rec.RecentHistory, a)
		if len(rec.RecentHistory) > maxAttemptsKept {
			rec.RecentHistory = rec.RecentHistory[len(rec.RecentHistory)-maxAttemptsKept:]
		}
		switch {
		case a.Outcome == OutcomeDelivered:
			rec.Status, rec.DeliveredAt, rec.NextAttempt = StatusDelivered, &now, nil
		case now.Sub(rec.FirstAttempt) >= d.cfg.MaxRetryAge:
			rec.Status, rec.NextAttempt = StatusAbandoned, nil
			d.log.Error("webhook: delivery given up", "webhook", h.ID, "event_id", n.EventID, "attempts", rec.Attempts, "last_error", a.Error)
		default:
			next := now.Add(d.backoff(rec.Attempts))
			rec.NextAttempt = &next
			d.log.Warn("webhook: delivery failed, will retry", "webhook", h.ID, "event_id", n.EventID, "attempt", rec.Attempts, "next", next, "err", a.Error)
		}
		if err := svc.putDelivery(ctx, rec); err != nil {
			return err
		}
		// Counted once recorded, so what /metrics says is in the records.
		d.cfg.OnOutcome(a.Outcome)
		if rec.Status == StatusAbandoned {
			d.cfg.OnOutcome(OutcomeAbandoned)
		}
		if rec.Status != StatusPending {
			return nil
		}
	}
}

// post sends one attempt and returns the response status.
func (d *Dispatcher) post(ctx context.Context, h aggregate.Webhook, secret, eventID string, body []byte, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "weir-webhooks/1")
	req.Header.Set(HeaderEventID, eventID)
	req.Header.Set(HeaderSignature, Signature(secret, now, body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
