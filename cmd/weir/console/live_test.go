package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/cmd/weir/console"
	"github.com/weir-payouts/weir/sagas/notify"
)

// notifyConsumers lists the consumers on WEIR_NOTIFY.
func (s *stack) notifyConsumers(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := s.js.Stream(ctx, notify.Stream)
	if err != nil {
		t.Fatal(err)
	}
	names := stream.ConsumerNames(ctx)
	var out []string
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitNoConsumer polls (with a deadline) until WEIR_NOTIFY has no
// consumer: a page's handler stops the feed's after the client has gone.
func (s *stack) waitNoConsumer(t *testing.T, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		names := s.notifyConsumers(t)
		if len(names) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: consumers on %s still %v", why, notify.Stream, names)
		}
		time.Sleep(10 * time.Millisecond) // polling, with the deadline above
	}
}

func (e *sse) close() { e.res.Body.Close() }

// live opens /console/events and reads its ready event.
func (b *browser) live() *sse {
	b.t.Helper()
	e := b.events()
	if name, _ := e.next(b.t); name != "ready" {
		b.t.Fatalf("first event %q, want ready", name)
	}
	return e
}

// wantConsumers fails unless WEIR_NOTIFY has n consumers now.
func (s *stack) wantConsumers(t *testing.T, n int, when string) {
	t.Helper()
	if names := s.notifyConsumers(t); len(names) != n {
		t.Fatalf("%s: consumers on %s %v, want %d", when, notify.Stream, names, n)
	}
}

// refusedEvents asks for /console/events expecting a refusal: a stream
// that opens instead is cut after a few seconds (a failure, not a hang).
func (b *browser) refusedEvents() page {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.base+"/console/events", nil)
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatalf("events: %d, then %v", res.StatusCode, err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

// nextWithdrawal skips to the next withdrawal event and returns its id.
func (e *sse) nextWithdrawal(t *testing.T) string {
	t.Helper()
	for {
		name, data := e.next(t)
		if name == "withdrawal" {
			id, _ := data["id"].(string)
			return id
		}
	}
}

// WEIR_NOTIFY is read only while a live page is open: no consumer before
// the first page or after the last one, one (shared) while pages are
// open, and a state change stored after a page subscribed reaches it —
// the first time, with a second page, after the first left, and again
// after the consumer was stopped and started anew.
func TestLiveFeedConsumesOnlyWhileAPageIsOpen(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	bob.get("/console/approvals")
	s.wantConsumers(t, 0, "no live page open")

	first := bob.live()
	// ready is sent after the consumer exists: no polling here.
	s.wantConsumers(t, 1, "one live page open")
	id := s.request(t, "dev", "5000", "alice")
	if got := first.nextWithdrawal(t); got != id {
		t.Fatalf("first page got %s, want %s", got, id)
	}

	olivia := newBrowser(t, srv)
	olivia.login(tokOlivia)
	second := olivia.live()
	s.wantConsumers(t, 1, "two live pages open")
	first.close()
	id = s.request(t, "dev", "5001", "alice")
	if got := second.nextWithdrawal(t); got != id {
		t.Fatalf("second page, the first closed: got %s, want %s", got, id)
	}
	s.wantConsumers(t, 1, "one of two pages left")

	second.close()
	s.waitNoConsumer(t, "the last live page closed")

	again := bob.live()
	s.wantConsumers(t, 1, "a page open again")
	id = s.request(t, "dev", "5002", "alice")
	if got := again.nextWithdrawal(t); got != id {
		t.Fatalf("reopened page got %s, want %s", got, id)
	}
	again.close()
	s.waitNoConsumer(t, "the reopened page closed")
}

// openReady opens /console/events with c and reads up to the ready event.
func openReady(c *http.Client, base string) (*http.Response, error) {
	res, err := c.Get(base + "/console/events")
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("events: %d", res.StatusCode)
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			res.Body.Close()
			return nil, fmt.Errorf("events before ready: %w", err)
		}
		if strings.TrimSpace(line) == "event: ready" {
			return res, nil
		}
	}
}

// Pages opening and closing at once, some while the consumer starts and
// others while it stops, leave no consumer behind and a feed that works.
func TestLiveFeedSurvivesPagesOpeningAndClosingAtOnce(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				res, err := openReady(bob.c, srv.URL)
				if err != nil {
					errs <- err
					return
				}
				res.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.waitNoConsumer(t, "every page closed")

	live := bob.live()
	id := s.request(t, "dev", "5000", "alice")
	if got := live.nextWithdrawal(t); got != id {
		t.Fatalf("after the churn the page got %s, want %s", got, id)
	}
}

// A consumer that cannot be started is a 503 for the page, and nothing
// is left counted: once it can be started again, the next page starts it.
func TestLivePageIs503WhenTheFeedCannotStart(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	ctx := context.Background()
	if err := s.js.DeleteStream(ctx, notify.Stream); err != nil {
		t.Fatal(err)
	}
	p := bob.refusedEvents()
	if p.status != http.StatusServiceUnavailable || p.header.Get("Retry-After") == "" {
		t.Fatalf("events without the stream: %d (Retry-After %q), want 503", p.status, p.header.Get("Retry-After"))
	}
	mustContain(t, p, "Live updates are unavailable")
	if !strings.Contains(s.logs.String(), "live updates unavailable") {
		t.Fatalf("the failed start was not logged:\n%s", s.logs.String())
	}

	if _, err := notify.EnsureStream(ctx, s.js, 1, true); err != nil {
		t.Fatal(err)
	}
	live := bob.live()
	// Had the failed page stayed counted, this one would have joined a
	// consumer that never existed.
	s.wantConsumers(t, 1, "a page open after a failed start")
	live.close()
	s.waitNoConsumer(t, "the page closed")
}

// Once the feed is stopped (Follow's stop, or its context ending) its
// consumer is gone at once and new pages get 503.
func TestLivePagesAfterTheFeedStoppedAre503(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	live := bob.live()
	s.stopFeed()
	s.wantConsumers(t, 0, "feed stopped")
	if p := bob.refusedEvents(); p.status != http.StatusServiceUnavailable {
		t.Fatalf("events after the feed stopped: %d, want 503", p.status)
	}
	live.close()
}

// A feed whose context ends stops like one stopped by hand.
func TestLiveFeedStopsWhenItsContextEnds(t *testing.T) {
	s := newStack(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed := console.NewFeed()
	stop, err := console.Follow(ctx, s.js, feed, slog.New(slog.NewTextHandler(s.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if _, err := console.Follow(ctx, s.js, feed, slog.Default()); err == nil {
		t.Fatal("a feed followed the stream twice")
	}
	srv := s.server(t, console.Config{Feed: feed})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	live := bob.live()
	s.wantConsumers(t, 1, "one page open")
	cancel()
	s.waitNoConsumer(t, "the feed's context ended")
	if p := bob.refusedEvents(); p.status != http.StatusServiceUnavailable {
		t.Fatalf("events after the feed's context ended: %d, want 503", p.status)
	}
	live.close()
}
