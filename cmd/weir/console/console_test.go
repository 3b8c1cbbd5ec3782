package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/console"
	"github.com/weir-payouts/weir/projections"
)

// The session cookie (and the login form's cookie) are HttpOnly,
// SameSite=Strict and scoped to /console/; the session id is new at each
// login (no fixation) and every page carries the security headers.
func TestSessionCookieAttributesAndSecurityHeaders(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	b := newBrowser(t, srv)

	p := b.get("/console/approvals")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/login") {
		t.Fatalf("logged out: %d %q, want 303 to the login page", p.status, p.header.Get("Location"))
	}
	login := b.get("/console/login")
	checkCookie := func(h http.Header, name string) {
		t.Helper()
		for _, raw := range h.Values("Set-Cookie") {
			if !strings.HasPrefix(raw, name+"=") {
				continue
			}
			for _, want := range []string{"Path=/console/", "HttpOnly", "SameSite=Strict"} {
				if !strings.Contains(raw, want) {
					t.Fatalf("cookie %s lacks %s: %s", name, want, raw)
				}
			}
			return
		}
		t.Fatalf("no %s cookie set: %v", name, h.Values("Set-Cookie"))
	}
	checkCookie(login.header, console.LoginCookie)
	for k, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "same-origin",
	} {
		if got := login.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	csp := login.header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(login.body, "<script>") || strings.Contains(login.body, "onclick=") {
		t.Errorf("inline script allowed or used: CSP %q", csp)
	}
	tok := csrfInput.FindStringSubmatch(login.body)[1]
	res := b.post("/console/login", url.Values{"csrf": {tok}, "token": {tokAlice}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", res.status, res.body)
	}
	checkCookie(res.header, console.SessionCookie)
	first := b.cookie(console.SessionCookie).Value
	mustContain(t, b.get("/console/approvals"), "alice", "Approvals", `name="csrf"`)

	// A second login gets a new id; the old one keeps nothing of it.
	b2 := newBrowser(t, srv)
	b2.login(tokAlice)
	if b2.cookie(console.SessionCookie).Value == first {
		t.Fatal("two logins share a session id")
	}
	// A wrong token is refused and sets no session.
	b3 := newBrowser(t, srv)
	tok = b3.csrf("/console/login")
	if p := b3.post("/console/login", url.Values{"csrf": {tok}, "token": {"not-a-token-at-all"}}); p.status != http.StatusUnauthorized || b3.cookie(console.SessionCookie) != nil {
		t.Fatalf("wrong token: %d, cookie %v", p.status, b3.cookie(console.SessionCookie))
	}
}

// A POST without the session's CSRF token — none, a wrong one, another
// session's, or from another origin — is 403 and appends nothing; with it,
// the same POST approves.
func TestPostWithoutCSRFTokenIsRefused(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	id := s.request(t, "dev", "5000", "alice")
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	other := newBrowser(t, srv)
	other.login(tokAlice)
	otherTok := other.csrf("/console/approvals")

	path := "/console/withdrawals/" + id + "/approve"
	for name, form := range map[string]url.Values{
		"no token":              {},
		"wrong token":           {"csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"another session's one": {"csrf": {otherTok}},
	} {
		if p := bob.post(path, form); p.status != http.StatusForbidden || !strings.Contains(p.body, "csrf") {
			t.Fatalf("%s: %d, want 403 naming csrf\n%s", name, p.status, p.body)
		}
	}
	// The right token from another site's page: the Origin gives it away.
	tok := bob.csrf("/console/approvals")
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if p := bob.do(req); p.status != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d, want 403", p.status)
	}
	req, _ = http.NewRequest("POST", srv.URL+path, strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if p := bob.do(req); p.status != http.StatusForbidden {
		t.Fatalf("cross-site POST (Fetch Metadata): %d, want 403", p.status)
	}
	// The login form has its own double-submitted token.
	fresh := newBrowser(t, srv)
	if p := fresh.post("/console/login", url.Values{"token": {tokBob}}); p.status != http.StatusForbidden || fresh.cookie(console.SessionCookie) != nil {
		t.Fatalf("login without its token: %d", p.status)
	}
	if n := s.decisions(t, id); n != 0 {
		t.Fatalf("refused POSTs appended %d decisions", n)
	}
	if p := bob.post(path, url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther {
		t.Fatalf("with the token: %d\n%s", p.status, p.body)
	}
	if n := s.decisions(t, id); n != 1 {
		t.Fatalf("approve with the token: %d decisions, want 1", n)
	}
	mustContain(t, bob.get("/console/withdrawals/"+id), "Your approval is recorded", "1 of 2 approvals")
}

// The application's refusals reach the page in words, with their code, and
// change nothing: self_approval, invalid_transition, forbidden.
func TestRefusalsAreShownAsTheAPIGivesThem(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	id := s.request(t, "dev", "5000", "alice")
	alice := newBrowser(t, srv)
	alice.login(tokAlice)
	q := alice.get("/console/approvals")
	mustContain(t, q, "you requested this", "5000")
	mustNotContain(t, q, `action="/console/withdrawals/`+id+`/approve"`)
	tok := alice.csrf("/console/approvals")
	if p := alice.post("/console/withdrawals/"+id+"/approve", url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther {
		t.Fatalf("self approval: %d", p.status)
	}
	mustContain(t, alice.get("/console/withdrawals/"+id), "you cannot approve it", "self_approval")
	if n := s.decisions(t, id); n != 0 {
		t.Fatalf("self approval appended %d decisions", n)
	}
	// A decline needs a reason (the domain says so, not the console).
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	tok = bob.csrf("/console/approvals")
	bob.post("/console/withdrawals/"+id+"/decline", url.Values{"csrf": {tok}, "reason": {"  "}})
	mustContain(t, bob.get("/console/withdrawals/"+id), "invalid_command", "reason")
	bob.post("/console/withdrawals/"+id+"/decline", url.Values{"csrf": {tok}, "reason": {"destination not on file"}})
	mustContain(t, bob.get("/console/withdrawals/"+id), "Declined.", "rejected", "destination not on file")
	bob.post("/console/withdrawals/"+id+"/approve", url.Values{"csrf": {tok}})
	mustContain(t, bob.get("/console/withdrawals/"+id), "invalid_transition", "no longer in a state")

	// A principal without the approver role: the API's forbidden, in words.
	other := s.request(t, "dev", "5000", "alice")
	olivia := newBrowser(t, srv)
	olivia.login(tokOlivia)
	mustNotContain(t, olivia.get("/console/withdrawals/"+other), `id="approve"`, `id="decline"`)
	tok = olivia.csrf("/console/approvals")
	olivia.post("/console/withdrawals/"+other+"/approve", url.Values{"csrf": {tok}})
	mustContain(t, olivia.get("/console/withdrawals/"+other), "You are not allowed to do this", "approver role", "forbidden")
	if n := s.decisions(t, other); n != 0 {
		t.Fatalf("a forbidden approval appended %d decisions", n)
	}
	// Its requester may cancel it (the application decides, as on the API).
	tok = alice.csrf("/console/withdrawals/" + other)
	alice.post("/console/withdrawals/"+other+"/cancel", url.Values{"csrf": {tok}})
	mustContain(t, alice.get("/console/withdrawals/"+other), "Cancelled.", "rejected (cancelled)")
}

// Logging out ends the session on the server: the old cookie opens
// nothing afterwards.
func TestLogoutInvalidatesTheSession(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	b := newBrowser(t, srv)
	b.login(tokBob)
	old := b.cookie(console.SessionCookie).Value
	live := b.events()
	if name, _ := live.next(t); name != "ready" {
		t.Fatalf("first event %q", name)
	}
	tok := b.csrf("/console/approvals")
	if p := b.post("/console/logout", url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	// The open live stream ends with the session: the next state change
	// is not sent, the stream says it ended.
	s.request(t, "dev", "5000", "alice")
	if name, data := live.next(t); name != "ended" {
		t.Fatalf("after logout the stream sent %s %v, want ended", name, data)
	}
	if b.cookie(console.SessionCookie) != nil {
		t.Fatal("the cookie survived logout")
	}
	replay := newBrowser(t, srv)
	u, _ := url.Parse(srv.URL + console.Path)
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: console.SessionCookie, Value: old, Path: console.Path}})
	if p := replay.get("/console/approvals"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/login") {
		t.Fatalf("old session after logout: %d %s", p.status, p.header.Get("Location"))
	}
	if p := replay.post("/console/logout", url.Values{"csrf": {tok}}); p.status != http.StatusUnauthorized {
		t.Fatalf("POST with the old session: %d, want 401", p.status)
	}
}

// A session ends after SessionIdle without use, and after SessionMax
// whatever its use.
func TestSessionsExpire(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{SessionIdle: 10 * time.Minute, SessionMax: time.Hour})
	b := newBrowser(t, srv)
	b.login(tokBob)
	s.clock.advance(9 * time.Minute)
	if p := b.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("within the idle time: %d", p.status)
	}
	s.clock.advance(11 * time.Minute)
	p := b.get("/console/approvals")
	if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "expired=1") {
		t.Fatalf("idle session: %d %q, want 303 to login?expired=1", p.status, p.header.Get("Location"))
	}
	mustContain(t, b.get(p.header.Get("Location")), "Your session has expired")

	b.login(tokBob)
	for range 8 { // busy, never idle, but past the absolute limit
		s.clock.advance(8 * time.Minute)
		b.get("/console/approvals")
	}
	if p := b.get("/console/approvals"); p.status != http.StatusSeeOther {
		t.Fatalf("session past SessionMax: %d", p.status)
	}
}

// A principal scoped to accounts sees only their withdrawals: the queue,
// a withdrawal page (403 as the API), and the live stream.
func TestScopedPrincipalSeesOnlyItsAccounts(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	ria := newBrowser(t, srv)
	ria.login(tokRia)
	live := ria.events()
	if name, _ := live.next(t); name != "ready" {
		t.Fatalf("first event %q, want ready", name)
	}
	hidden := s.request(t, "other", "5000", "alice")
	shown := s.request(t, "acme", "5000", "alice")

	// Notifications are published in log order: when acme's arrives,
	// other's has been through the filter already.
	name, data := live.next(t)
	if name != "withdrawal" || data["id"] != shown || data["account"] != "acme" {
		t.Fatalf("first withdrawal event %s %v, want %s on acme (not %s on other)", name, data, shown, hidden)
	}
	q := ria.get("/console/approvals")
	mustContain(t, q, shown)
	mustNotContain(t, q, hidden, "other")
	p := ria.get("/console/withdrawals/" + hidden)
	if p.status != http.StatusForbidden {
		t.Fatalf("another account's withdrawal: %d, want 403", p.status)
	}
	mustContain(t, p, "forbidden")
	mustNotContain(t, p, testAddr)
	if p := ria.get("/console/accounts/other"); p.status != http.StatusForbidden {
		t.Fatalf("another account: %d", p.status)
	}
	// An unscoped approver sees both.
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	mustContain(t, bob.get("/console/approvals"), shown, hidden)
}

// Webhooks are an operator's: an approver gets 403 and no link to them.
func TestApproverCannotSeeOperatorPages(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	bob := newBrowser(t, srv)
	bob.login(tokBob)
	mustNotContain(t, bob.get("/console/approvals"), `href="/console/webhooks"`)
	for _, path := range []string{"/console/webhooks", "/console/webhooks/anything"} {
		p := bob.get(path)
		if p.status != http.StatusForbidden {
			t.Fatalf("approver GET %s: %d, want 403", path, p.status)
		}
		mustContain(t, p, "forbidden")
	}
	olivia := newBrowser(t, srv)
	olivia.login(tokOlivia)
	mustContain(t, olivia.get("/console/approvals"), `href="/console/webhooks"`)
	if p := olivia.get("/console/webhooks"); p.status != http.StatusOK {
		t.Fatalf("operator: %d\n%s", p.status, p.body)
	}
}

// Neither a token nor a session id ever reaches the log, whatever
// happens: logins right and wrong, pages, refusals, logout.
func TestNoTokenOrSessionInLogs(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	id := s.request(t, "dev", "5000", "alice")
	b := newBrowser(t, srv)
	tok := b.csrf("/console/login")
	b.post("/console/login", url.Values{"csrf": {tok}, "token": {"wrong-token-guess-123"}})
	b.login(tokAlice)
	session := b.cookie(console.SessionCookie).Value
	tok = b.csrf("/console/approvals")
	b.get("/console/withdrawals/" + id)
	b.post("/console/withdrawals/"+id+"/approve", url.Values{"csrf": {tok}})
	b.post("/console/logout", url.Values{"csrf": {tok}})
	logs := s.logs.String()
	if !strings.Contains(logs, "console request") || !strings.Contains(logs, "principal=alice") {
		t.Fatalf("the requests were not logged at all:\n%s", logs)
	}
	for _, secret := range []string{tokAlice, "wrong-token-guess-123", session, tok} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log holds a secret %q:\n%s", secret, logs)
		}
	}
}

// Wrong tokens draw on the client address's budget, as on the API: past
// it, the login answers 429 with Retry-After.
func TestLoginIsRateLimited(t *testing.T) {
	s := newStack(t, api.NewRateLimiter(1, nil)) // burst 2
	srv := s.server(t, console.Config{})
	b := newBrowser(t, srv)
	var last page
	for range 4 {
		tok := b.csrf("/console/login")
		last = b.post("/console/login", url.Values{"csrf": {tok}, "token": {"guess-guess-guess"}})
		if last.status == http.StatusTooManyRequests {
			break
		}
	}
	if last.status != http.StatusTooManyRequests || last.header.Get("Retry-After") == "" {
		t.Fatalf("repeated wrong tokens: %d (Retry-After %q), want 429", last.status, last.header.Get("Retry-After"))
	}
	mustContain(t, last, "rate_limited")
}

// Live streams never go idle: the server's shutdown ends them (Close,
// registered with RegisterOnShutdown) instead of waiting for its deadline.
func TestShutdownEndsLiveStreams(t *testing.T) {
	s := newStack(t, nil)
	c, err := console.New(console.Config{App: s.app, Feed: s.feed})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(c)
	srv.Config.RegisterOnShutdown(c.Close)
	srv.Start()
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)
	b.login(tokBob)
	live := b.events()
	if name, _ := live.next(t); name != "ready" {
		t.Fatalf("first event %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a live stream open: %v after %s", err, time.Since(start))
	}
	if name, _ := live.next(t); name != "closing" {
		t.Fatalf("the stream ended with %q, want closing", name)
	}
}

type fixedQueues struct {
	ready    []aggregate.Withdrawal
	inFlight []projections.InFlightItem
}

func (fixedQueues) PendingApprovals() []aggregate.Withdrawal        { return nil }
func (q fixedQueues) Ready(time.Time) []aggregate.Withdrawal        { return q.ready }
func (q fixedQueues) InFlight(time.Time) []projections.InFlightItem { return q.inFlight }

// The in-flight page shows who holds the lease, for how long it has been
// in flight, and the ambiguous flag with its cause; the ready queue below.
func TestInFlightPageShowsLeaseAgeAndAmbiguity(t *testing.T) {
	s := newStack(t, nil)
	id := s.request(t, "dev", "5000", "alice")
	w, err := s.intake.Withdrawal(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sending, ready := w, w
	sending.State = aggregate.StateBroadcasting
	ready.State, ready.ApprovedAt = aggregate.StateApproved, now.Add(-time.Minute)
	q := fixedQueues{ready: []aggregate.Withdrawal{ready}, inFlight: []projections.InFlightItem{{
		Withdrawal: sending, ID: id, State: sending.State, Sends: 2, Since: now.Add(-95 * time.Second), Age: 95 * time.Second,
		ClaimedBy: "worker-7", LeaseUntil: now.Add(30 * time.Second), Unacknowledged: true, Ambiguous: true,
	}}}
	c, err := console.New(console.Config{App: api.NewApp(api.AppConfig{Intake: s.intake, Principals: s.principals, Queues: q})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)
	b.login(tokBob)
	p := b.get("/console/in-flight")
	if p.status != http.StatusOK {
		t.Fatalf("in-flight: %d\n%s", p.status, p.body)
	}
	mustContain(t, p, id, "broadcasting", "worker-7", "1m 35s ago", "ambiguous", "send unacknowledged", `class="warn"`, "Ready")
}

// Every page renders for an operator (a template error would be a 500),
// with amounts as exact decimal strings and times in UTC.
func TestEveryPageRenders(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	id := s.request(t, "dev", "1234.567891", "alice")
	b := newBrowser(t, srv)
	b.login(tokOlivia)
	for path, want := range map[string][]string{
		"/console/approvals":          {"1234.567891", "four-eyes"},
		"/console/withdrawals":        {"No withdrawals match"}, // no history index in this stack
		"/console/withdrawals/" + id:  {"1234.567891 USDT-TRC20", "1234567891 units", "withdrawal.requested", " UTC", "by <b>alice</b>", "rule four-eyes"},
		"/console/in-flight":          {"Nothing is in flight"},
		"/console/accounts":           {`name="id"`},
		"/console/accounts/dev":       {"Available", "998765.432109", "reserved", "credited"},
		"/console/policy":             {"In force", "four-eyes", "1000"},
		"/console/wallet":             {"No hot wallet is watched"},
		"/console/webhooks":           {"No webhooks are registered"},
		"/console/webhooks/no-such":   {"not_found"},
		"/console/withdrawals/nope-1": {"not_found"},
	} {
		p := b.get(path)
		if p.status >= 500 {
			t.Fatalf("GET %s: %d\n%s", path, p.status, p.body)
		}
		mustContain(t, p, want...)
	}
}

// After login the browser goes where it wanted to go, but only inside the
// console: a next= pointing elsewhere is ignored (no open redirect).
func TestLoginRedirectStaysInTheConsole(t *testing.T) {
	s := newStack(t, nil)
	srv := s.server(t, console.Config{})
	for next, want := range map[string]string{
		"/console/policy":         "/console/policy",
		"//evil.example/console/": "/console/approvals",
		"https://evil.example/x":  "/console/approvals",
		"/console/\\evil.example": "/console/approvals",
		"/v1/withdrawals":         "/console/approvals",
	} {
		b := newBrowser(t, srv)
		tok := b.csrf("/console/login")
		p := b.post("/console/login", url.Values{"csrf": {tok}, "token": {tokBob}, "next": {next}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Fatalf("next=%q: %d to %q, want %q", next, p.status, p.header.Get("Location"), want)
		}
	}
	// A page asked for while logged out comes back after login.
	b := newBrowser(t, srv)
	p := b.get("/console/policy")
	if loc := p.header.Get("Location"); loc != "/console/login?next=%2Fconsole%2Fpolicy" {
		t.Fatalf("logged out: to %q", loc)
	}
	mustContain(t, b.get(p.header.Get("Location")), `name="next" value="/console/policy"`)
}
