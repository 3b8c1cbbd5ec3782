package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/sagas"
)

// ServiceName is the micro service's name (`nats micro ls` shows it).
const ServiceName = "weir"

// Subjects of the NATS commands (CONTRACT.md; events and account.get are
// additions the CLI uses).
const (
	SubjectWithdrawalRequest    = "weir.cmd.withdrawal.request"     // body as POST /v1/withdrawals
	SubjectWithdrawalApprove    = "weir.cmd.withdrawal.approve"     // {"id"}
	SubjectWithdrawalCancel     = "weir.cmd.withdrawal.cancel"      // {"id"}
	SubjectWithdrawalDecline    = "weir.cmd.withdrawal.decline"     // {"id","reason"}
	SubjectWithdrawalGet        = "weir.cmd.withdrawal.get"         // {"id"}
	SubjectWithdrawalList       = "weir.cmd.withdrawal.list"        // {"state","account","limit","cursor"} as GET /v1/withdrawals
	SubjectAccountStatement     = "weir.cmd.account.statement"      // {"account","limit","cursor"} as GET /v1/accounts/{id}/statement
	SubjectWithdrawalEvents     = "weir.cmd.withdrawal.events"      // {"id"}
	SubjectAccountCredit        = "weir.cmd.account.credit"         // {"account","credit_id","amount"}
	SubjectAccountCreditApprove = "weir.cmd.account.credit.approve" // {"account","credit_id"}
	SubjectAccountGet           = "weir.cmd.account.get"            // {"id"}
	SubjectPolicyGet            = "weir.cmd.policy.get"             // {} (or an empty body)
	SubjectPolicySet            = "weir.cmd.policy.set"             // the policy JSON, as PUT /v1/policy (a proposal under a quorum)
	SubjectPolicyApprove        = "weir.cmd.policy.approve"         // {"version"}, as POST /v1/policy/proposals/{version}/approve
	SubjectQueueApprovals       = "weir.cmd.queue.approvals"        // {} → {"items":[…]} as GET /v1/queues/approvals
	SubjectQueueReady           = "weir.cmd.queue.ready"            // {} → as GET /v1/queues/ready
	SubjectQueueInFlight        = "weir.cmd.queue.in-flight"        // {} → as GET /v1/queues/in-flight
)

// DefaultMaxConcurrent bounds the NATS commands handled at once.
const DefaultMaxConcurrent = 64

// ServiceConfig configures the NATS micro service.
type ServiceConfig struct {
	Intake     *sagas.Intake // required
	Principals *Principals   // required
	// Queues serves weir.cmd.queue.*; nil serves empty lists.
	Queues Queues
	// History serves weir.cmd.withdrawal.list; nil lists nothing.
	History History
	// Now is the clock the queues are read at; nil: time.Now.
	Now func() time.Time
	// Version is the service version shown by `nats micro info` (semver);
	// "0.0.0" when empty.
	Version string
	// Metrics: share the HTTP handler's (nil creates an unserved one).
	Metrics *Metrics
	Logger  *slog.Logger // nil: slog.Default()
	// MaxConcurrent bounds the commands handled at once across endpoints
	// (DefaultMaxConcurrent when zero). When all slots are busy, new
	// messages wait in the subscription's pending buffer.
	MaxConcurrent int
	// CommandTimeout bounds each command (DefaultCommandTimeout when zero).
	CommandTimeout time.Duration
	// RateLimit is each principal's request budget (share it with the
	// HTTP API); nil: unlimited.
	RateLimit *RateLimiter
}

// StartService registers the micro service "weir" on nc with one endpoint
// per Subject* constant, in queue group "q" (several weir processes share
// the load), and flushes so that it answers as soon as it returns. The
// caller stops it with Stop, which waits for commands in progress.
//
// Subjects and roles: weir.cmd.withdrawal.request (requester),
// .approve (approver), .decline (approver), .cancel (its requester or an operator), .get,
// .events; weir.cmd.account.credit (operator), .get; weir.cmd.policy.get,
// .set (operator); weir.cmd.queue.approvals, .ready, .in-flight. Reads need
// any authenticated principal.
//
// # Wire format
//
// Request: a NATS request on the subject, header
// "Authorization: Bearer <token>", body a JSON document equal to the HTTP
// body (at most MaxBodyBytes).
//
// Success: the reply body is exactly the HTTP API's JSON for the same call
// (withdrawal, {"events":[…]}, account, policy), with no error headers. On
// weir.cmd.withdrawal.request and weir.cmd.account.credit the header
// "Idempotent-Replayed: true" marks an identical retry (HTTP 200 instead of
// 201).
//
// Refusal: a micro error, i.e. the reply carries the headers
//
//	Nats-Service-Error-Code: <HTTP status as decimal, e.g. "409">
//	Nats-Service-Error:      <error code, e.g. "idempotency_conflict">
//
// and its body is the HTTP API's error document
// {"error":{"code","message","field"}} (field omitted when none). The
// status is StatusTable[code]: 400 malformed_json, 401 unauthenticated,
// 403 forbidden/self_approval, 404 not_found, 409, 413 too_large and
// reply_too_large, 422, 429 rate_limited (with a Retry-After header),
// 500 internal, 503 unavailable. A client tests for the
// Nats-Service-Error-Code header; when present it decodes the body as
// ErrorBody (Client does this).
//
// Handlers run in their own goroutines (at most MaxConcurrent at once), so
// a slow command never holds up another on the same subject. Because they
// reply by publishing to the request's reply subject themselves, micro's
// per-endpoint stats count requests but not errors; the Prometheus metrics
// (weir_api_requests_total{transport="nats"}) count both.
func StartService(nc *nats.Conn, cfg ServiceConfig) (micro.Service, error) {
	if nc == nil || cfg.Intake == nil || cfg.Principals == nil {
		return nil, fmt.Errorf("api: StartService needs a connection, Intake and Principals")
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.0"
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
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	s := &natsService{
		nc: nc, cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		ops: &ops{intake: cfg.Intake, queues: cfg.Queues, history: cfg.History, now: cfg.Now},
		sem: make(chan struct{}, cfg.MaxConcurrent), idle: make(chan func()), done: make(chan struct{}),
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "weir withdrawal commands: request, approve, cancel, credit, policy",
	})
	if err != nil {
		return nil, fmt.Errorf("api: add micro service: %w", err)
	}
	s.Service = svc
	o := s.ops
	endpoints := []struct {
		subject, command string
		fn               natsFunc
	}{
		{SubjectWithdrawalRequest, cmdRequest, func(ctx context.Context, p Principal, body []byte) (result, error) {
			return o.request(ctx, p, body)
		}},
		{SubjectWithdrawalApprove, cmdApprove, withID(o.approve)},
		{SubjectWithdrawalCancel, cmdCancel, withID(o.cancel)},
		{SubjectWithdrawalDecline, cmdDecline, func(ctx context.Context, p Principal, body []byte) (result, error) {
			return o.decline(ctx, p, "", body)
		}},
		{SubjectWithdrawalGet, cmdGet, withID(o.withdrawal)},
		{SubjectWithdrawalList, cmdList, func(ctx context.Context, p Principal, body []byte) (result, error) {
			var q ListQuery
			if err := decodeOptional(body, &q); err != nil {
				return result{}, err
			}
			return o.list(ctx, p, q)
		}},
		{SubjectAccountStatement, cmdStatement, func(ctx context.Context, p Principal, body []byte) (result, error) {
			var q StatementQuery
			if err := decodeStrict(body, &q); err != nil {
				return result{}, err
			}
			return o.statement(ctx, p, q)
		}},
		{SubjectWithdrawalEvents, cmdEvents, withID(o.events)},
		{SubjectAccountCredit, cmdCredit, func(ctx context.Context, p Principal, body []byte) (result, error) {
			return o.credit(ctx, p, "", body)
		}},
		{SubjectAccountCreditApprove, cmdCreditApprove, func(ctx context.Context, p Principal, body []byte) (result, error) {
			var in creditApproveBody
			if err := decodeStrict(body, &in); err != nil {
				return result{}, err
			}
			return o.approveCredit(ctx, p, in.Account, in.CreditID)
		}},
		{SubjectAccountGet, cmdAccount, withID(o.account)},
		{SubjectPolicyGet, cmdPolicyGet, func(ctx context.Context, p Principal, body []byte) (result, error) {
			if err := decodeEmpty(body); err != nil {
				return result{}, err
			}
			return o.policy(ctx, p)
		}},
		{SubjectPolicySet, cmdPolicySet, func(ctx context.Context, p Principal, body []byte) (result, error) {
			return o.setPolicy(ctx, p, body)
		}},
		{SubjectPolicyApprove, cmdPolicyApprove, func(ctx context.Context, p Principal, body []byte) (result, error) {
			var in policyVersionRequest
			if err := decodeStrict(body, &in); err != nil {
				return result{}, err
			}
			return o.approvePolicy(ctx, p, strconv.Itoa(in.Version))
		}},
		{SubjectQueueApprovals, cmdQueue, queueEndpoint(o, "approvals")},
		{SubjectQueueReady, cmdQueue, queueEndpoint(o, "ready")},
		{SubjectQueueInFlight, cmdQueue, queueEndpoint(o, "in-flight")},
	}
	for _, e := range endpoints {
		name := strings.NewReplacer(".", "_", "-", "_").Replace(strings.TrimPrefix(e.subject, "weir.cmd."))
		if err := svc.AddEndpoint(name, s.endpoint(e.subject, e.command, e.fn),
			micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("api: endpoint %s: %w", e.subject, err)
		}
	}
	// Make sure the server knows the subscriptions before we say the
	// service is up: a request sent right after StartService returns must
	// find a responder.
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("api: flush service subscriptions: %w", err)
	}
	return s, nil
}

func queueEndpoint(o *ops, name string) natsFunc {
	return func(_ context.Context, p Principal, body []byte) (result, error) {
		var page Page
		if err := decodeOptional(body, &page); err != nil {
			return result{}, err
		}
		return o.queue(p, name, page)
	}
}

// decodeOptional decodes body strictly into v; an empty body leaves v as
// it is.
func decodeOptional(body []byte, v any) error {
	if len(trimJSONSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v)
}

// decodeEmpty accepts an empty body or {}.
func decodeEmpty(body []byte) error {
	if len(trimJSONSpace(body)) == 0 {
		return nil
	}
	var empty struct{}
	return decodeStrict(body, &empty)
}

type natsFunc func(ctx context.Context, p Principal, body []byte) (result, error)

func withID(fn func(context.Context, Principal, string) (result, error)) natsFunc {
	return func(ctx context.Context, p Principal, body []byte) (result, error) {
		id, err := decodeID(body)
		if err != nil {
			return result{}, err
		}
		return fn(ctx, p, id)
	}
}

// natsService is the micro service plus the bookkeeping of its handler
// goroutines; Stop waits for them.
type natsService struct {
	micro.Service
	nc        *nats.Conn
	cfg       ServiceConfig
	log       *slog.Logger
	metrics   *Metrics
	ops       *ops
	sem       chan struct{} // a slot per handler goroutine (MaxConcurrent)
	idle      chan func()   // commands for an idle handler
	done      chan struct{} // closed by Stop: idle handlers exit
	closeDone sync.Once

	mu       sync.Mutex
	stopping bool
	wg       sync.WaitGroup
}

// Stop stops the micro service and waits for the commands in progress.
func (s *natsService) Stop() error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	err := s.Service.Stop()
	// Like start-up, make sure the server has seen the unsubscribes before
	// Stop returns: a request sent afterwards finds no responder instead of
	// a handler that answers "stopping".
	if ferr := s.nc.FlushTimeout(10 * time.Second); ferr != nil && err == nil && !s.nc.IsClosed() {
		err = fmt.Errorf("api: flush service unsubscribes: %w", ferr)
	}
	s.wg.Wait()
	s.closeDone.Do(func() { close(s.done) })
	return err
}

func (s *natsService) endpoint(subject, command string, fn natsFunc) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		start := time.Now()
		reply, data, hdr := req.Reply(), req.Data(), nats.Header(req.Headers())
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			s.respond(subject, command, reply, start, "", result{}, apiError(CodeUnavailable, "", "the service is stopping"))
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		s.dispatch(func() {
			defer s.wg.Done()
			var principal string
			var res result
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
					}
				}()
				principal, res, err = s.run(command, hdr, data, fn)
			}()
			s.respond(subject, command, reply, start, principal, res, err)
		})
	})
}

// dispatch runs f on a handler goroutine: an idle one if any, else a new
// one while fewer than MaxConcurrent run, else it waits for one to be
// free (back-pressure on the subscription). Handlers stay for the next
// command rather than exit: a command's stack, grown once, is reused.
func (s *natsService) dispatch(f func()) {
	select {
	case s.idle <- f:
		return
	default:
	}
	select {
	case s.idle <- f:
	case s.sem <- struct{}{}:
		go s.handler(f)
	}
}

// handler runs f, then the commands dispatched to it, until the service
// stops.
func (s *natsService) handler(f func()) {
	defer func() { <-s.sem }()
	for {
		f()
		select {
		case f = <-s.idle:
		case <-s.done:
			return
		}
	}
}

func (s *natsService) run(command string, hdr nats.Header, data []byte, fn natsFunc) (string, result, error) {
	p, ok := s.cfg.Principals.Authenticate(headerValue(hdr, HeaderAuthorization))
	if !ok {
		return "", result{}, apiError(CodeUnauthenticated, "", "a valid Authorization: Bearer <token> header is required")
	}
	if err := s.cfg.RateLimit.allow(p.Name); err != nil {
		return p.Name, result{}, err
	}
	if err := authorize(p, command); err != nil {
		return p.Name, result{}, err
	}
	if len(data) > MaxBodyBytes {
		return p.Name, result{}, apiError(CodeTooLarge, "", "the body is larger than 64 KiB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommandTimeout)
	defer cancel()
	res, err := fn(ctx, p, data)
	return p.Name, res, err
}

// headerValue reads a header whatever the case of its name (NATS headers
// are case-sensitive; HTTP habits are not).
func headerValue(h nats.Header, key string) string {
	if v := h.Get(key); v != "" {
		return v
	}
	for k, vs := range h {
		if strings.EqualFold(k, key) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func (s *natsService) respond(subject, command, reply string, start time.Time, principal string, res result, err error) {
	var data []byte
	if err == nil {
		var merr error
		if data, merr = json.Marshal(res.body); merr != nil {
			err = fmt.Errorf("encode reply: %w", merr)
		} else if max := s.nc.MaxPayload(); int64(len(data)+replyHeaderRoom) > max {
			err = apiError(CodeReplyTooLarge, "", fmt.Sprintf(
				"the reply (%d bytes) would exceed the NATS max payload (%d bytes); ask for less (queues: a smaller limit)", len(data), max))
		}
	}
	msg, status, internal := replyMsg(reply, res, data, err)
	if reply != "" {
		if perr := s.nc.PublishMsg(msg); perr != nil {
			// Nothing reached the caller: count what really happened.
			status, internal = http.StatusInternalServerError, fmt.Errorf("reply not sent: %w", perr)
		}
	}
	d := time.Since(start)
	s.metrics.observe("nats", subject, command, status, d)
	attrs := []slog.Attr{
		slog.String("subject", subject), slog.Int("status", status),
		slog.String("principal", principal), slog.Duration("duration", d),
	}
	level := logLevel(status, internal)
	if level == slog.LevelInfo && readCommands[command] {
		level = slog.LevelDebug // reads are many and change nothing
	}
	s.log.LogAttrs(context.Background(), level, "nats request", append(attrs, errAttr(internal)...)...)
}

// replyHeaderRoom is kept free of the max payload for the reply's headers.
const replyHeaderRoom = 512

// replyMsg is the reply to send: the encoded success body, or err as a
// micro error with the HTTP API's error document. internal is the error to
// log (its text is not sent).
func replyMsg(reply string, res result, data []byte, err error) (msg *nats.Msg, status int, internal error) {
	msg = &nats.Msg{Subject: reply, Header: nats.Header{}, Data: data}
	msg.Header.Set("Content-Type", "application/json")
	if err == nil {
		status = http.StatusOK
		if res.created {
			status = http.StatusCreated
		}
		if res.accepted {
			status = http.StatusAccepted
		}
		if res.replayed {
			msg.Header.Set(HeaderReplayed, "true")
		}
		return msg, status, nil
	}
	status, body, isInternal := classify(err)
	if isInternal {
		internal = err
		if body.Error.Code == CodeInternal {
			body.Error.Message = "internal error"
		}
	}
	if ra := retryAfterSeconds(err); ra != "" {
		msg.Header.Set("Retry-After", ra)
	}
	msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(status))
	msg.Header.Set(micro.ErrorHeader, body.Error.Code)
	msg.Data, _ = json.Marshal(body)
	return msg, status, internal
}
