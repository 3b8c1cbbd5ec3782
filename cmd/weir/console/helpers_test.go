package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/console"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
)

const testAddr = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

// Tokens of the test principals.
const (
	tokAlice  = "alice-token-0001" // requester, approver
	tokBob    = "bob-token-00002"  // approver
	tokOlivia = "olivia-token-005" // operator, requester
	tokRia    = "ria-token-00007"  // requester, approver on acme only
)

// stack is the real application under the console: embedded NATS
// (memory), the event store, ledger, projections (the queues), the
// notification publisher (WEIR_NOTIFY) and the webhook room.
type stack struct {
	intake     *sagas.Intake
	principals *api.Principals
	app        *api.App
	feed       *console.Feed
	stopFeed   func()              // Follow's stop
	js         jetstream.JetStream // where WEIR_NOTIFY is
	logs       *syncBuffer
	clock      *clock
}

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type queues struct{ p *projections.Projector }

func (q queues) catchUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = q.p.CatchUp(ctx)
}
func (q queues) PendingApprovals() []aggregate.Withdrawal { q.catchUp(); return q.p.PendingApprovals() }
func (q queues) Ready(now time.Time) []aggregate.Withdrawal {
	q.catchUp()
	return q.p.Ready(now)
}
func (q queues) InFlight(now time.Time) []projections.InFlightItem {
	q.catchUp()
	return q.p.InFlight(now)
}

func newStack(t *testing.T, limiter *api.RateLimiter) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	emb := eventstoretest.Start(t)
	nc := emb.Conn()
	store := emb.StoreOn(ctx, nc, eventlog.NewRegistry())
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, log)
	intake := sagas.NewIntake(repo, ledger, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = ledger.Run(ctx) }()
	proj := projections.New(store, projections.Options{Logger: log})
	if err := proj.Start(ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := notify.EnsureStream(ctx, js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	pub := notify.NewPublisher(store, js, stream, log)
	wg.Add(1)
	go func() { defer wg.Done(); _ = pub.Run(ctx) }()
	hooks, err := webhook.Open(ctx, js, store, stream, webhook.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	principals, err := api.NewPrincipals([]api.Principal{
		{Name: "alice", Token: tokAlice, Roles: []api.Role{api.RoleRequester, api.RoleApprover}},
		{Name: "bob", Token: tokBob, Roles: []api.Role{api.RoleApprover}},
		{Name: "olivia", Token: tokOlivia, Roles: []api.Role{api.RoleOperator, api.RoleRequester}},
		{Name: "ria", Token: tokRia, Roles: []api.Role{api.RoleRequester, api.RoleApprover}, Accounts: []string{"acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	feed := console.NewFeed()
	stop, err := console.Follow(ctx, js, feed, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		_ = proj.Stop(context.Background())
		cancel()
		wg.Wait()
		nc.Close()
		emb.Shutdown()
	})
	s := &stack{
		intake: intake, principals: principals, feed: feed, stopFeed: stop, js: js, logs: logs, clock: &clock{},
		app: api.NewApp(api.AppConfig{Intake: intake, Principals: principals, Queues: queues{proj}, Webhooks: hooks, RateLimit: limiter}),
	}
	for _, acct := range []string{"dev", "acme", "other"} {
		if _, _, err := intake.Credit(ctx, sagas.CreditInput{Account: acct, CreditID: "seed-" + acct, Amount: []byte(`"1000000"`), By: "olivia"}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// server serves the console (and nothing else) on a real listener.
func (s *stack) server(t *testing.T, cfg console.Config) *httptest.Server {
	t.Helper()
	cfg.App = s.app
	if cfg.Feed == nil {
		cfg.Feed = s.feed
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Now == nil {
		cfg.Now = s.clock.now
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv
}

// request asks for a withdrawal as principal by (through the application
// layer, as the API would).
func (s *stack) request(t *testing.T, account, amount, by string) string {
	t.Helper()
	id := uuid.NewString()
	_, _, err := s.intake.Request(context.Background(), sagas.RequestInput{
		OperationID: id, Account: account, ToAddress: testAddr, Amount: []byte(`"` + amount + `"`), Asset: "USDT-TRC20", By: by,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// decisions counts the decisions recorded on a withdrawal (approvals,
// approval, rejection); the ledger's reservation is not one.
func (s *stack) decisions(t *testing.T, id string) int {
	t.Helper()
	evs, err := s.intake.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		switch e.Type {
		case aggregate.EventApprovalRecorded, aggregate.EventApproved, aggregate.EventRejected:
			n++
		}
	}
	return n
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token of the first form on the page at path.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	p := b.get(path)
	m := csrfInput.FindStringSubmatch(p.body)
	if m == nil {
		b.t.Fatalf("GET %s: %d, no csrf field in:\n%s", path, p.status, p.body)
	}
	return m[1]
}

// login logs in with token and expects to land on the approvals queue.
func (b *browser) login(token string) {
	b.t.Helper()
	tok := b.csrf("/console/login")
	p := b.post("/console/login", url.Values{"csrf": {tok}, "token": {token}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/approvals" {
		b.t.Fatalf("login: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
}

func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.base + console.Path)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// sse reads server-sent events from /console/events.
type sse struct {
	res *http.Response
	r   *bufio.Reader
}

func (b *browser) events() *sse {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+"/console/events", nil)
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		b.t.Fatalf("events: %d", res.StatusCode)
	}
	return &sse{res: res, r: bufio.NewReader(res.Body)}
}

// next returns the next event's name and data (comments skipped).
func (s *sse) next(t *testing.T) (string, map[string]any) {
	t.Helper()
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %s: %v: %q", name, err, data)
			}
			return name, m
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func mustContain(t *testing.T, p page, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if !strings.Contains(p.body, s) {
			t.Fatalf("status %d: page lacks %q:\n%s", p.status, s, p.body)
		}
	}
}

func mustNotContain(t *testing.T, p page, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if strings.Contains(p.body, s) {
			t.Fatalf("page shows %q:\n%s", s, p.body)
		}
	}
}

var _ = fmt.Sprint
