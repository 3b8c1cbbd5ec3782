package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/projections"
)

// manyApprovals is n requested withdrawals; every third shares its
// predecessor's request time, so the order falls back to the id.
func manyApprovals(n int) []aggregate.Withdrawal {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := make([]aggregate.Withdrawal, n)
	for i := range ws {
		at := base.Add(time.Duration(i) * time.Second)
		if i%3 == 2 {
			at = ws[i-1].RequestedAt
		}
		ws[i] = aggregate.Withdrawal{
			ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), State: aggregate.StateRequested, Account: "acme",
			Amount: aggregate.MustParseAmount(aggregate.USDT, "3"), Asset: aggregate.USDT.Code, RequiredApprovals: 1,
			RequestedAt: at,
		}
	}
	return ws
}

type page struct {
	Items      []aggregate.WithdrawalView `json:"items"`
	NextCursor *string                    `json:"next_cursor"`
}

// Finding "queues without paging": 20,000 open withdrawals made one 9.6 MB
// reply. Every queue now answers pages: limit (default 100, at most 1000)
// and the cursor of the page before, on HTTP and NATS alike.
func TestQueuesAnswerPagesWithLimitAndCursor(t *testing.T) {
	all := manyApprovals(250)
	q := &mutableQueues{approvals: all}
	e := newEnv(t, envOpts{queues: q})

	var got []string
	path := "/v1/queues/approvals"
	for pages := 0; ; pages++ {
		r := e.do(t, "GET", path, tokBob, nil)
		wantStatus(t, r, http.StatusOK)
		var p page
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if pages < 2 && (len(p.Items) != api.DefaultPageLimit || p.NextCursor == nil) {
			t.Fatalf("page %d: %d items, next %v; want %d and a cursor", pages, len(p.Items), p.NextCursor, api.DefaultPageLimit)
		}
		for _, w := range p.Items {
			got = append(got, w.ID)
		}
		if p.NextCursor == nil {
			break
		}
		path = "/v1/queues/approvals?cursor=" + *p.NextCursor
	}
	if len(got) != len(all) {
		t.Fatalf("%d items over all pages, want %d", len(got), len(all))
	}
	for i, w := range all {
		if got[i] != w.ID {
			t.Fatalf("item %d is %s, want %s: every item once, in order", i, got[i], w.ID)
		}
	}

	// NATS: the same pages from {"limit","cursor"}.
	var first page
	natsOK(t, e.natsReq(t, api.SubjectQueueApprovals, tokBob, `{"limit":2}`), &first)
	if len(first.Items) != 2 || first.NextCursor == nil {
		t.Fatalf("NATS first page %+v", first)
	}
	// An item of the first page leaves the queue: the next page still
	// starts right after the cursor, skipping nothing.
	q.set(all[1:])
	var second page
	natsOK(t, e.natsReq(t, api.SubjectQueueApprovals, tokBob, `{"limit":2,"cursor":"`+*first.NextCursor+`"}`), &second)
	if len(second.Items) != 2 || second.Items[0].ID != all[2].ID || second.Items[1].ID != all[3].ID {
		t.Fatalf("NATS second page %+v, want %s, %s", second.Items, all[2].ID, all[3].ID)
	}

	// Bad pages are refused, naming the field.
	for _, c := range []struct{ query, field string }{
		{"limit=1001", "limit"}, {"limit=0", "limit"}, {"limit=-1", "limit"}, {"limit=ten", "limit"}, {"cursor=%21%21", "cursor"},
	} {
		wantErr(t, e.do(t, "GET", "/v1/queues/ready?"+c.query, tokBob, nil), http.StatusUnprocessableEntity, aggregate.CodeInvalidCommand, c.field)
	}
	natsErr(t, e.natsReq(t, api.SubjectQueueReady, tokBob, `{"limit":1001}`), "422", aggregate.CodeInvalidCommand, "limit")
	natsErr(t, e.natsReq(t, api.SubjectQueueReady, tokBob, `{"limit":"10"}`), "400", api.CodeMalformedJSON, "limit")
	natsErr(t, e.natsReq(t, api.SubjectQueueReady, tokBob, `{"page":1}`), "400", api.CodeMalformedJSON, "page")

	// The largest page is 1000.
	q.set(manyApprovals(1500))
	var big page
	natsOK(t, e.natsReq(t, api.SubjectQueueApprovals, tokBob, `{"limit":1000}`), &big)
	if len(big.Items) != 1000 || big.NextCursor == nil {
		t.Fatalf("limit 1000: %d items", len(big.Items))
	}
}

// mutableQueues is a Queues whose approvals change during a test.
type mutableQueues struct {
	mu        sync.Mutex
	approvals []aggregate.Withdrawal
	block     chan struct{} // when set, PendingApprovals waits on it
	entered   chan struct{}
}

func (q *mutableQueues) set(ws []aggregate.Withdrawal) { q.mu.Lock(); q.approvals = ws; q.mu.Unlock() }
func (q *mutableQueues) PendingApprovals() []aggregate.Withdrawal {
	if q.block != nil {
		q.entered <- struct{}{}
		<-q.block
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.approvals
}
func (q *mutableQueues) Ready(time.Time) []aggregate.Withdrawal        { return nil }
func (q *mutableQueues) InFlight(time.Time) []projections.InFlightItem { return nil }

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A principal beyond --rate-limit requests a second (burst 2×) is answered
// 429 rate_limited with Retry-After, over HTTP and NATS from one budget;
// another principal is not affected, and the budget refills with time.
func TestRateLimitIsPerPrincipalAcrossBothTransports(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOpts{rateLimit: api.NewRateLimiter(2, clock.now)}) // burst 4
	for range 2 {
		wantStatus(t, e.do(t, "GET", "/v1/policy", tokBob, nil), http.StatusOK)
		natsOK(t, e.natsReq(t, api.SubjectPolicyGet, tokBob, `{}`), &api.PolicyView{})
	}
	r := e.do(t, "GET", "/v1/policy", tokBob, nil)
	wantErr(t, r, http.StatusTooManyRequests, api.CodeRateLimited, "")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	m := e.natsReq(t, api.SubjectPolicyGet, tokBob, `{}`)
	natsErr(t, m, "429", api.CodeRateLimited, "")
	if m.Header.Get("Retry-After") == "" {
		t.Fatal("NATS 429 without Retry-After")
	}
	// carol has her own budget.
	wantStatus(t, e.do(t, "GET", "/v1/policy", tokCarol, nil), http.StatusOK)
	// Half a second later bob may send one more.
	clock.add(500 * time.Millisecond)
	wantStatus(t, e.do(t, "GET", "/v1/policy", tokBob, nil), http.StatusOK)
	wantErr(t, e.do(t, "GET", "/v1/policy", tokBob, nil), http.StatusTooManyRequests, api.CodeRateLimited, "")
}

// Requests beyond --http-max-in-flight are answered 503 with Retry-After at
// once instead of piling up goroutines and memory.
func TestRequestsBeyondTheInFlightBoundAreRefusedAtOnce(t *testing.T) {
	q := &mutableQueues{block: make(chan struct{}), entered: make(chan struct{})}
	e := newEnv(t, envOpts{queues: q, maxInFlight: 1})
	done := make(chan resp)
	go func() { done <- e.do(t, "GET", "/v1/queues/approvals", tokBob, nil) }()
	<-q.entered // the first request holds the only slot
	r := e.do(t, "GET", "/v1/policy", tokBob, nil)
	wantErr(t, r, http.StatusServiceUnavailable, api.CodeUnavailable, "")
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	close(q.block)
	wantStatus(t, <-done, http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/v1/policy", tokBob, nil), http.StatusOK)
}

// Finding "over NATS the queue exceeded the max payload (client timeout)
// while metrics counted a 200": a reply that would not fit is refused with
// 413 reply_too_large, and the metrics count the 413.
func TestNATSReplyOverTheMaxPayloadIsRefusedAndCountedAsSuch(t *testing.T) {
	e := newEnv(t)
	opts := natstest.DefaultTestOptions
	opts.Port = -1
	opts.MaxPayload = 32 << 10
	srv := natstest.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	svcConn, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svcConn.Close)
	metrics := api.NewMetrics()
	svc, err := api.StartService(svcConn, api.ServiceConfig{
		Intake: e.intake, Principals: testPrincipals(t), Queues: &mutableQueues{approvals: manyApprovals(200)},
		Metrics: metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := api.NewClient(nc, tokBob)

	_, err = c.Queue(t.Context(), "approvals", api.Page{Limit: 200})
	var refused *api.Refusal
	if !errors.As(err, &refused) || refused.Status != http.StatusRequestEntityTooLarge || refused.Code != api.CodeReplyTooLarge {
		t.Fatalf("a 200-item page over a 32 KiB max payload: %v", err)
	}
	// The service counts a reply just after sending it: wait for the count.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for requestsCounted(t, metrics, "nats", api.SubjectQueueApprovals, "413") != 1 {
		select {
		case <-ctx.Done():
			t.Fatal("metrics never counted the 413 reply")
		case <-time.After(time.Millisecond):
		}
	}
	if got := requestsCounted(t, metrics, "nats", api.SubjectQueueApprovals, "200"); got != 0 {
		t.Fatalf("metrics count %v replies 200", got)
	}
	// A smaller page fits.
	r, err := c.Queue(t.Context(), "approvals", api.Page{Limit: 10})
	if err != nil || len(r.Value.Items) != 10 {
		t.Fatalf("a 10-item page: %v", err)
	}
}

// requestsCounted reads weir_api_requests_total for one series.
func requestsCounted(t *testing.T, m *api.Metrics, transport, route, status string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "weir_api_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if labels(s)["transport"] == transport && labels(s)["route"] == route && labels(s)["status"] == status {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// limitedServer serves h on a loopback LimitListener with the given caps.
func limitedServer(t *testing.T, total, perAddr int) (*api.LimitListener, string) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln := api.NewLimitListener(tcp, total, perAddr, log)
	srv := api.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), log)
	srv.ConnState = ln.ConnState
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln, tcp.Addr().String()
}

// dialFrom opens a TCP connection from a loopback source address.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends one keep-alive request on c and reads the answer; false when
// the server closed the connection instead.
func get(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return false
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	return err == nil && n > 0
}

// waitIdle waits until the listener holds n connections, all idle: the
// server marks a connection idle just after writing its reply, so the
// client may read the reply first. It polls the listener's own state,
// bounded.
func waitIdle(t *testing.T, ln *api.LimitListener, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		s := ln.Stats()
		if s.Open == n && s.Idle == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("connections %+v, want %d open and idle", s, n)
		case <-time.After(time.Millisecond):
		}
	}
}

// One address may hold at most perAddr connections; at the total cap the
// oldest idle connection makes room for a new one, so an idle flood cannot
// keep a working client out.
func TestLimitListenerCapsPerAddressAndEvictsIdleAtTheTotalCap(t *testing.T) {
	ln, addr := limitedServer(t, 6, 3)
	var flood []net.Conn
	for range 3 {
		c := dialFrom(t, "127.0.0.2", addr)
		if !get(c) {
			t.Fatal("a connection within the per-address cap is refused")
		}
		flood = append(flood, c)
		waitIdle(t, ln, len(flood)) // idle in the order they came
	}
	if get(dialFrom(t, "127.0.0.2", addr)) {
		t.Fatal("a 4th connection from one address is served")
	}
	for range 3 {
		c := dialFrom(t, "127.0.0.3", addr)
		if !get(c) {
			t.Fatal("another address is refused")
		}
		flood = append(flood, c)
		waitIdle(t, ln, len(flood))
	}
	// All six idle: a seventh client gets in; the oldest idle one goes.
	if !get(dialFrom(t, "127.0.0.1", addr)) {
		t.Fatal("a new client is kept out by idle connections")
	}
	if s := ln.Stats(); s.Evicted != 1 {
		t.Fatalf("evicted %d, want 1", s.Evicted)
	}
	if get(flood[0]) {
		t.Fatal("the oldest idle connection was not the one closed")
	}
}

// Finding "a body sent at 1 byte / 10 s was held 80 s; only
// ReadHeaderTimeout is set": the server bounds every phase of a request
// and of an idle connection, and its headers.
func TestHTTPServerBoundsEveryPhase(t *testing.T) {
	srv := api.NewHTTPServer(http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if d <= 0 || d > time.Minute {
			t.Errorf("%s = %s, want set and at most a minute", name, d)
		}
	}
	if srv.ReadTimeout >= 80*time.Second || srv.WriteTimeout <= api.DefaultCommandTimeout {
		t.Errorf("ReadTimeout %s (a trickled body must be cut well before 80 s), WriteTimeout %s (must outlast a command)", srv.ReadTimeout, srv.WriteTimeout)
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Errorf("MaxHeaderBytes %d", srv.MaxHeaderBytes)
	}
}

// Guessing tokens over HTTP: an address's failed authentications draw on a
// budget of their own (as a principal's requests do), so a guesser gets
// 429 after the burst while a valid principal is served.
func TestFailedAuthenticationsAreRateLimitedPerAddress(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOpts{rateLimit: api.NewRateLimiter(1, clock.now)}) // burst 2
	for range 2 {
		wantErr(t, e.do(t, "GET", "/v1/policy", "guess-guess-guess", nil), http.StatusUnauthorized, api.CodeUnauthenticated, "")
	}
	r := e.do(t, "GET", "/v1/policy", "guess-guess-guess", nil)
	wantErr(t, r, http.StatusTooManyRequests, api.CodeRateLimited, "")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	wantStatus(t, e.do(t, "GET", "/v1/policy", tokBob, nil), http.StatusOK)
	clock.add(time.Second)
	wantErr(t, e.do(t, "GET", "/v1/policy", "guess-guess-guess", nil), http.StatusUnauthorized, api.CodeUnauthenticated, "")
}
