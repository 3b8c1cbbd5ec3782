package console

import (
	"context"
	"encoding/json"
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
type Feed struct {
	mu   sync.Mutex
	subs map[chan notify.Notification]struct{}
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

func (f *Feed) subscribe() (<-chan notify.Notification, func()) {
	ch := make(chan notify.Notification, 64)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// Follow reads new messages of WEIR_NOTIFY (an ordered consumer, from now
// on) into f until ctx ends. The consumer exists when Follow returns, so a
// state change stored afterwards reaches f.
func Follow(ctx context.Context, js jetstream.JetStream, f *Feed, log *slog.Logger) (stop func(), err error) {
	stream, err := js.Stream(ctx, notify.Stream)
	if err != nil {
		return nil, fmt.Errorf("console: notification stream: %w", err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{notify.SubjectPrefix + ".>"},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
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
		return nil, fmt.Errorf("console: consume notifications: %w", err)
	}
	return cc.Stop, nil
}

// liveEvent is what a page learns of a state change: enough to decide
// whether to refresh itself, nothing more.
type liveEvent struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Account string `json:"account"`
	Version uint64 `json:"version"`
}

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
	ch, cancel := c.cfg.Feed.subscribe()
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
