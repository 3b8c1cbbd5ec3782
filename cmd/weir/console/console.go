package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the console.
type Config struct {
	// App is the application layer the API runs on (required).
	App *api.App
	// Feed carries the notification stream to live pages (Follow makes
	// it read WEIR_NOTIFY while a page is open); nil: no live updates.
	Feed   *Feed
	Logger *slog.Logger // nil: slog.Default()
	// Now is the clock of sessions and relative ages; nil: time.Now.
	Now func() time.Time
	// SessionIdle ends a session unused this long (DefaultSessionIdle when
	// zero); SessionMax ends any session this long after login
	// (DefaultSessionMax when zero).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// TxLink is the link-out of a txid: a URL with one %s for the txid
	// (DefaultTxLink when empty; "-" for none, e.g. on the simulated node).
	TxLink string
	// MaxStreams bounds the live pages open at once (DefaultMaxStreams
	// when zero).
	MaxStreams int
}

// DefaultTxLink shows a transaction on Tronscan (TRON mainnet).
const DefaultTxLink = "https://tronscan.org/#/transaction/%s"

// DefaultMaxStreams bounds /console/events streams open at once.
const DefaultMaxStreams = 256

// Console is the web console's http.Handler, to be mounted at Path.
type Console struct {
	cfg      Config
	app      *api.App
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	streams  slots
	// closed ends every live stream (Close).
	closed    chan struct{}
	closeOnce sync.Once
}

// Close ends the live streams (/console/events): they never go idle, so
// an http.Server's Shutdown would wait for them to its deadline. Register
// it with http.Server.RegisterOnShutdown. Pages keep working.
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.closed) })
}

// New returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.App == nil {
		return nil, errors.New("console: Config.App is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = DefaultSessionMax
	}
	if cfg.TxLink == "" {
		cfg.TxLink = DefaultTxLink
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	c := &Console{
		cfg: cfg, app: cfg.App, log: cfg.Logger,
		sessions: newSessions(cfg.SessionIdle, cfg.SessionMax, cfg.Now),
		mux:      http.NewServeMux(), streams: make(slots, cfg.MaxStreams), closed: make(chan struct{}),
	}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticHandler(http.FileServerFS(static))))
	c.mux.HandleFunc("GET /console/login", c.loginPage)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("GET /console/{$}", c.authed(func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, "/console/approvals", http.StatusSeeOther)
	}))
	c.mux.HandleFunc("POST /console/logout", c.authedPost(c.logout))
	c.mux.HandleFunc("GET /console/approvals", c.authed(c.approvalsPage))
	c.mux.HandleFunc("GET /console/withdrawals", c.authed(c.withdrawalsPage))
	c.mux.HandleFunc("GET /console/withdrawals/{id}", c.authed(c.withdrawalPage))
	c.mux.HandleFunc("POST /console/withdrawals/{id}/approve", c.authedPost(c.approve))
	c.mux.HandleFunc("POST /console/withdrawals/{id}/decline", c.authedPost(c.decline))
	c.mux.HandleFunc("POST /console/withdrawals/{id}/cancel", c.authedPost(c.cancel))
	c.mux.HandleFunc("GET /console/in-flight", c.authed(c.inFlightPage))
	c.mux.HandleFunc("GET /console/accounts", c.authed(c.accountsPage))
	c.mux.HandleFunc("GET /console/accounts/{id}", c.authed(c.accountPage))
	c.mux.HandleFunc("GET /console/policy", c.authed(c.policyPage))
	c.mux.HandleFunc("GET /console/wallet", c.authed(c.walletPage))
	c.mux.HandleFunc("GET /console/webhooks", c.authed(c.webhooksPage))
	c.mux.HandleFunc("GET /console/webhooks/{id}", c.authed(c.deliveriesPage))
	c.mux.HandleFunc("GET /console/events", c.authed(c.events))
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "There is no such page.", "")
	})
}

// staticHandler serves the embedded assets (cacheable for a while: they
// change only with the binary).
func staticHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows this origin's own script, style and images
// only: no inline script or style, no framing, forms post only here.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP sets the security headers, serves the route and logs the
// request (method, path, status, principal; never a token, cookie or form
// value).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin: link-outs (a txid on Tronscan) carry no referrer,
	// while the console's own form posts keep their Origin.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	info := &reqInfo{}
	sw := &api.StatusWriter{ResponseWriter: w}
	c.mux.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
	level := slog.LevelInfo
	if r.Method == http.MethodGet {
		level = slog.LevelDebug
	}
	if sw.Status() >= 500 {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.Status()),
		slog.String("principal", info.principal), slog.Duration("duration", time.Since(start)),
	}
	if info.err != nil {
		attrs = append(attrs, slog.String("err", info.err.Error()))
	}
	c.log.LogAttrs(r.Context(), level, "console request", attrs...)
}

type reqInfo struct {
	principal string
	err       error // an internal error, logged, never shown
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// slots bounds something held at once.
type slots chan struct{}

func (s slots) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) Release() { <-s }

type pageHandler func(w http.ResponseWriter, r *http.Request, ss *session)

// authed resolves the session (else: to the login page, saying why) and
// draws the request on the principal's budget.
func (c *Console) authed(fn pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, ok := c.session(w, r)
		if !ok {
			return
		}
		fn(w, r, ss)
	}
}

// authedPost is authed plus the CSRF check: the form's token must be the
// session's, and a cross-site Origin is refused outright. A refusal is 403
// and nothing is done.
func (c *Console) authedPost(fn pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			c.fail(w, r, nil, http.StatusForbidden, "This form was sent from another site; nothing was done.", "csrf")
			return
		}
		ss, ok := c.session(w, r)
		if !ok {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, ss, http.StatusBadRequest, "The form could not be read.", "")
			return
		}
		if !sameToken(r.PostForm.Get(CSRFField), ss.csrf) {
			c.fail(w, r, ss, http.StatusForbidden, "The form's security token is missing or stale; nothing was done. Reload the page and try again.", "csrf")
			return
		}
		fn(w, r, ss)
	}
}

// session finds the request's session or sends the browser to log in.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	var id string
	if ck, err := r.Cookie(SessionCookie); err == nil {
		id = ck.Value
	}
	ss, expired := c.sessions.get(id)
	if ss == nil {
		if r.Method == http.MethodGet && r.URL.Path != "/console/events" {
			q := url.Values{}
			if expired {
				q.Set("expired", "1")
			}
			if r.URL.Path != Path {
				q.Set("next", r.URL.Path)
			}
			target := "/console/login"
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
		} else {
			msg := "You are not logged in."
			if expired {
				msg = "Your session has expired; log in again."
			}
			c.fail(w, r, nil, http.StatusUnauthorized, msg, "unauthenticated")
		}
		return nil, false
	}
	infoOf(r).principal = ss.p.Name
	if err := c.app.Allow(ss.p); err != nil {
		c.refuse(w, r, ss, err)
		return nil, false
	}
	return ss, true
}

// sameOrigin refuses what a browser says came from another site: Fetch
// Metadata (Sec-Fetch-Site cross-site or same-site) or an Origin naming
// another host. ("null" and absent say nothing; the CSRF token decides.)
// SameSite=Strict already keeps the session cookie off such a request;
// this refuses the login form too.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// localPath keeps a post-login or post-action destination inside the
// console (no open redirect).
func localPath(p, fallback string) string {
	if !strings.HasPrefix(p, Path) || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return fallback
	}
	if u, err := url.Parse(p); err != nil || u.Host != "" || u.Scheme != "" {
		return fallback
	}
	return p
}

// refuse shows err as the API would refuse it: its status, code and
// message, in words a person reads. Internal errors are logged, not shown.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	status, d, internal := api.Classify(err)
	if internal {
		infoOf(r).err = err
	}
	if ra := api.RetryAfter(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	c.fail(w, r, ss, status, readable(d), d.Code)
}

// fail renders the error page with status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, ss *session, status int, msg, code string) {
	c.render(w, r, ss, status, "error", "Not possible", map[string]any{"Status": status, "Message": msg, "Code": code})
}

// pageData is what every page template gets.
type pageData struct {
	Title     string
	Nav       string
	Principal *api.Principal
	CSRF      string
	Flashes   []flash
	Now       time.Time
	// Live tells the script which state changes refresh this page:
	// "all", a withdrawal id, or "" (none).
	Live string
	Data any
}

// render writes page name with status; the body is built first so a
// template error is a clean 500, never half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, ss *session, status int, name, title string, data any) {
	c.renderLive(w, r, ss, status, name, title, "", data)
}

func (c *Console) renderLive(w http.ResponseWriter, r *http.Request, ss *session, status int, name, title, live string, data any) {
	t, ok := c.pages[name]
	if !ok {
		infoOf(r).err = fmt.Errorf("console: no template %q", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	pd := pageData{Title: title, Nav: name, Now: c.cfg.Now().UTC(), Live: live, Data: data}
	if ss != nil {
		p := ss.p
		pd.Principal, pd.CSRF, pd.Flashes = &p, ss.csrf, c.sessions.takeFlashes(ss)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", pd); err != nil {
		infoOf(r).err = fmt.Errorf("console: render %s: %w", name, err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) parseTemplates() error {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", base, err)
		}
		c.pages[base] = t
	}
	return nil
}
