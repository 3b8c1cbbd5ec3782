package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas/hotwallet"
)

// Wallet notifications (CONTRACT.md addition): the hot wallet crossing a
// low mark and sending pausing or resuming, on
// weir.notify.wallet.<topic>.<state> of WEIR_NOTIFY:
//
//	weir.notify.wallet.usdt.low   weir.notify.wallet.usdt.recovered
//	weir.notify.wallet.trx.low    weir.notify.wallet.trx.recovered
//	weir.notify.wallet.sending.paused   weir.notify.wallet.sending.resumed
const WalletSubjectPrefix = "weir.notify.wallet"

// WalletNotification is the body of a wallet notification (and of its
// webhook deliveries).
type WalletNotification struct {
	EventID string    `json:"event_id"`
	Type    string    `json:"type"`
	At      time.Time `json:"at"`
	// Asset ("USDT", "TRX") and LowMark (decimal) name the mark crossed;
	// absent for sending.paused/resumed.
	Asset   string `json:"asset,omitempty"`
	LowMark string `json:"low_mark,omitempty"`
	// Wallet is GET /v1/wallet as the announcing process saw it right
	// after the change (paused_reason says why sending paused).
	Wallet hotwallet.Status `json:"wallet"`
}

// walletTopic is the subject's topic and state of a change.
func walletTopic(c hotwallet.Change) (topic, state string, err error) {
	switch c.Type {
	case hotwallet.ChangeLow, hotwallet.ChangeRecovered:
		if c.Asset != "USDT" && c.Asset != "TRX" {
			return "", "", fmt.Errorf("notify: wallet change %s of asset %q", c.Type, c.Asset)
		}
		topic = strings.ToLower(c.Asset)
	case hotwallet.ChangePaused, hotwallet.ChangeResumed:
		topic = "sending"
	default:
		return "", "", fmt.Errorf("notify: unknown wallet change %q", c.Type)
	}
	_, state, _ = strings.Cut(c.Type, ".")
	return topic, state, nil
}

// WalletAnnouncer publishes the hot-wallet monitor's changes to
// WEIR_NOTIFY, once per change of the announced state however many weir
// processes watch the wallet.
//
// The announced state is durable in WEIR_NOTIFY itself: the last message
// on weir.notify.wallet.<topic>.* is the state announced last. A change is
// published only when it differs from that state (a process that saw the
// crossing later, or whose reading came after another's announcement,
// publishes nothing), and each publish expects that last message's
// sequence on the topic (Nats-Expected-Last-Subject-Sequence with the
// topic's wildcard), so of two processes racing to announce the same
// crossing one lands and the other is refused, reads again and finds it
// announced. Nats-Msg-Id (= event_id) is wallet.<topic>.<state>.<sequence
// of the previous message on the topic>: deterministic per crossing, so
// racers and a retry after a lost ack also meet the server's
// de-duplication (which a cluster applies before the sequence check). A
// Nats-Msg-Id alone would not do: the window is two minutes, and two
// processes do not see a crossing at the same moment.
//
// Neither "recovered" nor "resumed" is announced when nothing low or
// paused was: the first announcement of a topic is a low mark or a pause.
type WalletAnnouncer struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	log    *slog.Logger
	now    func() time.Time
	retry  time.Duration

	mu        sync.Mutex
	queue     []WalletNotification
	wake      chan struct{}
	published int
	idle      chan struct{}
}

// NewWalletAnnouncer announces on stream (EnsureStream) with js.
func NewWalletAnnouncer(js jetstream.JetStream, stream jetstream.Stream, log *slog.Logger) *WalletAnnouncer {
	if log == nil {
		log = slog.Default()
	}
	return &WalletAnnouncer{js: js, stream: stream, log: log, now: time.Now, retry: 500 * time.Millisecond,
		wake: make(chan struct{}, 1)}
}

// Notify queues a change (hotwallet.Config.OnChange): it never blocks; Run
// announces the queue in order.
func (a *WalletAnnouncer) Notify(c hotwallet.Change) {
	n := WalletNotification{Type: c.Type, At: a.now().UTC(), Wallet: c.Status}
	if c.Asset != "" {
		n.Asset, n.LowMark = c.Asset, c.Mark
	}
	a.mu.Lock()
	a.queue = append(a.queue, n)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run announces queued changes until ctx is done; a change that cannot be
// published (NATS away) is retried, in order, until it is.
func (a *WalletAnnouncer) Run(ctx context.Context) error {
	for {
		a.mu.Lock()
		if len(a.queue) == 0 {
			if a.idle != nil {
				close(a.idle)
				a.idle = nil
			}
			a.mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-a.wake:
			}
			continue
		}
		n := a.queue[0]
		a.mu.Unlock()
		if _, err := a.Announce(ctx, n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.log.Warn("notify: wallet notification will be retried", "type", n.Type, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(a.retry):
			}
			continue
		}
		a.mu.Lock()
		a.queue = a.queue[1:]
		a.mu.Unlock()
	}
}

// Idle blocks until every queued change has been handled, or ctx is done.
func (a *WalletAnnouncer) Idle(ctx context.Context) error {
	a.mu.Lock()
	if len(a.queue) == 0 {
		a.mu.Unlock()
		return nil
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	ch := a.idle
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Published counts the notifications this announcer published.
func (a *WalletAnnouncer) Published() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.published
}

// Announce publishes n (At defaults to now; EventID is set here) unless
// its state is the one announced last on its topic; it reports whether
// this call published it.
func (a *WalletAnnouncer) Announce(ctx context.Context, n WalletNotification) (bool, error) {
	topic, state, err := walletTopic(hotwallet.Change{Type: n.Type, Asset: n.Asset})
	if err != nil {
		return false, err
	}
	filter := WalletSubjectPrefix + "." + topic + ".*"
	if n.At.IsZero() {
		n.At = a.now().UTC()
	}
	for range 10 {
		var prevSeq uint64
		prevState := ""
		last, err := a.stream.GetLastMsgForSubject(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, fmt.Errorf("notify: last %s: %w", filter, err)
		default:
			prevSeq = last.Sequence
			prevState = last.Subject[strings.LastIndexByte(last.Subject, '.')+1:]
		}
		if prevState == state || prevState == "" && (state == "recovered" || state == "resumed") {
			return false, nil
		}
		n.EventID = fmt.Sprintf("wallet.%s.%s.%d", topic, state, prevSeq)
		body, err := json.Marshal(n)
		if err != nil {
			return false, fmt.Errorf("notify: encode %s: %w", n.EventID, err)
		}
		msg := nats.NewMsg(WalletSubjectPrefix + "." + topic + "." + state)
		msg.Data = body
		ack, err := a.js.PublishMsg(ctx, msg, jetstream.WithMsgID(n.EventID), jetstream.WithExpectLastSequenceForSubject(prevSeq, filter))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			continue // another process announced meanwhile: read again
		}
		if err != nil {
			return false, fmt.Errorf("notify: publish %s: %w", n.EventID, err)
		}
		if ack.Duplicate {
			return false, nil
		}
		a.mu.Lock()
		a.published++
		a.mu.Unlock()
		a.log.Info("notify: wallet notification published", "type", n.Type, "event_id", n.EventID, "seq", ack.Sequence)
		return true, nil
	}
	return false, fmt.Errorf("notify: %s: too much contention", filter)
}
