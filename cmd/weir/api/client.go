package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// Client is the typed NATS client of the service StartService runs: one
// method per Subject* constant, the wire format of StartService's doc, and
// replies decoded into the same view types the service encodes. The CLI,
// the demo and the bench all talk to weir through it.
//
// A Client is safe for concurrent use. It acts as one principal (its
// token); As gives a Client acting as another over the same connection.
type Client struct {
	nc      *nats.Conn
	token   string
	timeout time.Duration
	owned   bool // Close closes nc
}

// DefaultClientTimeout bounds one call when ClientConfig.Timeout is zero.
const DefaultClientTimeout = 30 * time.Second

// ClientConfig says how Dial connects.
type ClientConfig struct {
	URL   string // NATS URL(s), comma-separated
	Token string // the principal's bearer token
	// Timeout bounds the connection and each call (DefaultClientTimeout
	// when zero).
	Timeout time.Duration
	Name    string // connection name the server shows
	// Options are added to the connection's options (credentials, TLS).
	Options []nats.Option
}

// Dial connects to NATS and returns a Client that owns the connection
// (Close closes it). It does not reconnect: a command-line call either
// reaches the server or says so.
func Dial(cfg ClientConfig) (*Client, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultClientTimeout
	}
	opts := append([]nats.Option{nats.Name(cfg.Name), nats.Timeout(cfg.Timeout), nats.MaxReconnects(0)}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", eventstore.RedactURL(cfg.URL), err)
	}
	c := NewClient(nc, cfg.Token)
	c.timeout, c.owned = cfg.Timeout, true
	return c, nil
}

// NewClient is a Client on an existing connection (which it does not
// close), acting with token.
func NewClient(nc *nats.Conn, token string) *Client {
	return &Client{nc: nc, token: token, timeout: DefaultClientTimeout}
}

// As returns a Client on the same connection acting with another token.
func (c *Client) As(token string) *Client {
	cc := *c
	cc.token, cc.owned = token, false
	return &cc
}

// Close closes the connection if Dial made it.
func (c *Client) Close() {
	if c.owned {
		c.nc.Close()
	}
}

// Reply is a successful reply: the decoded value and the body exactly as
// the service sent it (the HTTP API's JSON for the same call).
type Reply[T any] struct {
	Value    T
	Data     []byte
	Replayed bool // Idempotent-Replayed: true (an identical retry)
}

// Refusal is the service's refusal of a call: the HTTP status, the error
// document, and the body as sent.
type Refusal struct {
	Status int
	ErrorDetail
	Data []byte
}

func (r *Refusal) Error() string {
	s := r.Code + ": " + r.Message
	if r.Field != "" && !strings.Contains(r.Message, r.Field) {
		s += " (field " + r.Field + ")"
	}
	return s
}

// Call sends body (marshalled unless it is already []byte) on subject and
// decodes a successful reply into T. A refusal is a *Refusal, and the
// returned Reply's Data still holds the body. Transport failures are
// errors worded for a person.
func Call[T any](ctx context.Context, c *Client, subject string, body any) (Reply[T], error) {
	var r Reply[T]
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return r, fmt.Errorf("%s: %w", subject, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		msg.Header.Set(HeaderAuthorization, "Bearer "+c.token)
	}
	m, err := c.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return r, fmt.Errorf("no weir service at %s (is `weir serve` running and connected to this NATS?): %w", c.nc.ConnectedUrlRedacted(), err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return r, fmt.Errorf("no reply from the weir service at %s within %s: %w", c.nc.ConnectedUrlRedacted(), c.timeout, err)
	case err != nil:
		return r, fmt.Errorf("%s: %w", subject, err)
	}
	r.Data = m.Data
	if status := m.Header.Get(micro.ErrorCodeHeader); status != "" {
		return r, refusal(m, status)
	}
	r.Replayed = m.Header.Get(HeaderReplayed) == "true"
	if err := json.Unmarshal(m.Data, &r.Value); err != nil {
		return r, fmt.Errorf("%s: the service's reply is not a %T: %w", subject, r.Value, err)
	}
	return r, nil
}

// refusal decodes an error reply; a reply that is not our error document
// (micro's own errors) is described from its headers.
func refusal(m *nats.Msg, status string) *Refusal {
	f := &Refusal{Data: m.Data}
	f.Status, _ = strconv.Atoi(status)
	var eb ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
		f.ErrorDetail = eb.Error
		return f
	}
	f.Code = m.Header.Get(micro.ErrorHeader)
	if f.Code == "" {
		f.Code = "error"
	}
	f.Message = strings.TrimSpace(string(m.Data))
	if f.Message == "" {
		f.Message = "status " + status
	}
	return f
}

// WithdrawalRequest is the body of a withdrawal request
// (POST /v1/withdrawals, weir.cmd.withdrawal.request).
type WithdrawalRequest struct {
	OperationID string `json:"operation_id"`
	Account     string `json:"account"`
	ToAddress   string `json:"to_address"`
	Amount      string `json:"amount"`
	Asset       string `json:"asset"`
}

// CreditRequest is the body of weir.cmd.account.credit.
type CreditRequest struct {
	Account  string `json:"account"`
	CreditID string `json:"credit_id"`
	Amount   string `json:"amount"`
}

type idRequest struct {
	ID string `json:"id"`
}

// Request asks for a withdrawal (role requester).
func (c *Client) Request(ctx context.Context, req WithdrawalRequest) (Reply[aggregate.WithdrawalView], error) {
	return Call[aggregate.WithdrawalView](ctx, c, SubjectWithdrawalRequest, req)
}

// Approve approves withdrawal id (role approver).
func (c *Client) Approve(ctx context.Context, id string) (Reply[aggregate.WithdrawalView], error) {
	return Call[aggregate.WithdrawalView](ctx, c, SubjectWithdrawalApprove, idRequest{id})
}

// Cancel cancels withdrawal id (its requester or an operator).
func (c *Client) Cancel(ctx context.Context, id string) (Reply[aggregate.WithdrawalView], error) {
	return Call[aggregate.WithdrawalView](ctx, c, SubjectWithdrawalCancel, idRequest{id})
}

// Decline declines withdrawal id awaiting approval, with reason (role
// approver).
func (c *Client) Decline(ctx context.Context, id, reason string) (Reply[aggregate.WithdrawalView], error) {
	return Call[aggregate.WithdrawalView](ctx, c, SubjectWithdrawalDecline, DeclineRequest{ID: id, Reason: reason})
}

// DeclineRequest is the body of weir.cmd.withdrawal.decline.
type DeclineRequest struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// List pages the withdrawal history (newest first) as GET /v1/withdrawals.
func (c *Client) List(ctx context.Context, q ListQuery) (Reply[ListBody], error) {
	return Call[ListBody](ctx, c, SubjectWithdrawalList, q)
}

// Statement pages an account's movements (newest first).
func (c *Client) Statement(ctx context.Context, q StatementQuery) (Reply[StatementBody], error) {
	return Call[StatementBody](ctx, c, SubjectAccountStatement, q)
}

// Withdrawal reads withdrawal id.
func (c *Client) Withdrawal(ctx context.Context, id string) (Reply[aggregate.WithdrawalView], error) {
	return Call[aggregate.WithdrawalView](ctx, c, SubjectWithdrawalGet, idRequest{id})
}

// Events lists withdrawal id's events.
func (c *Client) Events(ctx context.Context, id string) (Reply[EventsBody], error) {
	return Call[EventsBody](ctx, c, SubjectWithdrawalEvents, idRequest{id})
}

// Credit credits an account (role operator). Above the service's
// --credit-review-above the credit waits for a second operator: the reply
// then carries PendingCredit and the balances are unchanged.
func (c *Client) Credit(ctx context.Context, req CreditRequest) (Reply[CreditView], error) {
	return Call[CreditView](ctx, c, SubjectAccountCredit, req)
}

// ApproveCredit is a second operator's approval of a credit waiting for
// review (role operator, not the credit's maker).
func (c *Client) ApproveCredit(ctx context.Context, account, creditID string) (Reply[aggregate.AccountView], error) {
	return Call[aggregate.AccountView](ctx, c, SubjectAccountCreditApprove, creditApproveBody{account, creditID})
}

// Account reads account id's balances.
func (c *Client) Account(ctx context.Context, id string) (Reply[aggregate.AccountView], error) {
	return Call[aggregate.AccountView](ctx, c, SubjectAccountGet, idRequest{id})
}

// Policy reads the policy in force and the open proposal, if any.
func (c *Client) Policy(ctx context.Context) (Reply[PolicyChangeView], error) {
	return Call[PolicyChangeView](ctx, c, SubjectPolicyGet, []byte("{}"))
}

// SetPolicy proposes a new policy version (role operator); doc is the
// policy JSON as PUT /v1/policy takes it, sent as is. Under a quorum of 1
// it is in force at once (the reply is the policy); otherwise the reply
// carries the proposal and how many approvals it needs.
func (c *Client) SetPolicy(ctx context.Context, doc []byte) (Reply[PolicyChangeView], error) {
	return Call[PolicyChangeView](ctx, c, SubjectPolicySet, doc)
}

// ApprovePolicy approves the open policy proposal version (role operator,
// not its proposer).
func (c *Client) ApprovePolicy(ctx context.Context, version int) (Reply[PolicyChangeView], error) {
	return Call[PolicyChangeView](ctx, c, SubjectPolicyApprove, policyVersionRequest{version})
}

// policyVersionRequest is weir.cmd.policy.approve's body.
type policyVersionRequest struct {
	Version int `json:"version"`
}

// QueueSubjects names the subject of each queue.
var QueueSubjects = map[string]string{
	"approvals": SubjectQueueApprovals, "ready": SubjectQueueReady, "in-flight": SubjectQueueInFlight,
}

// Queue lists one page of a work queue: "approvals", "ready" or "in-flight".
func (c *Client) Queue(ctx context.Context, name string, page Page) (Reply[ItemsBody], error) {
	subject, ok := QueueSubjects[name]
	if !ok {
		return Reply[ItemsBody]{}, fmt.Errorf("no queue %q (approvals, ready, in-flight)", name)
	}
	return Call[ItemsBody](ctx, c, subject, page)
}
