package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas/notify"
)

// Feed fans the notification stream out to the console's live pages. Each
// subscriber has a small buffer; one that does not keep up loses updates
// (its page is then merely stale until the next one), it never holds up
// the others.
//
// A feed that follows WEIR_NOTIFY (Follow) reads it only while a page is
// subscribed: the first subscriber starts the consumer, the last one to
// leave stops it, so a process with no live page open decodes nothing.
type Feed struct {
	mu   sync.Mutex // guards subs; Publish holds it
	subs map[chan notify.Notification]struct{}

	// life orders the subscribers' arrivals and departures with starting
	// and stopping the consumer; it is held across the start's round
	// trips, so a page that arrives while the first one starts the
	// consumer waits until it exists.
	life    sync.Mutex
	n       int                                          // subscribers
	start   func(context.Context) (stop func(), _ error) // nil: nothing to follow (Publish by hand)
	running func()                                       // stops the consumer; nil when none runs
	closed  bool                                         // Follow's stop or ctx: no more subscribers
}

// NewFeed returns a feed with no subscribers.
func NewFeed() *Feed { return &Feed{subs: map[chan notify.Notification]struct{}{}} }

// Publish hands n to every subscriber that has room.
func (f *Feed) Publish(n notify.Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- n:
		default:
		}
	}
}

// errFeedClosed: the feed no longer follows the stream (the process is
// stopping).
var errFeedClosed = errors.New("console: live updates have stopped")

// subscribe adds a subscriber. If it is the first, the consumer is
// started before subscribe returns (ctx bounds the start), so a state
// change stored after subscribe returns reaches the channel. On error
// nothing is left behind: no subscriber, no consumer.
func (f *Feed) subscribe(ctx context.Context) (<-chan notify.Notification, func(), error) {
	f.life.Lock()
	defer f.life.Unlock()
	if f.closed {
		return nil, nil, errFeedClosed
	}
	if f.n == 0 && f.start != nil {
		stop, err := f.start(ctx)
		if err != nil {
			return nil, nil, err
		}
		f.running = stop
	}
	f.n++
	ch := make(chan notify.Notification, 64)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() { once.Do(func() { f.unsubscribe(ch) }) }, nil
}

// unsubscribe removes ch; the last subscriber to leave stops the
// consumer (outside life: a page arriving meanwhile starts a new one,
// which does not meet the old one, whose name differs).
func (f *Feed) unsubscribe(ch chan notify.Notification) {
	f.mu.Lock()
	delete(f.subs, ch)
	f.mu.Unlock()
	f.life.Lock()
	f.n--
	var stop func()
	if f.n == 0 {
		stop, f.running = f.running, nil
	}
	f.life.Unlock()
	if stop != nil {
		stop()
	}
}

// close stops the consumer and refuses subscribers from now on; those
// subscribed keep their channels (nothing more arrives).
func (f *Feed) close() {
	f.life.Lock()
	f.closed = true
	stop := f.running
	f.running = nil
	f.life.Unlock()
	if stop != nil {
		stop()
	}
}

// Follow makes f read WEIR_NOTIFY while it has subscribers: the first
// live page to subscribe starts an ordered consumer of the messages
// stored from then on, and waits until it exists, so a state change
// stored after a page subscribed reaches it; the last page to leave
// stops the consumer and deletes it on the server. With no page open
// nothing reads the stream. Follow only checks that the stream exists;
// stop, or ctx ending, stops the consumer and refuses later pages.
func Follow(ctx context.Context, js jetstream.JetStream, f *Feed, log *slog.Logger) (stop func(), err error) {
	stream, err := js.Stream(ctx, notify.Stream)
	if err != nil {
		return nil, fmt.Errorf("console: notification stream: %w", err)
	}
	f.life.Lock()
	defer f.life.Unlock()
	if f.start != nil || f.closed {
		return nil, errors.New("console: the feed already follows the notification stream")
	}
	f.start = func(ctx context.Context) (func(), error) { return consume(ctx, stream, f, log) }
	unhook := context.AfterFunc(ctx, f.close)
	return func() { unhook(); f.close() }, nil
}

// consumerIdle is the inactivity threshold of the feed's consumer: the
// server removes it by itself if a stop's delete was lost (the client
// keeps a pull waiting while it consumes, which counts as activity).
const consumerIdle = time.Minute

// consume starts an ordered consumer of new notifications into f; stop
// ends it and deletes it on the server.
func consume(ctx context.Context, stream jetstream.Stream, f *Feed, log *slog.Logger) (stop func(), err error) {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{notify.SubjectPrefix + ".>"},
		DeliverPolicy:     jetstream.DeliverNewPolicy,
		InactiveThreshold: consumerIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("console: notification consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var n notify.Notification
		if err := json.Unmarshal(m.Data(), &n); err != nil {
			log.Warn("console: notification not understood", "subject", m.Subject(), "err", err)
			return
		}
		f.Publish(n)
	})
	if err != nil {
		drop(stream, cons, log)
		return nil, fmt.Errorf("console: consume notifications: %w", err)
	}
	return func() { cc.Stop(); drop(stream, cons, log) }, nil
}

// drop deletes the consumer's current incarnation on the server (an
// ordered consumer recreates itself under a new name after a reset).
func drop(stream jetstream.Stream, cons jetstream.Consumer, log *slog.Logger) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stream.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		log.Warn("console: deleting the notification consumer; the server drops it when idle", "consumer", info.Name, "idle", consumerIdle, "err", err)
	}
}

// liveEvent is what a page learns of a state change: enough to decide
// whether to refresh itself, nothing more.
type liveEvent struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Account string `json:"account"`
	Version uint64 `json:"version"`
}

// feedStartTimeout bounds starting the feed's consumer for the first page.
const feedStartTimeout = 5 * time.Second

// heartbeat keeps the stream open through proxies and notices an ended
// session.
const heartbeat = 20 * time.Second

// events is GET /console/events: server-sent events of the state changes
// on the accounts the principal may read (api.Principal.MayAct, the rule
// the API reads by). It ends when the session does.
func (c *Console) events(w http.ResponseWriter, r *http.Request, ss *session) {
	if c.cfg.Feed == nil {
		c.fail(w, r, ss, http.StatusNotFound, "Live updates are off in this process.", "")
		return
	}
	if !c.streams.TryAcquire() {
		w.Header().Set("Retry-After", "5")
		c.fail(w, r, ss, http.StatusServiceUnavailable, "Too many live pages are open; reload later.", "")
		return
	}
	defer c.streams.Release()
	// The first page starts the feed's consumer: within the request, and
	// before anything is sent, so a failure is still a status.
	sctx, scancel := context.WithTimeout(r.Context(), feedStartTimeout)
	ch, cancel, err := c.cfg.Feed.subscribe(sctx)
	scancel()
	if err != nil {
		c.log.Warn("console: live updates unavailable", "err", err)
		w.Header().Set("Retry-After", "5")
		c.fail(w, r, ss, http.StatusServiceUnavailable, "Live updates are unavailable right now; reload later.", "")
		return
	}
	defer cancel()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(s string) bool {
		// The server's write timeout is meant for pages; a stream extends
		// it for each write.
		_ = rc.SetWriteDeadline(time.Now().Add(heartbeat + 10*time.Second))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 3000\nevent: ready\ndata: {}\n\n") {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	p := ss.p
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.closed:
			_ = send("event: closing\ndata: {}\n\n")
			return
		case <-tick.C:
			if !c.sessions.alive(ss) {
				_ = send("event: ended\ndata: {}\n\n")
				return
			}
			if !send(": heartbeat\n\n") {
				return
			}
		case n := <-ch:
			if !c.sessions.alive(ss) {
				_ = send("event: ended\ndata: {}\n\n")
				return
			}
			wv := n.Withdrawal
			if !p.MayAct(wv.Account) {
				continue
			}
			b, _ := json.Marshal(liveEvent{ID: wv.ID, State: string(wv.State), Account: wv.Account, Version: wv.Version})
			if !send("event: withdrawal\ndata: " + string(b) + "\n\n") {
				return
			}
		}
	}
}
