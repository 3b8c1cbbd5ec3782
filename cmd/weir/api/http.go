package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/weir-payouts/weir/sagas"
)

// Headers of both transports.
const (
	// HeaderAuthorization carries "Bearer <token>" (HTTP header and NATS
	// message header alike).
	HeaderAuthorization = "Authorization"
	// HeaderReplayed is "true" on the reply to an identical retry of a
	// creating command (withdrawal request, credit): nothing new happened
	// and the reply shows the current state.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderRequestID names the request in the server's log; a 500 reply
	// quotes it.
	HeaderRequestID = "X-Request-Id"
)

// DefaultCommandTimeout bounds one command or query end to end.
const DefaultCommandTimeout = 30 * time.Second

// HTTPConfig configures the HTTP API.
type HTTPConfig struct {
	Intake     *sagas.Intake // required
	Principals *Principals   // required
	// Queues serves /v1/queues/*; nil serves empty lists.
	Queues Queues
	// History serves GET /v1/withdrawals; nil lists nothing.
	History History
	// Wallet serves GET /v1/wallet; nil: 404 (no hot wallet is watched).
	Wallet Wallet
	// Health says whether the store and workers are up (GET /healthz: 200,
	// or 503 with the error); nil means always up.
	Health func(context.Context) error
	// Degraded lists what works but needs an operator's eye (a lagging
	// read model, ambiguous withdrawals, a failing node), shown in the
	// /healthz body; nil: nothing.
	Degraded func(context.Context) []string
	// Metrics receives request counts and latencies and is served on
	// /metrics; nil creates a private one. Share one Metrics between
	// NewHTTPHandler and StartService and register the wiring's own
	// collectors on Metrics.Registry.
	Metrics *Metrics
	Logger  *slog.Logger // nil: slog.Default()
	// Now is the clock the queues are read at; nil: time.Now.
	Now func() time.Time
	// CommandTimeout bounds each call (DefaultCommandTimeout when zero). A
	// command runs to its end even if the client goes away meanwhile, so
	// a disconnect never leaves a half-decided command behind.
	CommandTimeout time.Duration
	// RateLimit is each principal's request budget (share it with the
	// NATS service); nil: unlimited.
	RateLimit *RateLimiter
	// Webhooks serves /v1/webhooks; nil: no webhook routes.
	Webhooks Webhooks
	// MaxInFlight bounds the API requests handled at once
	// (DefaultMaxInFlight when zero); beyond it a request is answered 503
	// unavailable with Retry-After at once, never queued.
	MaxInFlight int
}

type httpAPI struct {
	cfg     HTTPConfig
	ops     *ops
	log     *slog.Logger
	metrics *Metrics
	mux     *http.ServeMux
	allowed map[string][]string // path pattern → methods, for 405
	slots   chan struct{}       // MaxInFlight
}

// NewHTTPHandler returns the HTTP API of CONTRACT.md. Every route but
// /healthz and /metrics needs "Authorization: Bearer <token>"; the
// handler logs each request (method, path, route, status, principal,
// duration) and counts it in the metrics. Errors are answered with
// StatusTable's status and an ErrorBody; replies are application/json.
func NewHTTPHandler(cfg HTTPConfig) http.Handler {
	if cfg.Intake == nil || cfg.Principals == nil {
		panic("api: HTTPConfig needs Intake and Principals")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	a := &httpAPI{
		cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics, mux: http.NewServeMux(),
		ops:     &ops{intake: cfg.Intake, queues: cfg.Queues, history: cfg.History, wallet: cfg.Wallet, now: cfg.Now},
		allowed: map[string][]string{},
		slots:   make(chan struct{}, cfg.MaxInFlight),
	}
	o := a.ops

	a.handle("POST", "/v1/withdrawals", cmdRequest, true, func(ctx context.Context, p Principal, _ *http.Request, body []byte) (result, error) {
		return o.request(ctx, p, body)
	})
	a.handle("GET", "/v1/withdrawals", cmdList, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		q, err := listQuery(r)
		if err != nil {
			return result{}, err
		}
		return o.list(ctx, p, q)
	})
	a.handle("GET", "/v1/accounts/{id}/statement", cmdStatement, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		page, err := pageQuery(r)
		if err != nil {
			return result{}, err
		}
		return o.statement(ctx, p, StatementQuery{Account: r.PathValue("id"), Limit: page.Limit, Cursor: page.Cursor})
	})
	a.handle("GET", "/v1/withdrawals/{id}", cmdGet, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.withdrawal(ctx, p, r.PathValue("id"))
	})
	a.handle("GET", "/v1/withdrawals/{id}/events", cmdEvents, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.events(ctx, p, r.PathValue("id"))
	})
	a.handle("POST", "/v1/withdrawals/{id}/approve", cmdApprove, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.approve(ctx, p, r.PathValue("id"))
	})
	a.handle("POST", "/v1/withdrawals/{id}/cancel", cmdCancel, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.cancel(ctx, p, r.PathValue("id"))
	})
	a.handle("POST", "/v1/withdrawals/{id}/decline", cmdDecline, true, func(ctx context.Context, p Principal, r *http.Request, body []byte) (result, error) {
		return o.decline(ctx, p, r.PathValue("id"), body)
	})
	a.handle("POST", "/v1/accounts/{id}/credits", cmdCredit, true, func(ctx context.Context, p Principal, r *http.Request, body []byte) (result, error) {
		return o.credit(ctx, p, r.PathValue("id"), body)
	})
	a.handle("POST", "/v1/accounts/{id}/credits/{credit_id}/approve", cmdCreditApprove, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.approveCredit(ctx, p, r.PathValue("id"), r.PathValue("credit_id"))
	})
	a.handle("GET", "/v1/accounts/{id}", cmdAccount, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.account(ctx, p, r.PathValue("id"))
	})
	for _, q := range []string{"approvals", "ready", "in-flight"} {
		a.handle("GET", "/v1/queues/"+q, cmdQueue, false, func(_ context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
			page, err := pageQuery(r)
			if err != nil {
				return result{}, err
			}
			return o.queue(p, q, page)
		})
	}
	a.handle("GET", "/v1/wallet", cmdWallet, false, func(context.Context, Principal, *http.Request, []byte) (result, error) {
		return o.walletStatus()
	})
	a.handle("GET", "/v1/policy", cmdPolicyGet, false, func(ctx context.Context, p Principal, _ *http.Request, _ []byte) (result, error) {
		return o.policy(ctx, p)
	})
	a.handle("PUT", "/v1/policy", cmdPolicySet, true, func(ctx context.Context, p Principal, _ *http.Request, body []byte) (result, error) {
		return o.setPolicy(ctx, p, body)
	})
	a.handle("POST", "/v1/policy/proposals/{version}/approve", cmdPolicyApprove, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		return o.approvePolicy(ctx, p, r.PathValue("version"))
	})
	a.webhookRoutes(cfg.Webhooks)
	a.mux.HandleFunc("GET /healthz", a.healthz)
	a.allowed["/healthz"] = []string{"GET"}
	a.mux.Handle("GET /metrics", a.metrics.Handler())
	a.allowed["/metrics"] = []string{"GET"}

	// Known paths with another method: 405 with Allow; unknown paths: 404.
	for path, methods := range a.allowed {
		allow := strings.Join(methods, ", ")
		a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			a.fail(w, r, apiError(CodeMethodNotAllowed, "", r.Method+" is not allowed here (allowed: "+allow+")"))
		})
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, apiError(CodeNotFound, "", "no such endpoint"))
	})
	return a
}

// reqInfo travels in the request context so the outer handler can log and
// count what the inner one learnt.
type reqInfo struct {
	id        string
	principal string
	command   string
	err       error // an internal error to log
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

func (a *httpAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: nuid.Next()}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	sw := &StatusWriter{ResponseWriter: w}
	sw.Header().Set(HeaderRequestID, info.id)
	a.metrics.inFlight.WithLabelValues("http").Inc()
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				info.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
				if !sw.Wrote() {
					writeJSON(sw, http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: CodeInternal, Message: "internal error (request " + info.id + ")"}})
				}
			}
		}()
		a.mux.ServeHTTP(sw, r)
	}()
	a.metrics.inFlight.WithLabelValues("http").Dec()
	d := time.Since(start)
	status := sw.Status()
	route := r.Pattern
	if route == "" || route == "/" {
		route = "unmatched"
	}
	a.metrics.observe("http", route, info.command, status, d)
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
		slog.Int("status", status), slog.String("principal", info.principal),
		slog.Duration("duration", d), slog.String("request_id", info.id),
	}
	level := logLevel(status, info.err)
	if level == slog.LevelInfo && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		level = slog.LevelDebug // reads are many and change nothing
	}
	a.log.LogAttrs(r.Context(), level, "http request", append(attrs, errAttr(info.err)...)...)
}

type handlerFunc func(ctx context.Context, p Principal, r *http.Request, body []byte) (result, error)

// handle registers one authenticated route. withBody routes read a JSON
// body: 415 unless application/json, 413 above MaxBodyBytes.
func (a *httpAPI) handle(method, path, command string, withBody bool, fn handlerFunc) {
	if !slices.Contains(a.allowed[path], method) {
		a.allowed[path] = append(a.allowed[path], method)
	}
	a.mux.HandleFunc(method+" "+path, func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r)
		info.command = command
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
		default:
			a.fail(w, r, &retryAfter{err: apiError(CodeUnavailable, "", "too many requests in progress; retry"), after: time.Second})
			return
		}
		p, ok := a.cfg.Principals.Authenticate(r.Header.Get(HeaderAuthorization))
		if !ok {
			// Guessing tokens: each client address's failures draw on a
			// budget of their own, as a principal's requests do.
			if err := a.cfg.RateLimit.allow(failedAuthKey(r)); err != nil {
				a.fail(w, r, err)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
			a.fail(w, r, apiError(CodeUnauthenticated, "", "a valid Authorization: Bearer <token> header is required"))
			return
		}
		info.principal = p.Name
		if err := a.cfg.RateLimit.allow(p.Name); err != nil {
			a.fail(w, r, err)
			return
		}
		if err := authorize(p, command); err != nil {
			a.fail(w, r, err)
			return
		}
		var body []byte
		if withBody {
			if err := checkJSONMediaType(r.Header.Get("Content-Type")); err != nil {
				a.fail(w, r, err)
				return
			}
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				a.fail(w, r, apiError(CodeTooLarge, "", "the body is larger than 64 KiB"))
				return
			case err != nil:
				a.fail(w, r, apiError(CodeMalformedJSON, "", "the body could not be read"))
				return
			}
		}
		// Detached from the client: a command, once started, is decided
		// and appended (or not) whether or not the caller still listens.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.cfg.CommandTimeout)
		defer cancel()
		res, err := fn(ctx, p, r, body)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		status := http.StatusOK
		if res.created {
			status = http.StatusCreated
		}
		if res.accepted {
			status = http.StatusAccepted
		}
		if res.replayed {
			w.Header().Set(HeaderReplayed, "true")
		}
		writeJSON(w, status, res.body)
	})
}

func (a *httpAPI) healthz(w http.ResponseWriter, r *http.Request) {
	infoOf(r).command = cmdHealth
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	body := HealthBody{Status: HealthOK, Degraded: []string{}}
	if a.cfg.Degraded != nil {
		if d := a.cfg.Degraded(ctx); len(d) > 0 {
			body.Status, body.Degraded = HealthDegraded, d
		}
	}
	if a.cfg.Health != nil {
		err := a.cfg.Health(ctx)
		if errors.Is(err, sagas.ErrIntegrityViolation) {
			// Serving correctly (the forged events are quarantined), but
			// the log holds events nobody with the key wrote: an operator
			// must look now. Not a 503: the log is append-only, so the
			// forgery stays forever, and a load balancer dropping a weir
			// that serves correctly would turn a contained forgery into an
			// outage. Alert on weir_integrity_violations_total.
			body.Status = HealthDegraded
			body.Degraded = append(body.Degraded, err.Error())
			body.Error = &ErrorDetail{Code: sagas.CodeIntegrityViolation, Message: err.Error()}
			err = nil
		}
		if err != nil {
			body.Status = HealthUnavailable
			body.Error = &ErrorDetail{Code: CodeUnavailable, Message: err.Error()}
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// GET /healthz statuses: ok 200; degraded 200 when weir works and
// Degraded lists what needs an eye (with an integrity_violation error while
// the log holds quarantined events); unavailable 503 (error says what is
// down).
const (
	HealthOK          = "ok"
	HealthDegraded    = "degraded"
	HealthUnavailable = "unavailable"
)

// HealthBody is GET /healthz.
type HealthBody struct {
	Status   string       `json:"status"`
	Degraded []string     `json:"degraded"`
	Error    *ErrorDetail `json:"error,omitempty"`
}

// fail answers err with its status and ErrorBody; internal errors are
// recorded for the request log and never shown.
func (a *httpAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, body, internal := classify(err)
	if s := retryAfterSeconds(err); s != "" {
		w.Header().Set("Retry-After", s)
	}
	if internal {
		info := infoOf(r)
		info.err = err
		if body.Error.Code == CodeInternal {
			body.Error.Message = "internal error (request " + info.id + ")"
		}
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{ErrorDetail{Code: CodeInternal, Message: "internal error"}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// StatusWriter remembers the status a handler wrote, for the log and the
// metrics: the API's and the web console's (cmd/weir/console).
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status written and passes it on.
func (s *StatusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 when no status was written before (as net/http sends).
func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Wrote reports whether anything (a status or a body) was written.
func (s *StatusWriter) Wrote() bool { return s.status != 0 }

// Status is the status sent: the one written, else 200 (net/http's when a
// handler writes nothing).
func (s *StatusWriter) Status() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Unwrap lets http.ResponseController reach the real writer (flush,
// deadlines).
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logLevel: 500 is an error, 503 (store unavailable, contention) a warning,
// anything else information.
func logLevel(status int, err error) slog.Level {
	switch {
	case err == nil:
		return slog.LevelInfo
	case status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable:
		return slog.LevelError
	}
	return slog.LevelWarn
}

func errAttr(err error) []slog.Attr {
	if err == nil {
		return nil
	}
	return []slog.Attr{slog.String("err", err.Error())}
}
