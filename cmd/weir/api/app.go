package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/hotwallet"
)

// App is the application layer as the API's transports see it, for another
// adapter of the same principals (the web console, cmd/weir/console): each
// method checks the role its command needs (commandRoles, as both
// transports do before reading a body), then runs the very op the HTTP API
// and the NATS service run — same account scoping, same refusals, same
// error codes. An adapter adds no rule of its own and never calls weir's
// HTTP API or NATS service from inside the process.
//
// What App leaves to its adapter is what each transport decides for itself:
// who the caller is (Authenticate), the request budget (Allow,
// AllowFailedAuth: the limiter shared with the API), and turning an error
// into what its user sees (Classify).
type App struct {
	ops        *ops
	principals *Principals
	limiter    *RateLimiter
	webhooks   Webhooks
	timeout    time.Duration
}

// AppConfig is what App needs: the same values NewHTTPHandler takes.
type AppConfig struct {
	Intake     *sagas.Intake // required
	Principals *Principals   // required
	Queues     Queues
	History    History
	Wallet     Wallet
	Webhooks   Webhooks
	// RateLimit: share the API's (nil: unlimited).
	RateLimit *RateLimiter
	Now       func() time.Time
	// CommandTimeout bounds each call (DefaultCommandTimeout when zero).
	CommandTimeout time.Duration
}

// NewApp returns the application layer of cfg.
func NewApp(cfg AppConfig) *App {
	if cfg.Intake == nil || cfg.Principals == nil {
		panic("api: AppConfig needs Intake and Principals")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	return &App{
		ops:        &ops{intake: cfg.Intake, queues: cfg.Queues, history: cfg.History, wallet: cfg.Wallet, now: cfg.Now},
		principals: cfg.Principals, limiter: cfg.RateLimit, webhooks: cfg.Webhooks, timeout: cfg.CommandTimeout,
	}
}

// Authenticate resolves a bare token, as a Bearer header or a NATS connect
// would be.
func (a *App) Authenticate(token string) (Principal, bool) { return a.principals.ByToken(token) }

// Allow takes one request from the principal's budget, the one the HTTP
// API and the NATS service draw on (429 rate_limited).
func (a *App) Allow(p Principal) error { return a.limiter.allow(p.Name) }

// AllowFailedAuth takes one failed authentication from the budget of r's
// client address, as the HTTP API does for a wrong bearer token.
func (a *App) AllowFailedAuth(r *http.Request) error { return a.limiter.allow(failedAuthKey(r)) }

// Classify is what a refusal shows: its HTTP status and error document,
// exactly as the API answers it. internal errors have no text to show
// (the caller logs err).
func Classify(err error) (status int, detail ErrorDetail, internal bool) {
	status, body, internal := classify(err)
	return status, body.Error, internal
}

// RetryAfter is err's Retry-After value in seconds ("" when none).
func RetryAfter(err error) string { return retryAfterSeconds(err) }

// run checks command's role and runs fn on a context detached from the
// caller (a command, once started, is decided whether or not the browser
// still waits), bounded by the command timeout.
func (a *App) run(ctx context.Context, p Principal, command string, fn func(context.Context) (result, error)) (any, error) {
	if err := authorize(p, command); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	res, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	return res.body, nil
}

func typed[T any](body any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	v, ok := body.(T)
	if !ok {
		return zero, fmt.Errorf("api: app: reply is %T, want %T", body, zero)
	}
	return v, nil
}

// Withdrawal is GET /v1/withdrawals/{id}.
func (a *App) Withdrawal(ctx context.Context, p Principal, id string) (aggregate.WithdrawalView, error) {
	return typed[aggregate.WithdrawalView](a.run(ctx, p, cmdGet, func(ctx context.Context) (result, error) {
		return a.ops.withdrawal(ctx, p, id)
	}))
}

// Events is GET /v1/withdrawals/{id}/events.
func (a *App) Events(ctx context.Context, p Principal, id string) (EventsBody, error) {
	return typed[EventsBody](a.run(ctx, p, cmdEvents, func(ctx context.Context) (result, error) {
		return a.ops.events(ctx, p, id)
	}))
}

// Approve is POST /v1/withdrawals/{id}/approve.
func (a *App) Approve(ctx context.Context, p Principal, id string) (aggregate.WithdrawalView, error) {
	return typed[aggregate.WithdrawalView](a.run(ctx, p, cmdApprove, func(ctx context.Context) (result, error) {
		return a.ops.approve(ctx, p, id)
	}))
}

// Decline is POST /v1/withdrawals/{id}/decline {"reason"}.
func (a *App) Decline(ctx context.Context, p Principal, id, reason string) (aggregate.WithdrawalView, error) {
	body, err := json.Marshal(declineBody{Reason: reason})
	if err != nil {
		return aggregate.WithdrawalView{}, fmt.Errorf("api: app: encode decline: %w", err)
	}
	return typed[aggregate.WithdrawalView](a.run(ctx, p, cmdDecline, func(ctx context.Context) (result, error) {
		return a.ops.decline(ctx, p, id, body)
	}))
}

// Cancel is POST /v1/withdrawals/{id}/cancel.
func (a *App) Cancel(ctx context.Context, p Principal, id string) (aggregate.WithdrawalView, error) {
	return typed[aggregate.WithdrawalView](a.run(ctx, p, cmdCancel, func(ctx context.Context) (result, error) {
		return a.ops.cancel(ctx, p, id)
	}))
}

// Queue is GET /v1/queues/{name} (approvals, ready, in-flight).
func (a *App) Queue(ctx context.Context, p Principal, name string, page Page) (ItemsBody, error) {
	return typed[ItemsBody](a.run(ctx, p, cmdQueue, func(context.Context) (result, error) {
		return a.ops.queue(p, name, page)
	}))
}

// List is GET /v1/withdrawals.
func (a *App) List(ctx context.Context, p Principal, q ListQuery) (ListBody, error) {
	return typed[ListBody](a.run(ctx, p, cmdList, func(ctx context.Context) (result, error) {
		return a.ops.list(ctx, p, q)
	}))
}

// Account is GET /v1/accounts/{id}.
func (a *App) Account(ctx context.Context, p Principal, id string) (aggregate.AccountView, error) {
	return typed[aggregate.AccountView](a.run(ctx, p, cmdAccount, func(ctx context.Context) (result, error) {
		return a.ops.account(ctx, p, id)
	}))
}

// Statement is GET /v1/accounts/{id}/statement.
func (a *App) Statement(ctx context.Context, p Principal, q StatementQuery) (StatementBody, error) {
	return typed[StatementBody](a.run(ctx, p, cmdStatement, func(ctx context.Context) (result, error) {
		return a.ops.statement(ctx, p, q)
	}))
}

// Policy is GET /v1/policy: the policy in force and the open proposal.
func (a *App) Policy(ctx context.Context, p Principal) (PolicyChangeView, error) {
	return typed[PolicyChangeView](a.run(ctx, p, cmdPolicyGet, func(ctx context.Context) (result, error) {
		return a.ops.policy(ctx, p)
	}))
}

// PolicyHistory lists every version of the policy that came into force,
// oldest first (who proposed it, who approved it, when). Any principal may
// read it, as it may read the policy in force.
func (a *App) PolicyHistory(ctx context.Context, p Principal) ([]sagas.PolicyVersion, error) {
	return typed[[]sagas.PolicyVersion](a.run(ctx, p, cmdPolicyGet, func(ctx context.Context) (result, error) {
		vs, err := a.ops.intake.PolicyHistory(ctx)
		return result{body: vs}, err
	}))
}

// Wallet is GET /v1/wallet.
func (a *App) Wallet(ctx context.Context, p Principal) (hotwallet.Status, error) {
	return typed[hotwallet.Status](a.run(ctx, p, cmdWallet, func(context.Context) (result, error) {
		return a.ops.walletStatus()
	}))
}

// Webhooks is GET /v1/webhooks (operator).
func (a *App) Webhooks(ctx context.Context, p Principal) (WebhookList, error) {
	return typed[WebhookList](a.run(ctx, p, cmdWebhookList, func(ctx context.Context) (result, error) {
		return webhookList(ctx, a.webhooks)
	}))
}

// Deliveries is GET /v1/webhooks/{id}/deliveries (operator).
func (a *App) Deliveries(ctx context.Context, p Principal, id string, page Page) (DeliveryList, error) {
	return typed[DeliveryList](a.run(ctx, p, cmdWebhookDeliveries, func(ctx context.Context) (result, error) {
		return webhookDeliveries(ctx, a.webhooks, id, page)
	}))
}
